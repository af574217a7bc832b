package sqlcore

import (
	"errors"
	"fmt"

	"github.com/airlockhq/airlock"
)

// Translation is how a driver's errors become what callers of store.Store
// see (Dialect.Translate), as both drivers translate them: a missing row
// becomes not_found naming what and id; domain errors pass through; a
// store that cannot serve now becomes unavailable, with the driver's
// error kept as its cause for the log; what only the engine knows is
// Own's; a violated constraint is a bug (inputs are validated and
// conflicts are decided by queries), not the caller's mistake; and
// everything else is wrapped with what was being done and stays an
// internal error (airlock.ErrorCode maps any non-*airlock.Error to
// internal), which the edge logs.
type Translation struct {
	// Driver prefixes the errors the translation wraps.
	Driver string
	// Unavailable says why err means the store cannot serve now, in words
	// for the caller, or "" when it means something else.
	Unavailable func(err error) string
	// Constraint reports whether err is a violated constraint.
	Constraint func(err error) bool
	// Own, optional, translates an error of what only the engine has, or
	// returns nil.
	Own func(err error, what, id string) error
}

// Translate translates err, an error of doing what to id.
func (t Translation) Translate(err error, what, id string) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*airlock.Error](err); ok {
		return err
	}
	if noRows(err) {
		return airlock.NotFound(what, id)
	}
	if why := t.Unavailable(err); why != "" {
		return airlock.Unavailable(fmt.Errorf("%s: %s %s: %w", t.Driver, what, id, err), "%s", why)
	}
	if t.Own != nil {
		if own := t.Own(err, what, id); own != nil {
			return own
		}
	}
	if t.Constraint(err) {
		return fmt.Errorf("%s: %s %s: constraint violated: %w", t.Driver, what, id, err)
	}
	return fmt.Errorf("%s: %s %s: %w", t.Driver, what, id, err)
}
