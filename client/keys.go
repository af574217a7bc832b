package client

import (
	"context"
	"net/http"
	"time"
)

// SigningKey is a key approval tokens are signed with, as admins see it:
// never its private half (docs/tokens.md).
type SigningKey struct {
	ID string `json:"id"`
	// Active says whether it signs new tokens now.
	Active    bool      `json:"active"`
	CreatedAt time.Time `json:"created_at"`
	// ActivatesAt is when it starts (or started) signing.
	ActivatesAt    time.Time  `json:"activates_at"`
	RetiredAt      *time.Time `json:"retired_at,omitempty"`
	PublishedUntil *time.Time `json:"published_until,omitempty"`
}

// ListSigningKeys lists the published signing keys, the active one first
// (admins).
func (c *Client) ListSigningKeys(ctx context.Context) ([]SigningKey, error) {
	return fetchItems[SigningKey](ctx, c, call{method: http.MethodGet, path: "/v1/signing-keys", retry: true})
}

// RotateSigningKey publishes a new key, which signs from its ActivatesAt
// on, and returns it (admins).
// It is not retried on network errors, which could rotate twice.
func (c *Client) RotateSigningKey(ctx context.Context) (*SigningKey, error) {
	return fetch[SigningKey](ctx, c, call{method: http.MethodPost, path: "/v1/signing-keys/rotate"})
}
