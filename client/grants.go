package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/airlockhq/airlock"
)

// Grant is a standing approval a reviewer gave (docs/policy.md, "Grants"):
// new tool calls it covers are approved at creation, decided_by
// "grant:<id>".
type Grant struct {
	ID   string `json:"id"`
	Tool string `json:"tool"`
	// Match is "same_arguments" or a CEL expression.
	Match      string `json:"match"`
	InstanceID string `json:"instance_id,omitempty"`
	Agent      string `json:"agent,omitempty"`
	// Uses and UsesLeft are nil for a grant without a limit of uses.
	Uses     *int   `json:"uses,omitempty"`
	UsesLeft *int   `json:"uses_left,omitempty"`
	ValidFor string `json:"valid_for"`
	// State is live, revoked, creator_revoked, instance_deleted, used_up
	// or expired.
	State     airlock.GrantState `json:"state"`
	CreatedAt time.Time          `json:"created_at"`
	ExpiresAt time.Time          `json:"expires_at"`
	CreatedBy string             `json:"created_by"`
	RequestID string             `json:"request_id,omitempty"`
	RevokedAt *time.Time         `json:"revoked_at,omitempty"`
	RevokedBy string             `json:"revoked_by,omitempty"`
}

// CreateGrant makes a grant (reviewers and admins). It is not retried on
// network errors, which could make two.
func (c *Client) CreateGrant(ctx context.Context, in airlock.GrantInput) (*Grant, error) {
	body, err := airlock.EncodeJSON(in)
	if err != nil {
		return nil, fmt.Errorf("create grant: %w", err)
	}
	var g Grant
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/grants", body: body, want: []int{http.StatusCreated}}, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// ListGrants lists grants, newest first: only the live ones when live is
// set, only tool's when tool is not empty.
func (c *Client) ListGrants(ctx context.Context, live bool, tool string) ([]Grant, error) {
	q := url.Values{}
	if live {
		q.Set("state", "live")
	}
	if tool != "" {
		q.Set("tool", tool)
	}
	return fetchItems[Grant](ctx, c, call{method: http.MethodGet, path: "/v1/grants", query: q, retry: true})
}

// GetGrant reads a grant.
func (c *Client) GetGrant(ctx context.Context, id string) (*Grant, error) {
	return fetch[Grant](ctx, c, call{method: http.MethodGet, path: "/v1/grants/" + url.PathEscape(id), retry: true})
}

// RevokeGrant ends a grant. Revoking twice keeps the first revocation, so
// it is retried on network errors.
func (c *Client) RevokeGrant(ctx context.Context, id string) (*Grant, error) {
	return fetch[Grant](ctx, c, call{method: http.MethodDelete, path: "/v1/grants/" + url.PathEscape(id), retry: true})
}
