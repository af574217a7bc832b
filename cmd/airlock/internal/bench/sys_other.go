//go:build !unix

package bench

import "time"

// raiseFDLimit returns 0: the limit is unknown here.
func raiseFDLimit(int) int { return 0 }

// cpuTime returns -1: the process's CPU time is unknown here.
func cpuTime() time.Duration { return -1 }
