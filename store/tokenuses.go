package store

import (
	"context"
	"time"
)

// TokenUses records the single use of approval tokens at tool servers
// (docs/tokens.md, "Single use"): a request's approval runs once, so its
// token is consumed once, whichever replica is asked.
type TokenUses interface {
	// ConsumeApprovalToken records that actor consumed the approval token
	// jti of request requestID, with one conditional write, and appends
	// execution.token_consumed on the request in the same transaction. Of
	// consumes of one request, on any replica, exactly one succeeds; the
	// others get already_used with the first's time (Error.ConsumedAt),
	// whatever their jti. An unknown request is not_found.
	ConsumeApprovalToken(ctx context.Context, requestID, jti, actor string) (TokenUse, error)
}

// TokenUse is the one consumption of a request's approval token.
type TokenUse struct {
	RequestID  string
	JTI        string
	ConsumedAt time.Time
	// ConsumedBy is the consuming token's ID (a verifier's, or an admin's).
	ConsumedBy string
}
