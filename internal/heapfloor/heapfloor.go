// Package heapfloor keeps the Go garbage collector from running after
// every few megabytes a server with a small heap allocates.
//
// With GOGC at its default of 100, a collection starts once the heap has
// grown by as much as survived the last one. Airlock's server keeps little
// between requests (2–3 MiB under load, on SQLite), so it collected 33
// times a second through a run of the consume benchmark. Each collection takes a
// quarter of the CPU while it marks and slows the requests that allocate
// meanwhile, and on two cores that showed in the tail of every latency.
//
// Start sets a floor under the heap goal, the size at which the next
// collection starts: after each collection it sets GOGC so that the goal is
// the larger of the floor and GOGC 100's twice the live heap. Once the live
// heap is half the floor or more (16 MiB at the default floor; a burst of
// large reads, or 100,000 long-polls at about 3 GiB), GOGC is 100 again and
// the floor costs nothing; below that, it costs at most the floor in memory.
// GOGC set in the environment wins, as does a GOMEMLIMIT the heap would
// pass.
package heapfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// DefaultFloor is the least heap goal: on the consume benchmark, 32 MiB
// took the server from 33 collections a second to 3.5.
const DefaultFloor = 32 << 20

// runtimeHeapMinimum is the Go runtime's least heap goal at GOGC 100,
// which it scales with GOGC: at GOGC p the goal is at least 4 MiB × p/100,
// however small the live heap.
const runtimeHeapMinimum = 4 << 20

var (
	mu      sync.Mutex
	running *tuner
)

type tuner struct {
	floor   uint64
	stopped atomic.Bool
	sample  []metrics.Sample
	percent int
	// collected, set by tests, runs after each adjustment with the GOGC
	// set.
	collected func(percent int)
}

// Start keeps the heap goal of this process at floor bytes or more until
// stop is called; it returns a stop that does nothing when GOGC is set in
// the environment or Start is already running.
func Start(floor uint64) (stop func()) {
	return start(floor, nil)
}

func start(floor uint64, collected func(int)) (stop func()) {
	if _, set := os.LookupEnv("GOGC"); set || floor == 0 {
		return func() {}
	}
	mu.Lock()
	defer mu.Unlock()
	if running != nil {
		return func() {}
	}
	t := &tuner{floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}, percent: 100, collected: collected}
	running = t
	t.arm()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if running != t {
			return
		}
		t.stopped.Store(true)
		running = nil
		debug.SetGCPercent(100)
	}
}

// sentinel is garbage from birth: its finalizer runs after the
// collection that finds it, and arms the next one.
type sentinel struct{ _ [16]byte }

func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		if t.stopped.Load() {
			return
		}
		t.adjust()
		t.arm()
	})
}

// adjust sets GOGC from the heap the last collection left live.
func (t *tuner) adjust() {
	metrics.Read(t.sample)
	live := uint64(0)
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		live = t.sample[0].Value.Uint64()
	}
	p := PercentFor(live, t.floor)
	mu.Lock()
	defer mu.Unlock()
	if t.stopped.Load() {
		return // stop has set GOGC back: leave it
	}
	if p != t.percent {
		debug.SetGCPercent(p)
		t.percent = p
	}
	if t.collected != nil {
		t.collected(p)
	}
}

// PercentFor is the GOGC that sets the heap goal of a heap of live bytes
// at the larger of floor and twice live (GOGC 100). The runtime's own
// minimum, which grows with GOGC, caps it: at floor × 100 / 4 MiB the
// minimum alone is the floor.
func PercentFor(live, floor uint64) int {
	ceiling := max(floor*100/runtimeHeapMinimum, 100)
	if live == 0 {
		return int(ceiling)
	}
	if 2*live >= floor {
		return 100
	}
	p := ((floor-live)*100 + live - 1) / live // rounded up: the goal is never below the floor
	return int(min(p, ceiling))
}
