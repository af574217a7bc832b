package provider

import (
	"sync"
	"time"

	"github.com/airlockhq/airlock/storetest"
)

// fakeClock is the conformance suite's clock: it moves only when a test
// moves it, so a test can stand exactly at a deadline.
type fakeClock = storetest.FakeClock

func newFakeClock(start time.Time) *fakeClock { return storetest.NewFakeClock(start) }

// shiftedClock is the real clock moved by an offset a test can change, so
// requests can be made "in the past" and found overdue when the real
// scheduler starts.
type shiftedClock struct {
	mu     sync.Mutex
	offset time.Duration
}

// Now returns the real time plus the offset, truncated like the system clock.
func (c *shiftedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset).UTC().Truncate(time.Microsecond)
}

// SetOffset changes the offset.
func (c *shiftedClock) SetOffset(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset = d
}
