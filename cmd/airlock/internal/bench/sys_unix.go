//go:build unix

package bench

import (
	"syscall"
	"time"
)

// fdLimit returns the process's soft limit on open files, or 0 if unknown.
func fdLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return int(min(rl.Cur, 1<<30))
}

// cpuTime returns the CPU time (user and system) this process has used,
// or -1 if unknown.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
