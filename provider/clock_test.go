package provider

import (
	"sync"
	"time"
)

// fakeClock is an airlock.Clock that moves only when a test moves it, so a
// test can stand exactly at a deadline. It is safe for concurrent use.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock(start time.Time) *fakeClock { return &fakeClock{now: start} }

// Now returns the clock's time.
func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t.
func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Advance moves the clock forward by d and returns the new time.
func (c *fakeClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

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
