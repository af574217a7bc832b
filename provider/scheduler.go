package provider

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
)

// idleRecheck is how long the scheduler sleeps when nothing is pending. It
// is a safety net only: creations wake the scheduler directly.
const idleRecheck = time.Minute

// Run runs the expiry scheduler until ctx ends. It catches up on overdue
// requests at once, then sleeps until the next deadline (not a scan every
// second), and is woken early when a request with an earlier deadline is
// created. Running it in several replicas is safe: expiry is a conditional
// write, so a request expires once whoever gets there first.
func (s *Service) Run(ctx context.Context) error {
	if feed, ok := s.store.(airlock.ChangeFeed); ok {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			s.listen(ctx, feed)
		}()
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-s.kick:
		}
		if _, err := s.ExpireDue(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("expire due requests", "err", err)
		}
		sleep := idleRecheck
		next, ok, err := s.store.NextDeadline(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Error("next deadline", "err", err)
			sleep = time.Second
		case ok:
			sleep = min(max(next.Sub(s.clock.Now()), 0), idleRecheck)
			s.nextWake.Store(next.UnixMicro())
		default:
			s.nextWake.Store(0)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(sleep)
	}
}

// listen relays other replicas' changes to this one's waiters, and keeps
// listening across errors until ctx ends.
func (s *Service) listen(ctx context.Context, feed airlock.ChangeFeed) {
	for ctx.Err() == nil {
		err := feed.Listen(ctx, func(ids []string) {
			if ids == nil {
				s.hub.publishAll()
				return
			}
			s.hub.publish(ids...)
		})
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("change feed stopped; retrying", "err", err)
		s.hub.publishAll()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// wakeSchedulerFor kicks the scheduler when deadline is earlier than what it
// sleeps until.
func (s *Service) wakeSchedulerFor(deadline time.Time) {
	next := s.nextWake.Load()
	if next != 0 && deadline.UnixMicro() >= next {
		return
	}
	s.nextWake.Store(deadline.UnixMicro())
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// ExpireDue expires every pending request whose deadline has come, in
// batches, wakes their waiters and returns how many it expired.
func (s *Service) ExpireDue(ctx context.Context) (int, error) {
	total := 0
	for {
		rs, err := s.store.ExpireDue(ctx, s.batch)
		if err != nil {
			return total, err
		}
		if len(rs) == 0 {
			return total, nil
		}
		ids := make([]string, len(rs))
		for i, r := range rs {
			ids[i] = r.ID
			s.metrics.expired(r)
		}
		s.hub.publish(ids...)
		total += len(rs)
		if len(rs) < s.batch {
			return total, nil
		}
	}
}
