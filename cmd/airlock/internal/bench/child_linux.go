package bench

import "syscall"

// childProcAttr has the kernel kill a run's server process when the run
// dies, even by SIGKILL, rather than leave it serving.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
