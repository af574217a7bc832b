package sqlcore

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// SigningKeySQL are the statements of store.SigningKeys. A key is read as
// its id, seed, created_at, retired_at, published_until and activates_at.
type SigningKeySQL struct {
	// Insert stores key @id (@seed) as the newest key, created at @now
	// and signing from @now + @delay, unless a key is not retired, and
	// returns its instant; no row when one is.
	Insert string
	// Active selects the newest key: the one not retired.
	Active string
	// Retire retires the newest key at @now + @delay, published until
	// then + @keep, and returns its id and @now; no row when every key
	// is retired.
	Retire string
	// Published selects the active key, then the retired keys published
	// after @now, newest first.
	Published string
}

// scanSigningKey reads a key's columns.
func (c *Core) scanSigningKey(row Row) (store.SigningKey, error) {
	var (
		k                  store.SigningKey
		retired, published NullTime
	)
	if err := row.Scan(&k.ID, &k.Seed, c.d.Time(&k.CreatedAt), c.d.NullTime(&retired), c.d.NullTime(&published), c.d.Time(&k.ActivatesAt)); err != nil {
		return store.SigningKey{}, err
	}
	k.RetiredAt, k.PublishedUntil = retired.Ptr(), published.Ptr()
	return k, nil
}

// EnsureSigningKey stores candidate unless a key is active, and returns
// the active key. Replicas starting at once may both insert: the unique
// index on the active key lets one row in, and the other's insert yields
// no row, so it reads the winner's.
func (c *Core) EnsureSigningKey(ctx context.Context, candidate store.SigningKey, actor string) (store.SigningKey, error) {
	if err := candidate.Validate(); err != nil {
		return store.SigningKey{}, err
	}
	q := &c.q.SigningKeys
	var out store.SigningKey
	err := c.d.Write(ctx, func(tx Tx) error {
		var at time.Time
		err := tx.QueryRow(q.Insert, Args{{"id", candidate.ID}, {"seed", candidate.Seed}, {"delay", time.Duration(0)}}).Scan(c.d.Time(&at))
		switch {
		case err == nil:
			if err := tx.Event(airlock.Event{Type: airlock.EventSigningKeyCreated, At: at, Actor: actor, Subject: candidate.ID}); err != nil {
				return err
			}
		case !noRows(err):
			return err
		}
		out, err = c.scanSigningKey(tx.QueryRow(q.Active, nil))
		return err
	})
	return out, c.d.Translate(err, "signing key", "active")
}

// RotateSigningKey retires the active key and stores next as the active
// one, in one transaction.
func (c *Core) RotateSigningKey(ctx context.Context, next store.SigningKey, delay, keep time.Duration, actor string) (store.SigningKey, error) {
	if err := next.Validate(); err != nil {
		return store.SigningKey{}, err
	}
	q := &c.q.SigningKeys
	var out store.SigningKey
	err := c.d.Write(ctx, func(tx Tx) error {
		if err := tx.Lock("signing_keys"); err != nil {
			return err
		}
		var (
			old string
			at  time.Time
		)
		err := tx.QueryRow(q.Retire, Args{{"delay", delay}, {"keep", keep}}).Scan(&old, c.d.Time(&at))
		switch {
		case err == nil:
			if err := tx.Event(airlock.Event{Type: airlock.EventSigningKeyRetired, At: at, Actor: actor, Subject: old}); err != nil {
				return err
			}
		case !noRows(err):
			return err
		}
		if err := tx.QueryRow(q.Insert, Args{{"id", next.ID}, {"seed", next.Seed}, {"delay", delay}}).Scan(c.d.Time(&at)); err != nil {
			return err
		}
		if err := tx.Event(airlock.Event{Type: airlock.EventSigningKeyCreated, At: at, Actor: actor, Subject: next.ID}); err != nil {
			return err
		}
		out, err = c.scanSigningKey(tx.QueryRow(q.Active, nil))
		return err
	})
	return out, c.d.Translate(err, "signing key", next.ID)
}

// ListSigningKeys lists the published keys, the active one first.
func (c *Core) ListSigningKeys(ctx context.Context) ([]store.SigningKey, error) {
	out, err := all(ctx, c.d, c.scanSigningKey, c.q.SigningKeys.Published, nil)
	return out, c.d.Translate(err, "signing keys", "list")
}
