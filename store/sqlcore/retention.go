package sqlcore

import (
	"context"
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
	"github.com/airlockhq/airlock/store"
)

// RetentionSQL are the statements of store.Retention. Both judge a request
// purge-due alike: decided (decided_at set, so not pending) at or before
// @now - @age, not purged, and not approved-unclaimed while its approval
// may still be claimed (expires_at after @now).
type RetentionSQL struct {
	// Due selects up to @limit purge-due requests, oldest decision first:
	// id, tool, arguments, agent_reasoning, context.
	Due string
	// Purge purges request @id if it is still purge-due: arguments and
	// context NULL, agent_reasoning '', purged_at @now, and the digests
	// @arguments_digest, @reasoning_digest, @context_digest kept. It
	// returns the request's instance_id, state and the instant, or no row.
	Purge string
}

// PurgePayloads purges the payloads of up to p.Limit purge-due requests in
// one write, oldest decision first, and appends request.purged for each.
//
// The digests are computed here, from the bytes the purge removes, and
// kept on the row (migration 0023), rather than computed at every create:
// the create path pays nothing, a database from before retention needs no
// backfill, and a request stays purgeable whatever its events' state in
// the tree. Refusing to purge a request whose events are not all
// sequenced would not be enough: a purged request still gets events (its
// execution reported after the purge, request.purged itself), and each
// needs the digests for its leaf. The stored payloads never change after
// creation, so the digests of the bytes read in this write are those every
// earlier leaf of the request holds.
func (c *Core) PurgePayloads(ctx context.Context, p store.PurgeParams) ([]string, error) {
	p, err := p.Validate()
	if err != nil {
		return nil, err
	}
	q := &c.q.Retention
	// Read and digest before the write, not in it: digesting up to
	// store.MaxPurgeBytes takes long enough (seconds on a loaded machine)
	// that inside the write it would hold SQLite's writer, or a
	// PostgreSQL connection idle in its transaction under the purge's
	// lock. The digests stay true: payloads never change after creation,
	// and Purge repeats the purge-due condition on the row it updates, so
	// a row purged meanwhile (by a purger on another replica) is skipped.
	due, err := c.purgeDue(ctx, p)
	if err != nil {
		return nil, c.d.Translate(err, "requests", "purge payloads")
	}
	if len(due) == 0 {
		return nil, nil
	}
	var ids []string
	err = c.d.Write(ctx, func(tx Tx) error {
		ids = nil
		// Purgers on replicas take turns: the second finds what the
		// first purged no longer purge-due, and skips it.
		if err := tx.Lock("payload_retention"); err != nil {
			return err
		}
		for _, d := range due {
			var (
				instance, state string
				at              time.Time
			)
			err := tx.QueryRow(q.Purge, Args{{"id", d.id}, {"age", p.Age},
				{"arguments_digest", d.payloads.Arguments}, {"reasoning_digest", d.payloads.Reasoning}, {"context_digest", d.payloads.Context}}).
				Scan(&instance, &state, c.d.Time(&at))
			if noRows(err) {
				continue // no longer purge-due: purged already
			}
			if err != nil {
				return err
			}
			if err := tx.Event(airlock.Event{Type: airlock.EventRequestPurged, At: at, Actor: airlock.ActorRetention,
				RequestID: d.id, InstanceID: instance, State: airlock.State(state)}); err != nil {
				return err
			}
			tx.Changed(d.id)
			ids = append(ids, d.id)
		}
		return nil
	})
	return ids, c.d.Translate(err, "requests", "purge payloads")
}

// purgeDueRow is a purge-due request and the digests of its payloads.
type purgeDueRow struct {
	id       string
	payloads auditlog.Payloads
}

// purgeDue reads the purge-due requests of a purge and digests their
// payloads, ending early once it read store.MaxPurgeBytes.
func (c *Core) purgeDue(ctx context.Context, p store.PurgeParams) ([]purgeDueRow, error) {
	rows, err := c.d.Query(ctx, c.q.Retention.Due, Args{{"age", p.Age}, {"limit", p.Limit}})
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		out   []purgeDueRow
		bytes int
	)
	for rows.Next() {
		var (
			r             airlock.Request
			args, context []byte
		)
		if err := rows.Scan(&r.ID, &r.Tool, &args, &r.AgentReasoning, &context); err != nil {
			return nil, err
		}
		r.Arguments, r.Context = args, context
		d, err := auditlog.RequestPayloads(r)
		if err != nil {
			return nil, fmt.Errorf("purge: %w", err)
		}
		out = append(out, purgeDueRow{id: r.ID, payloads: d})
		if bytes += len(args) + len(context) + len(r.AgentReasoning); bytes >= store.MaxPurgeBytes {
			break
		}
	}
	return out, rows.Err()
}
