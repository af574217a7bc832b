// Package ratelimit holds Airlock's request budgets: the per-token budget
// shared by the authenticated endpoints (the REST API and /mcp), so a
// token's budget is one whichever door it uses (Limiter); and the budget
// of failed authentications per client address and overall, shared by
// the REST API, /mcp and the inbox's sign-in (Guard).
//
// Each budget is a token bucket of golang.org/x/time/rate, always asked
// with the time of an injected clock (AllowN, ReserveN, TokensAt take
// one), so tests move time by hand.
package ratelimit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// minWait is the least wait a refusal names: a budget a whisker short of
// one request still says when to come back.
const minWait = time.Millisecond

// Limiter is a token bucket per API token: each holds up to burst requests
// and refills at rate per second. Buckets are keyed by token ID, after
// authentication, so only real tokens get one and the map stays as small as
// the token table.
type Limiter struct {
	rate  rate.Limit
	burst int
	now   func() time.Time

	// mu guards buckets, and orders the calls on one bucket by the
	// clock: the clock is read under it, so a bucket never sees time run
	// backwards.
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// New returns a Limiter that refills rate requests per second up to burst.
// now is the clock (time.Now outside tests).
func New(r float64, burst int, now func() time.Time) *Limiter {
	return &Limiter{rate: rate.Limit(r), burst: burst, now: now, buckets: map[string]*rate.Limiter{}}
}

// Allow takes one request from key's bucket. When the bucket is empty it
// returns false and how long until a request would be allowed.
func (l *Limiter) Allow(key string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.buckets[key]
	if b == nil {
		b = rate.NewLimiter(l.rate, l.burst)
		l.buckets[key] = b
	}
	if b.AllowN(now, 1) {
		return true, 0
	}
	return false, wait(b, now, 1)
}

// wait returns how long until b holds n at now, at least minWait; 0 when
// it holds them already. It takes nothing: a reservation it makes to learn
// the delay is cancelled at once.
func wait(b *rate.Limiter, now time.Time, n int) time.Duration {
	if b.TokensAt(now) >= float64(n) {
		return 0
	}
	r := b.ReserveN(now, n)
	if !r.OK() {
		// More than the bucket can hold: only attempts that end can make
		// room (Guard), not time; say the least wait.
		return minWait
	}
	defer r.CancelAt(now)
	return max(r.DelayFrom(now), minWait)
}
