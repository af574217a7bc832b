package provider

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
)

// Request reads a request the caller may see. With wait > 0 it long-polls:
// it returns as soon as the request is terminal or when wait (at most
// MaxWait) has passed, whichever is first.
func (s *Service) Request(ctx context.Context, c airlock.Caller, id string, wait time.Duration) (airlock.Request, error) {
	r, err := s.read(ctx, c, id)
	if err != nil || r.State.Terminal() || wait <= 0 {
		return r, err
	}
	woken, unsubscribe := s.hub.subscribe(id)
	defer unsubscribe()
	waitEnd := time.NewTimer(min(wait, s.maxWait))
	defer waitEnd.Stop()
	for {
		// Read after subscribing, so a change between the first read and
		// the subscription is not missed.
		r, err = s.read(ctx, c, id)
		if err != nil || r.State.Terminal() {
			return r, err
		}
		// Wake at the deadline too, should the scheduler be late.
		untilDeadline := time.NewTimer(max(r.DeadlineAt.Sub(s.clock.Now()), 0) + time.Millisecond)
		select {
		case <-woken:
		case <-untilDeadline.C:
		case <-waitEnd.C:
			untilDeadline.Stop()
			return s.read(ctx, c, id)
		case <-ctx.Done():
			untilDeadline.Stop()
			return r, ctx.Err()
		}
		untilDeadline.Stop()
	}
}
