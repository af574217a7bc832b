package testkit

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// Burst is the load of one cycle of a kill-and-restart test: workers call
// a step over and over while the test waits for Enough, kills a server
// mid-load, and then calls Stop.
type Burst struct {
	// Enough is closed once the steps have been acknowledged want times.
	Enough <-chan struct{}
	stop   chan struct{}
	wg     sync.WaitGroup
}

// StartBurst starts workers goroutines; worker w calls step(rng, w, n)
// for n = 0, 1, 2, ... until Stop, with an rng of its own seeded by seed
// and w, so that a cycle's load can be told apart from another's. step
// reports whether the server acknowledged the operation; Enough is closed
// at the want-th acknowledged one.
func StartBurst(workers int, want int64, seed uint64, step func(rng *rand.Rand, w, n int) bool) *Burst {
	enough := make(chan struct{})
	b := &Burst{Enough: enough, stop: make(chan struct{})}
	var acked atomic.Int64
	for w := range workers {
		b.wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for n := 0; ; n++ {
				select {
				case <-b.stop:
					return
				default:
				}
				if step(rng, w, n) && acked.Add(1) == want {
					close(enough)
				}
			}
		})
	}
	return b
}

// Stop ends the workers and waits for them to return.
func (b *Burst) Stop() {
	close(b.stop)
	b.wg.Wait()
}
