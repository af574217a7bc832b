//go:build unix

package bench

import (
	"syscall"
	"time"
)

// raiseFDLimit raises the process's limit on open files to need where it
// is lower and may be raised — the soft limit up to the hard one, and the
// hard one too where the process may (root, up to fs.nr_open) — and
// returns the soft limit then in force, or 0 if unknown. The wait
// scenario's in-process servers hold both ends of every waiter's
// connection.
func raiseFDLimit(need int) int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	if want := uint64(need); rl.Cur < want {
		raised := rl
		raised.Cur, raised.Max = want, max(rl.Max, want)
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) != nil && rl.Cur < rl.Max {
			raised.Cur, raised.Max = rl.Max, rl.Max
			syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised)
		}
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			return 0
		}
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
