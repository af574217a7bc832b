package provider

import (
	"context"
	"time"
)

// FollowReplicas keeps this replica's expiry scheduler aware of deadlines
// set by other replicas sharing the store, until ctx ends. Run relays the
// store's change feed to the hub but wakes the scheduler only for requests
// created here; a request created on a replica that then dies would wait
// for this scheduler's next wake (up to a minute) or a read. FollowReplicas
// wakes the scheduler — at most once per every, so that busy replicas do
// not stampede the database — after any change is published, local or
// from the feed; the scheduler then expires what is due and re-reads the
// next deadline. With nothing changing it makes no queries. A store that
// is not shared (no store.Extras.Feed) has no other replicas to
// follow: FollowReplicas then returns at once.
func (s *Service) FollowReplicas(ctx context.Context, every time.Duration) {
	if s.feed == nil {
		return
	}
	pause := time.NewTimer(every)
	pause.Stop()
	defer pause.Stop()
	changed := s.hub.changes()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		// Take the next signal before waking the scheduler, so that a
		// change during the wake or the pause wakes it again after.
		changed = s.hub.changes()
		select {
		case s.kick <- struct{}{}:
		default: // a wake is already queued
		}
		pause.Reset(every)
		select {
		case <-ctx.Done():
			return
		case <-pause.C:
		}
	}
}
