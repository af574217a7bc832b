package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
	"github.com/airlockhq/airlock/sequencer"
	"github.com/airlockhq/airlock/store"
)

// The verifiable audit log's sequencer (docs/architecture.md, "The audit
// log"). Every replica runs the loop; the one that holds the store's lease
// appends the committed events without a leaf to the tree, after commit
// and apart from the request path, and signs a checkpoint every
// checkpoint interval while the tree grows. The others renew nothing and
// take the lease once its holder stops renewing it (a crash, a partition):
// the lease lasts three intervals and is renewed every half interval.

// DefaultCheckpointInterval is Config.CheckpointInterval's default.
const DefaultCheckpointInterval = 10 * time.Second

// sequencerMinGap is the least time between two rounds a change woke,
// unless the store sets its own (store.Extras.SequencerGap): under load the
// sequencer appends a batch every gap, rather than a round per commit, and
// an event waits at most about that long for its leaf. On SQLite a round's
// append holds the one writer and its reads and hashing take a core: at
// 3,500 consumes a second, a round every 50 ms held up the consumes behind
// it to a p99 of 6.1–6.7 ms, one every 20 ms to 4.9–5.8 ms.
const sequencerMinGap = 20 * time.Millisecond

// auditSequencer is this replica's sequencer's state.
type auditSequencer struct {
	// every is Config.CheckpointInterval, and run whether Run runs the
	// loop.
	every  time.Duration
	run    bool
	holder string
	// gap is the least time between two rounds a change woke
	// (sequencerMinGap, or the store's).
	gap time.Duration

	mu sync.Mutex // one round at a time
	// held: the last AcquireSequencer gave this replica the lease, at
	// acquired (the service's clock); the lease is renewed every half
	// interval.
	held     bool
	acquired time.Time
	// after is how far every event is known to have a leaf
	// (store.Unsequenced.Next).
	after int64
	// edge is the tree's size and right edge as this replica's last
	// append left them, so that a round reads neither; it is forgotten
	// whenever the lease was lost, retaken or may have lapsed, since
	// another replica may have appended meanwhile (sequencer.Edge).
	edge sequencer.Edge
	// checkpointed is when the latest checkpoint this replica knows of
	// was made: while it is within an interval, no round reads the latest
	// checkpoint to learn that none is due.
	checkpointed time.Time
	key          *store.AuditKey
	// uncovered is when this replica appended the first leaf that no
	// checkpoint covers yet (zero when every leaf is covered), for the
	// checkpoint delay metric.
	uncovered time.Time
	// paused stops the sequencer (SetAuditSequencing); mu guards it.
	paused bool
}

// SetAuditSequencing turns this replica's sequencer on (the default) or
// off. It exists so that `airlock bench` can measure what the audit log
// costs the lifecycle on one warm server, switching between passes
// (docs/performance.md); while it is off, events wait for their leaves,
// and the first round after it is on again appends them. Nothing else
// calls it. Turning it off waits for a round in progress to end, so that
// nothing is appended once it returns.
func (s *Service) SetAuditSequencing(on bool) {
	s.audit.mu.Lock()
	defer s.audit.mu.Unlock()
	s.audit.paused = !on
}

// auditOrigin names the log in its checkpoints and note key: the issuer
// (the server's public URL, else the address it listens on) without its
// scheme, and "/audit". A note name has no spaces and no "+".
func auditOrigin(issuer string) string {
	o := issuer
	if _, rest, ok := strings.Cut(o, "://"); ok {
		o = rest
	}
	o = strings.TrimSuffix(o, "/") + "/audit"
	return strings.Map(func(r rune) rune {
		if r == '+' || r == ' ' || r < 0x20 {
			return '-'
		}
		return r
	}, o)
}

// SequenceAudit runs one round of the audit log's sequencer: it takes or
// renews the lease when due, and, holding it, appends every event without
// a leaf to the tree (in batches of sequencer.DefaultBatch), then signs
// and stores a checkpoint if the tree grew and the latest checkpoint is a
// checkpoint interval old. It returns how many events it appended. Run
// calls it; it is exported for tests, which step it on their clock.
func (s *Service) SequenceAudit(ctx context.Context) (int, error) {
	q := &s.audit
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.paused {
		return 0, nil
	}
	now := s.clock.Now()
	if !q.held || now.Sub(q.acquired) >= q.every/2 {
		// Not renewed within its three intervals, the lease may have
		// lapsed and been another replica's meanwhile.
		lapsed := q.held && now.Sub(q.acquired) >= 3*q.every
		got, err := s.system.AcquireSequencer(ctx, q.holder, 3*q.every)
		if err != nil {
			q.edge.Forget()
			return 0, fmt.Errorf("audit log: take the sequencer lease: %w", err)
		}
		if got && !q.held {
			s.log.Info("audit log: this replica sequences", "holder", q.holder)
		}
		if !got || !q.held || lapsed {
			// A lease lost, taken or retaken: whatever this replica
			// remembers of the tree may be stale.
			q.edge.Forget()
		}
		q.held, q.acquired = got, now
	}
	if !q.held {
		return 0, nil
	}
	total := 0
	for {
		b, err := q.edge.Step(ctx, s.system, q.holder, q.after, sequencer.DefaultBatch)
		if sequencer.Refused(err) {
			// Another replica sequences now, or did: take the lease
			// again before appending.
			q.held = false
			s.log.Info("audit log: another replica sequences", "reason", err)
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("audit log: sequence: %w", err)
		}
		next, n := b.Next, len(b.At)
		q.after = next
		total += n
		if n > 0 {
			appended := s.clock.Now()
			s.metrics.sequenced(b.At, appended)
			if q.uncovered.IsZero() {
				q.uncovered = appended
			}
		}
		if n < sequencer.DefaultBatch {
			break
		}
		// Catching up (on upgrade, every event before the log was
		// built has no leaf yet): say how far, every 100 batches.
		if total%(100*sequencer.DefaultBatch) == sequencer.DefaultBatch {
			s.log.Info("audit log: catching up", "sequenced", total, "through_event", next)
		}
	}
	if err := s.checkpointIfDue(ctx, now); err != nil {
		return total, err
	}
	return total, nil
}

// checkpointIfDue signs a checkpoint when the tree grew since the latest
// and the latest is a checkpoint interval old. The checkpoint appends no
// event: an event of it would be a leaf, and the tree would grow for ever.
func (s *Service) checkpointIfDue(ctx context.Context, now time.Time) error {
	q := &s.audit
	if !q.checkpointed.IsZero() && now.Sub(q.checkpointed) < q.every {
		// Checkpoints only get newer: the latest is at least this recent.
		return nil
	}
	latest, err := s.system.LatestCheckpoint(ctx)
	switch {
	case airlock.ErrorCode(err) == airlock.CodeNotFound:
	case err != nil:
		return fmt.Errorf("audit log: latest checkpoint: %w", err)
	default:
		q.checkpointed = latest.CreatedAt
		if now.Sub(latest.CreatedAt) < q.every {
			return nil
		}
	}
	if q.key == nil {
		k, err := s.loadAuditKey(ctx)
		if err != nil {
			return err
		}
		q.key = &k
	}
	cp, made, err := sequencer.Checkpoint(ctx, s.system, *q.key, s.checkpointDeliveries(ctx, now))
	if err != nil {
		return fmt.Errorf("audit log: checkpoint: %w", err)
	}
	if made {
		q.checkpointed = cp.CreatedAt
	}
	if made && s.deliveryQueued != nil {
		s.deliveryQueued()
	}
	if made && !q.uncovered.IsZero() {
		s.metrics.checkpointed(s.clock.Now().Sub(q.uncovered))
		q.uncovered = time.Time{}
	}
	return nil
}

// checkpointDeliveries returns what queues a new checkpoint's webhook
// event audit.checkpoint for each enabled webhook endpoint subscribed to
// it: the store queues them in the transaction that stores the
// checkpoint, so a checkpoint stored is a checkpoint queued, on whichever
// replica signs it, and the notify engine's workers on every replica
// deliver them at least once, with retries, like any delivery.
//
// Why not the fan-out, which derives deliveries from events: checkpoints
// are deliberately not events (store.AuditLog.SaveCheckpoint), and a
// second cursor tailing the checkpoints would be more state for the same
// guarantee. An endpoint created between the list here and the commit
// misses that one checkpoint and gets the next; each checkpoint covers
// every one before it, so nothing it could check is lost.
func (s *Service) checkpointDeliveries(ctx context.Context, now time.Time) func(size int64, note []byte) ([]airlock.Delivery, error) {
	return func(size int64, note []byte) ([]airlock.Delivery, error) {
		eps, err := s.system.ListEndpoints(ctx, airlock.EndpointWebhook)
		if err != nil {
			return nil, fmt.Errorf("webhook endpoints: %w", err)
		}
		var body []byte
		var ds []airlock.Delivery
		for _, ep := range eps {
			if ep.DisabledAt != nil || !ep.Wants(airlock.NotifyCheckpoint) {
				continue
			}
			if body == nil {
				body, err = checkpointBody(now, size, note)
				if err != nil {
					return nil, err
				}
			}
			ds = append(ds, airlock.Delivery{ID: airlock.NewClockID(airlock.PrefixDelivery, now), EndpointID: ep.ID,
				MessageID: airlock.CheckpointMessageID(size), Type: airlock.NotifyCheckpoint, Payload: body})
		}
		return ds, nil
	}
}

// checkpointBody is the webhook body of a checkpoint: {type, timestamp,
// data}, data being the tree's size and the signed note, exactly as GET
// /v1/audit/checkpoint serves it.
func checkpointBody(now time.Time, size int64, note []byte) ([]byte, error) {
	return json.Marshal(map[string]any{
		"type": airlock.NotifyCheckpoint, "timestamp": now.UTC().Format(time.RFC3339Nano),
		"data": map[string]any{"tree_size": size, "note": string(note)},
	})
}

// loadAuditKey returns the store's note key, made now, named for this
// server, if no replica made one before.
func (s *Service) loadAuditKey(ctx context.Context) (store.AuditKey, error) {
	origin := auditOrigin(s.issuer)
	skey, vkey, err := auditlog.GenerateKey(origin)
	if err != nil {
		return store.AuditKey{}, err
	}
	k, err := s.system.EnsureAuditKey(ctx, store.AuditKey{Origin: origin, SKey: skey, VKey: vkey})
	if err != nil {
		return store.AuditKey{}, fmt.Errorf("audit log: key: %w", err)
	}
	return k, nil
}

// sequenceLoop runs SequenceAudit until ctx ends: every half interval, to
// renew the lease and checkpoint on time, and when changes were published,
// at most once a gap (sequencerMinGap, or the store's), so that it never
// spins.
func (s *Service) sequenceLoop(ctx context.Context) {
	tick := time.NewTicker(s.audit.every / 2)
	defer tick.Stop()
	for {
		changed := s.hub.changes()
		if _, err := s.SequenceAudit(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("audit log", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-changed:
			gap := time.NewTimer(s.audit.gap)
			select {
			case <-ctx.Done():
				gap.Stop()
				return
			case <-gap.C:
			}
		}
	}
}
