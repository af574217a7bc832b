package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/store"
)

// Payload retention (docs/operations.md, "Payload retention"): with
// Config.RetainPayloads set, every replica purges, every purgeEvery, the
// arguments, reasoning and context of the requests decided at least that
// long ago (store.Retention.PurgePayloads). Each purge is one store write
// of a bounded batch; purgers on replicas sharing a database take turns
// on the store's lock, so one replica at a time purges and a request is
// purged once.

// purgeEvery is how often the retention job looks for payloads to purge.
// Retention is counted in hours or days; a purge that comes up to this
// much later is on time.
const purgeEvery = 10 * time.Minute

// MinRetainPayloads is the shortest retention Config.RetainPayloads may
// name: an adapter may still read a request's arguments a while after its
// decision (a long-poll answered late, a retried hook).
const MinRetainPayloads = time.Hour

// PurgePayloads purges, in writes of up to store.DefaultPurgeBatch, the
// payloads of every request decided Config.RetainPayloads ago or earlier, wakes
// whoever watches them, and returns how many it purged; nothing when
// retention is off. Run calls it every purgeEvery; it is exported for
// tests, which step it on their clock.
func (s *Service) PurgePayloads(ctx context.Context) (int, error) {
	if s.retain <= 0 {
		return 0, nil
	}
	total := 0
	for {
		ids, err := s.system.PurgePayloads(ctx, store.PurgeParams{Age: s.retain})
		total += len(ids)
		s.hub.publish(ids...)
		if err != nil {
			return total, fmt.Errorf("purge payloads: %w", err)
		}
		// A purge ends early at store.MaxPurgeBytes: only one that
		// purged nothing says none is left.
		if len(ids) == 0 {
			if total > 0 {
				s.log.Info("payload retention: purged the payloads of old requests", "requests", total, "retain", s.retain)
			}
			return total, nil
		}
	}
}

// retentionLoop runs PurgePayloads (when retention is on) and SweepTasks
// at once and then every purgeEvery, until ctx ends.
func (s *Service) retentionLoop(ctx context.Context) {
	t := time.NewTicker(purgeEvery)
	defer t.Stop()
	for {
		if _, err := s.PurgePayloads(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("payload retention", "err", err)
		}
		if _, err := s.SweepTasks(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("sweep MCP tasks", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
