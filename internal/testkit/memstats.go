package testkit

import "runtime"

// SettledMemStats collects garbage until the goroutine stacks stop
// shrinking and returns the memory statistics then. A collection halves
// a parked goroutine's stack one step at a time, so what idle goroutines
// hold shows only after several.
func SettledMemStats() runtime.MemStats {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	for range 8 {
		before := m.StackInuse
		runtime.GC()
		runtime.ReadMemStats(&m)
		if m.StackInuse >= before {
			break
		}
	}
	return m
}
