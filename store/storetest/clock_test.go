package storetest

import (
	"sync"
	"testing"
	"time"
)

func TestFakeClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c := NewFakeClock(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now() = %v, want %v", got, start)
	}
	if got := c.Advance(time.Minute); !got.Equal(start.Add(time.Minute)) || !c.Now().Equal(got) {
		t.Fatalf("Advance(1m) = %v, Now() = %v, want %v", got, c.Now(), start.Add(time.Minute))
	}
	c.Set(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("after Set, Now() = %v, want %v", got, start)
	}

	// Concurrent use is safe (run with -race) and loses no advance.
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() { c.Advance(time.Microsecond); _ = c.Now() })
	}
	wg.Wait()
	if got, want := c.Now(), start.Add(100*time.Microsecond); !got.Equal(want) {
		t.Fatalf("after 100 concurrent Advance(1µs), Now() = %v, want %v", got, want)
	}
}
