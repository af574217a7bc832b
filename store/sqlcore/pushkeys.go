package sqlcore

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// PushKeySQL are the statements of store.PushKeys. A key is read as its
// private key, public key and created_at.
type PushKeySQL struct {
	// Insert stores the key (@private, @public) created at @now unless a
	// key is stored, and returns its instant; no row when one is.
	Insert string
	// Select selects the stored key.
	Select string
}

func (c *Core) scanVAPIDKey(row Row) (store.VAPIDKey, error) {
	var k store.VAPIDKey
	err := row.Scan(&k.Private, &k.Public, c.d.Time(&k.CreatedAt))
	return k, err
}

// EnsureVAPIDKey stores candidate unless a key is stored, and returns the
// stored key. Replicas starting at once may both insert: the table's one
// row lets one in, and the other's insert yields no row, so it reads the
// winner's.
func (c *Core) EnsureVAPIDKey(ctx context.Context, candidate store.VAPIDKey, actor string) (store.VAPIDKey, error) {
	if err := candidate.Validate(); err != nil {
		return store.VAPIDKey{}, err
	}
	q := &c.q.PushKeys
	var out store.VAPIDKey
	err := c.d.Write(ctx, func(tx Tx) error {
		var at time.Time
		err := tx.QueryRow(q.Insert, Args{{"private", candidate.Private}, {"public", candidate.Public}}).Scan(c.d.Time(&at))
		switch {
		case err == nil:
			if err := tx.Event(airlock.Event{Type: airlock.EventVAPIDKeyCreated, At: at, Actor: actor,
				Subject: airlock.EncodePushKey(candidate.Public)}); err != nil {
				return err
			}
		case !noRows(err):
			return err
		}
		out, err = c.scanVAPIDKey(tx.QueryRow(q.Select, nil))
		return err
	})
	return out, c.d.Translate(err, "vapid key", "stored")
}

// VAPIDKey reads the stored key.
func (c *Core) VAPIDKey(ctx context.Context) (store.VAPIDKey, error) {
	k, err := c.scanVAPIDKey(c.d.QueryRow(ctx, c.q.PushKeys.Select, nil))
	return k, c.d.Translate(err, "vapid key", "stored")
}
