package postgres

import (
	"github.com/airlockhq/airlock/store/sqlcore"
)

// Fault points of WithFaultHook: where, inside the transaction that
// records an approval of a command proposal, a test may make it fail. The
// same points as the SQLite driver's (sqlcore.FaultAfterApproval).
const (
	FaultAfterApproval = sqlcore.FaultAfterApproval
	FaultAfterEffect   = sqlcore.FaultAfterEffect
)

// WithFaultHook installs a test hook called at each fault point (the
// Fault* constants) of a command's approval. When it returns an error the
// transaction fails with that error, rolls back and is not retried, so
// the caller sees it. Tests use it to show that an approval and its
// command's effect commit together or not at all (T12 in docs/reliability.md).
// Never set it in production.
func WithFaultHook(hook func(point string) error) Option {
	return func(c *config) { c.fault = hook }
}

// faultError is an error a fault hook injected. It is never retried,
// whatever it wraps (a test may inject a lost connection).
type faultError = sqlcore.FaultError
