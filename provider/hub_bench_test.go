package provider

import (
	"fmt"
	"sync"
	"testing"
)

// BenchmarkHubFanOut measures one publish waking many long-poll waiters:
// the time from the publish until every waiter has received its wake-up.
// "one request" is 10,000 waiters on one request (a decision many watch);
// "many requests" is 10,000 requests with one waiter each, published
// together (deleting an instance cancels all its requests at once).
func BenchmarkHubFanOut(b *testing.B) {
	const waiters = 10_000
	for _, shape := range []string{"one request", "many requests"} {
		b.Run(fmt.Sprintf("%s/%d waiters", shape, waiters), func(b *testing.B) {
			h := newHub()
			ids := make([]string, waiters)
			for i := range ids {
				ids[i] = "apr_1"
				if shape == "many requests" {
					ids[i] = fmt.Sprintf("apr_%d", i)
				}
			}
			published := ids[:1]
			if shape == "many requests" {
				published = ids
			}
			chans := make([]<-chan struct{}, waiters)
			for i, id := range ids {
				w := h.subscribe(id, "tok_bench")
				defer h.unsubscribe(w)
				chans[i] = w.woken
			}
			// Each waiter is a goroutine blocked on its channel, as a
			// long-poll is; a round ends when all have woken.
			woken := make(chan struct{}, waiters)
			var wg sync.WaitGroup
			defer wg.Wait()
			stop := make(chan struct{})
			defer close(stop)
			for i := range waiters {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						case <-chans[i]:
							woken <- struct{}{}
						}
					}
				})
			}
			b.ReportAllocs()
			for b.Loop() {
				h.publish(published...)
				for range waiters {
					<-woken
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/waiters, "ns/waiter")
		})
	}
}

// BenchmarkHubSubscribe measures a long-poll's subscribe and unsubscribe
// while 10,000 others are subscribed.
func BenchmarkHubSubscribe(b *testing.B) {
	h := newHub()
	for i := range 10_000 {
		defer h.unsubscribe(h.subscribe(fmt.Sprintf("apr_%d", i), "tok_bench"))
	}
	b.ReportAllocs()
	for b.Loop() {
		h.unsubscribe(h.subscribe("apr_new", "tok_bench"))
	}
}

// BenchmarkHubTokensChanged measures what a revocation costs the hub with
// 10,000 long-polls waiting, of 100 tokens: it visits every waiter to
// wake those of the revoked token.
func BenchmarkHubTokensChanged(b *testing.B) {
	h := newHub()
	for i := range 10_000 {
		defer h.unsubscribe(h.subscribe(fmt.Sprintf("apr_%d", i), fmt.Sprintf("tok_%d", i%100)))
	}
	b.ReportAllocs()
	for b.Loop() {
		h.tokensChanged("tok_7")
	}
}
