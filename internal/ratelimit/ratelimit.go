// Package ratelimit holds Airlock's request budgets: the per-token budget
// shared by the authenticated endpoints (the REST API and /mcp), so a
// token's budget is one whichever door it uses (Limiter); and the budget
// of failed authentications per client address and overall, shared by
// the REST API, /mcp and the inbox's sign-in (Guard).
package ratelimit

import (
	"sync"
	"time"
)

// Limiter is a token bucket per API token: each holds up to burst requests
// and refills at rate per second. Buckets are keyed by token ID, after
// authentication, so only real tokens get one and the map stays as small as
// the token table.
type Limiter struct {
	rate  float64
	burst float64
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

// bucket is a token bucket; its rate and burst are its owner's.
type bucket struct {
	tokens float64
	last   time.Time
}

// refill adds what rate per second earned since the last refill, up to
// burst.
func (b *bucket) refill(now time.Time, rate, burst float64) {
	if elapsed := now.Sub(b.last).Seconds(); elapsed > 0 {
		b.tokens = min(burst, b.tokens+elapsed*rate)
		b.last = now
	}
}

// take takes one from a refilled bucket when it holds one; else it
// returns false and how long until it will, at rate per second.
func (b *bucket) take(rate float64) (bool, time.Duration) {
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, b.wait(rate)
}

// wait is how long until a refilled bucket holds one, at rate per second.
func (b *bucket) wait(rate float64) time.Duration {
	wait := time.Duration((1 - b.tokens) / rate * float64(time.Second))
	return max(wait, time.Millisecond)
}

// New returns a Limiter that refills rate requests per second up to burst.
// now is the clock (time.Now outside tests).
func New(rate float64, burst int, now func() time.Time) *Limiter {
	return &Limiter{rate: rate, burst: float64(burst), now: now, buckets: map[string]*bucket{}}
}

// Allow takes one request from key's bucket. When the bucket is empty it
// returns false and how long until a request would be allowed.
func (l *Limiter) Allow(key string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
	}
	b.refill(now, l.rate, l.burst)
	return b.take(l.rate)
}
