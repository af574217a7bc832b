package store

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
)

// NewGrantParams asks a store to create a grant. The store sets
// CreatedAt to its now and ExpiresAt = CreatedAt + Lifetime, and refuses
// (not_found) a grant scoped to an instance that does not exist or was
// deleted.
type NewGrantParams struct {
	Grant    airlock.Grant // ID, Tool, Match, scope, Uses, Validity, CreatedBy, CreatedByPrincipal, RequestID
	Lifetime time.Duration
}

// Validate refuses a grant no store may keep: one breaking the grant's
// rules (airlock.Grant.CheckStorable) or without a lifetime.
func (p NewGrantParams) Validate() error {
	if p.Lifetime < time.Microsecond {
		return airlock.Invalid("expires_in", "a grant needs a lifetime")
	}
	return p.Grant.CheckStorable()
}

// GrantFilter selects grants to list, newest first.
type GrantFilter struct {
	// Live lists only live grants.
	Live bool
	Tool string
	// Limit is the page size (DefaultListLimit when unset, at most
	// MaxListLimit).
	Limit int
}

// GrantUse asks a store to approve a new request by a grant
// (NewRequestParams.Grant).
type GrantUse struct {
	// IDs are the grants the provider found covering the request, best
	// first. The store uses the first that still covers it when it writes.
	IDs []string
	// ArgumentsFingerprint is ArgumentsFingerprint of the request's tool
	// and arguments, which a same_arguments grant must equal.
	ArgumentsFingerprint string
	// Principal is the principal of the token creating the request: a
	// grant of the same principal's does not cover it.
	Principal string
}

// Grants keeps grants. Every change is one conditional write.
type Grants interface {
	// CreateGrant stores a new grant and its grant.created event;
	// not_found when it is scoped to an instance that is not live.
	CreateGrant(ctx context.Context, p NewGrantParams) (airlock.Grant, error)
	// GetGrant reads a grant with its State; not_found.
	GetGrant(ctx context.Context, id string) (airlock.Grant, error)
	// ListGrants lists grants matching f, newest first.
	ListGrants(ctx context.Context, f GrantFilter) ([]airlock.Grant, error)
	// RevokeGrant ends a grant and appends grant.revoked; revoking twice
	// keeps the first time. not_found.
	RevokeGrant(ctx context.Context, id, actor string) (airlock.Grant, error)
}
