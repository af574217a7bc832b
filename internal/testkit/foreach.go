package testkit

import "sync"

// ForEach calls fn(w, i) for every i from 0 to n-1, on workers goroutines
// at once (w is the calling worker's number, from 0), and returns when
// every call has: the way tests make many requests a few at a time.
func ForEach(n, workers int, fn func(w, i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range next {
				fn(w, i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
