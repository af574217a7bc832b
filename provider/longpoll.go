package provider

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
)

// Request reads a request the caller may see. With wait > 0 it long-polls:
// it returns as soon as the request is terminal or when wait (at most
// MaxWait) has passed, whichever is first. When ctx ends first it returns
// ctx's error.
func (s *Service) Request(ctx context.Context, c airlock.Caller, id string, wait time.Duration) (airlock.Request, error) {
	r, err := s.Await(ctx, &c, id, wait, nil)
	if r == nil {
		return airlock.Request{}, err
	}
	return *r, err
}

// Await is Request for a server that holds many long-polls at once, as the
// REST API does (10,000 idle waiters are a target): what a parked waiter
// keeps is made small. It returns the request by pointer, so a caller's
// frame need not hold one; it waits in small frames, the store's reads
// (deep, through the SQLite driver) having returned before it parks, so
// the garbage collector can shrink the waiting goroutine's stack; it keeps
// nothing of the request but its deadline while it waits; and one timer
// serves both the request's deadline and the end of the wait. The caller
// is passed by pointer for the same reason: a Caller by value is copied
// into every frame it passes through; Await keeps c only until it returns.
//
// When stop, which may be nil, is closed before the answer, Await returns
// the request as it is then: a server that is shutting down answers its
// long-polls at once, and their clients poll again elsewhere.
//
// A waiter's token is checked again at every read after it subscribed, so
// a long-poll never answers a token revoked while it waited: the
// revocation wakes it (RevokeToken in this process, the change feed from
// another replica, the token stamp from another process on a SQLite file:
// watchTokenStamp), and it answers TokenRefused.
func (s *Service) Await(ctx context.Context, c *airlock.Caller, id string, wait time.Duration, stop <-chan struct{}) (*airlock.Request, error) {
	r, _, err := s.look(ctx, c, id, wait <= 0, false)
	if r != nil || err != nil {
		return r, err
	}
	w := s.hub.subscribe(id, c.ID)
	defer s.hub.unsubscribe(w)
	end := time.Now().Add(min(wait, s.maxWait))
	timer := time.NewTimer(time.Until(end))
	defer timer.Stop()
	for {
		// Read after subscribing, so a change between the first read and
		// the subscription is not missed; and check the token again, so a
		// revocation between the caller's authentication and the
		// subscription is not missed either.
		var deadline time.Time
		r, deadline, err = s.look(ctx, c, id, false, true)
		if r != nil || err != nil {
			return r, err
		}
		timer.Reset(s.sleepFor(deadline, end))
		select {
		case <-w.woken:
		case <-timer.C:
			if !time.Now().Before(end) {
				r, _, err = s.look(ctx, c, id, true, true)
				return r, err
			}
		case <-stop:
			r, _, err = s.look(ctx, c, id, true, true)
			return r, err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// sleepFor returns how long a waiter may sleep: until the request's
// deadline, should the scheduler be late, or the end of its wait, if that
// comes first. Not inlined, to keep Await's frame small.
//
//go:noinline
func (s *Service) sleepFor(deadline, end time.Time) time.Duration {
	return min(max(deadline.Sub(s.clock.Now()), 0)+time.Millisecond, time.Until(end))
}

// look reads request id for a waiter. It returns the request once the
// waiter is done with it (when it is terminal, or done is set), and else
// only its deadline, so the waiter holds nothing else while it waits.
// With recheck it reads with the waiters woken at once (readWoken) and
// checks that c's token is still live (recheck says how). It is never
// inlined: its frame, the read's and the driver's are off the stack
// before the waiter parks.
//
//go:noinline
func (s *Service) look(ctx context.Context, c *airlock.Caller, id string, done, recheck bool) (*airlock.Request, time.Time, error) {
	var r airlock.Request
	var err error
	if recheck {
		// A waiter's read after it subscribed, most often after a
		// wake-up that woke many others: read in a batch (readbatch.go).
		r, err = s.readWoken(ctx, s.recheck(c), id, done)
		if s.remembered == nil {
			if _, refused := s.AuthenticateHash(ctx, c.Hash); refused != nil {
				err = refused
			}
		}
	} else {
		r, err = s.read(ctx, *c, id)
	}
	if recheck && s.remembered != nil && airlock.ErrorCode(err) == airlock.CodeUnauthorized {
		s.remembered.forget(c.Hash) // the store refused the token: do not take it from memory again
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	if !done && !r.State.Terminal() {
		return nil, r.DeadlineAt, nil
	}
	p := new(airlock.Request)
	*p = r
	return p, time.Time{}, nil
}

// recheck returns the caller a waiter's read is made as, so that c's
// token is checked again. A store that checks tokens itself (PostgreSQL)
// makes the check, a new one, with the read's first statement, and once
// more after a read a waiter answers with (readPart). Otherwise look
// looks the token up after the read, which on SQLite costs a stat of the
// token stamp while no token changes (tokencache.go). Checked after the
// read, a revocation that came before what the read saw (a decision made
// after it) is always seen.
func (s *Service) recheck(c *airlock.Caller) airlock.Caller {
	if s.remembered != nil {
		return airlock.Caller{Token: c.Token, Check: airlock.NewTokenCheck(c.Token)}
	}
	return *c
}
