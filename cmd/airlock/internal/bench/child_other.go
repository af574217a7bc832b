//go:build !linux

package bench

import "syscall"

// childProcAttr returns nil: without Linux's Pdeathsig, a run's server
// process stops when its stdin ends, which the run's death also causes.
func childProcAttr() *syscall.SysProcAttr { return nil }
