// Package ratelimit is the per-token request budget shared by Airlock's
// authenticated endpoints (the REST API and /mcp), so a token's budget is
// one, whichever door it uses.
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

type bucket struct {
	tokens float64
	last   time.Time
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
	if elapsed := now.Sub(b.last).Seconds(); elapsed > 0 {
		b.tokens = min(l.burst, b.tokens+elapsed*l.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
	return false, max(wait, time.Millisecond)
}
