package airlock

import (
	"time"
)

// InstanceKind tells the two kinds of instance apart: adapters registered
// over REST (and an MCP agent's default instance), and MCP agent sessions.
type InstanceKind string

// The instance kinds.
const (
	InstanceAdapter InstanceKind = "adapter"
	InstanceSession InstanceKind = "session"
)

// WithDefaults returns in with what a store fills in when the caller left
// it empty: the adapter kind, and a fresh ID ("ins_", or "ses_" for a
// session). Stores call it, then Validate, before they insert.
func (in Instance) WithDefaults() Instance {
	if in.Kind == "" {
		in.Kind = InstanceAdapter
	}
	if in.ID == "" {
		in.ID = NewID(PrefixInstance)
		if in.Kind == InstanceSession {
			in.ID = NewID(PrefixSession)
		}
	}
	return in
}

// Validate refuses an instance no store may keep: one of an unknown kind.
// Its name and metadata are the caller's input, checked before
// (InstanceInput.Validate).
func (in Instance) Validate() error {
	if in.Kind != InstanceAdapter && in.Kind != InstanceSession {
		return Invalid("kind", "instance kind must be adapter or session, not %q", in.Kind)
	}
	return nil
}

// PrefixInstruction starts every instruction ID.
const PrefixInstruction = "ist_"

// DefaultStaleAfter is how long a session may go without a heartbeat before
// it shows as stale, unless the provider is configured otherwise.
const DefaultStaleAfter = 5 * time.Minute

// MaxSessionsListed bounds how many sessions one list returns, newest
// first, so a server that has seen many sessions still answers quickly.
const MaxSessionsListed = 500

// SessionStatus is how a session shows to people and to its agent.
type SessionStatus string

// The session statuses. Stale is for display only: a stale session keeps
// its requests, receives decisions and may heartbeat again at any time, and
// nothing is cancelled or refused because a session went stale.
const (
	SessionActive  SessionStatus = "active"
	SessionWaiting SessionStatus = "waiting"
	SessionStale   SessionStatus = "stale"
	SessionClosed  SessionStatus = "closed"
)

// SessionStatus says how the session shows at now: closed once closed;
// stale when its last heartbeat (or its opening, before any heartbeat) is
// staleAfter or more ago; waiting while one of its requests is pending;
// active otherwise. staleAfter <= 0 never marks a session stale.
func (in Instance) SessionStatus(now time.Time, staleAfter time.Duration) SessionStatus {
	if in.ClosedAt != nil {
		return SessionClosed
	}
	seen := in.CreatedAt
	if in.LastSeenAt != nil {
		seen = *in.LastSeenAt
	}
	if staleAfter > 0 && now.Sub(seen) >= staleAfter {
		return SessionStale
	}
	if in.PendingCount > 0 {
		return SessionWaiting
	}
	return SessionActive
}

// Instruction tells a session's agent the outcome of one of its linked
// requests. The store creates it in the same transaction that makes the
// request approved, denied or expired (never for the agent's own cancel
// or a session close: the agent already knows), and the session's next
// heartbeat takes it, exactly once.
type Instruction struct {
	// ID is stable: an agent that sees the same ID twice (it cannot, but a
	// retried transport might replay a response) knows it is one instruction.
	ID        string
	SessionID string
	RequestID string
	// Status is the request's terminal state: approved, denied or expired.
	Status State
	Note   string
	Answer string
	// CreatedAt is when the request became terminal.
	CreatedAt time.Time
}

// Audit event types of sessions.
const (
	// EventSessionClosed is appended when a session is closed (the session
	// row stays; its pending requests are cancelled in the same step).
	EventSessionClosed EventType = "session.closed"
	// EventInstructionDelivered is appended for each instruction a
	// heartbeat takes.
	EventInstructionDelivered EventType = "instruction.delivered"
)
