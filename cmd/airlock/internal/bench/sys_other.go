//go:build !unix

package bench

import "time"

// fdLimit returns 0: the limit is unknown here.
func fdLimit() int { return 0 }

// cpuTime returns -1: the process's CPU time is unknown here.
func cpuTime() time.Duration { return -1 }
