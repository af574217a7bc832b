package bench

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
)

// A server's CPU time is read from /proc/<pid>/stat: the user and system
// time of all the process's threads, in clock ticks. The kernel scales the
// two so that their sum is the scheduler's exact run time, so the figure is
// exact to one tick; a run of a few seconds makes that tick negligible.

// userHZ is Linux's clock tick as /proc reports it (USER_HZ): 100 on every
// architecture Go supports, whatever the kernel's own HZ.
const userHZ = 100

// procCPUAvailable reports whether this system has /proc/<pid>/stat.
func procCPUAvailable() bool { return runtime.GOOS == "linux" }

// procCPU returns the CPU time (user and system, all threads) process pid
// has used so far.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStat(b)
}

// parseProcStat reads utime and stime (fields 14 and 15) from the content
// of a /proc/<pid>/stat file. The second field, the command name in
// parentheses, may itself hold spaces and parentheses: the fields are
// counted from the last ')'.
func parseProcStat(b []byte) (time.Duration, error) {
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc stat %.40q: no command name in parentheses", b)
	}
	// After the name: state (field 3), ppid (4), …, utime (14), stime (15).
	f := bytes.Fields(b[end+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat %.40q: %d fields after the command name, want at least 13", b, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("/proc stat: utime or stime %q is not a tick count", s)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}

// rssBytes returns this process's resident memory (VmRSS), or 0 where
// /proc/self/status cannot tell.
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}
