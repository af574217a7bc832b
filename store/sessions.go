package store

import (
	"context"

	"github.com/airlockhq/airlock"
)

// Sessions is the part of Store that keeps MCP agent sessions,
// their instructions, and agents' default MCP instances. Sessions are
// instances (CreateInstance with Kind InstanceSession and a "ses_" ID), so
// Store's instance methods see open sessions too.
type Sessions interface {
	// GetSession reads a session, open or closed, with its pending count;
	// not_found for unknown IDs and for instances that are not sessions.
	GetSession(ctx context.Context, id string) (airlock.Instance, error)
	// ListSessions lists sessions, open and closed, newest first, of one
	// owner when ownerID is set; at most MaxSessionsListed.
	ListSessions(ctx context.Context, ownerID string) ([]airlock.Instance, error)
	// Heartbeat records a heartbeat (LastSeenAt = the store's now) and, in
	// the same transaction, takes every undelivered instruction of the
	// session, oldest first: each is returned by exactly one heartbeat.
	// not_found for unknown or closed sessions.
	Heartbeat(ctx context.Context, sessionID string) (airlock.Instance, []airlock.Instruction, error)
	// CloseSession closes a session and cancels its pending requests in one
	// transaction (as DeleteInstance), keeping the session readable with
	// ClosedAt set; it returns the cancelled request IDs. Closing a closed
	// session cancels nothing and is not an error; not_found for unknown IDs.
	CloseSession(ctx context.Context, id, actor string) ([]string, error)
	// MCPInstance returns the owner's live default MCP instance (Kind
	// adapter, name "mcp"), which owns the MCP requests made without a
	// sessionId, creating it on first use; concurrent first uses get one.
	MCPInstance(ctx context.Context, ownerID, actor string) (airlock.Instance, error)
	// RequestByKey reads the request an owner created with an idempotency
	// key; not_found when there is none. The provider uses it to answer a
	// replay whose target has changed since the original was made.
	RequestByKey(ctx context.Context, ownerID, key string) (airlock.Request, error)
}
