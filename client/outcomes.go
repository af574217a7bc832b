package client

import (
	"fmt"
	"time"

	"github.com/airlockhq/airlock"
)

// The Gate's outcomes for a call that did not run (or ran and failed).
// Each is its own type, so callers switch with errors.As and tell the agent
// what happened: a denial is not an expiry, and neither is a cancellation.

// DeniedError means a reviewer denied the call. The note says why; pass it on
// to the agent. It does not permit any other call.
type DeniedError struct{ Request *ApprovalRequest }

func (e *DeniedError) Error() string {
	msg := fmt.Sprintf("airlock: %s was denied (request %s)", e.Request.Tool, e.Request.ID)
	if id := e.ReplacedBy(); id != "" {
		msg = fmt.Sprintf("airlock: %s was approved with changed arguments as request %s; this call (request %s) did not run, and the gate runs edited calls only with AcceptEdits",
			e.Request.Tool, id, e.Request.ID)
	}
	if n := e.Note(); n != "" {
		msg += ": reviewer's note: " + n
	}
	return msg
}

// ReplacedBy is the request a reviewer approved in this one's place with
// changed arguments (an edit), or "": a gate with AcceptEdits runs it.
func (e *DeniedError) ReplacedBy() string {
	if d := e.Request.Decision; d != nil {
		return d.ReplacedBy
	}
	return ""
}

// Note is the reviewer's note, or "".
func (e *DeniedError) Note() string { return e.Request.Note() }

// ExpiredError means nobody decided before the deadline; the call did not run.
// Ask again (with a new attempt key) if it is still needed.
type ExpiredError struct{ Request *ApprovalRequest }

func (e *ExpiredError) Error() string {
	return fmt.Sprintf("airlock: nobody decided on %s in time (request %s, deadline %s); it did not run",
		e.Request.Tool, e.Request.ID, e.Request.DeadlineAt.UTC().Format(time.RFC3339))
}

// CancelledError means the request was withdrawn, so the call did not run —
// because the caller's context ended while it waited (Abandoned; the gate
// then cancelled the request itself), or because someone else cancelled it
// or deleted the instance.
type CancelledError struct {
	Request *ApprovalRequest
	// Abandoned is true when the caller's context ended; Err is then its error.
	Abandoned bool
	Err       error
	// CancelErr is why withdrawing the abandoned request failed, if it did;
	// the request then expires at its deadline.
	CancelErr error
}

func (e *CancelledError) Error() string {
	if e.Abandoned && e.Request.ID == "" {
		return fmt.Sprintf("airlock: gave up asking for approval of %s: %v; withdrawing failed (%v): if the request was made, it will expire", e.Request.Tool, e.Err, e.CancelErr)
	}
	if e.Abandoned {
		msg := fmt.Sprintf("airlock: gave up waiting for a decision on %s (request %s): %v; the request was withdrawn", e.Request.Tool, e.Request.ID, e.Err)
		if e.CancelErr != nil {
			msg += fmt.Sprintf(" (withdrawing failed: %v; it will expire)", e.CancelErr)
		}
		return msg
	}
	return fmt.Sprintf("airlock: the request for %s was cancelled (request %s); it did not run", e.Request.Tool, e.Request.ID)
}

// Unwrap returns the context's error of an abandoned wait.
func (e *CancelledError) Unwrap() error { return e.Err }

// LapsedError means the call was approved, but permission to start it ended
// (expires_at passed) before it could start; it did not run. A new attempt
// needs a new request (a new attempt key).
type LapsedError struct {
	Request *ApprovalRequest
	// Claimed is true when the gate had claimed the execution and then
	// found, immediately before starting, that permission had ended; it
	// reported the execution failed.
	Claimed bool
}

func (e *LapsedError) Error() string {
	exp, _ := e.Request.ExpiresAt()
	return fmt.Sprintf("airlock: the approval of %s (request %s) expired at %s before the call could start; it did not run",
		e.Request.Tool, e.Request.ID, exp.UTC().Format(time.RFC3339Nano))
}

// AlreadyExecutedError means this approval's one execution was already claimed,
// by this gate earlier (Here; Status is what the journal recorded) or by
// another gate. The call is not run again.
type AlreadyExecutedError struct {
	Request *ApprovalRequest
	// Status is the execution's status as known: claimed while running,
	// then succeeded, failed or unknown.
	Status airlock.ExecutionStatus
	Here   bool
}

func (e *AlreadyExecutedError) Error() string {
	where := "elsewhere"
	if e.Here {
		where = "by this gate"
	}
	return fmt.Sprintf("airlock: the approval of %s (request %s) was already used %s (execution %s); it is not run again",
		e.Request.Tool, e.Request.ID, where, e.Status)
}

// InterruptedError means an earlier run of this call was cut short (the process
// died while it ran, or before the gate learned whether its claim
// succeeded). Whether it took effect is unknown; the gate reported unknown
// and never runs it again by itself. Check the tool's effects by hand.
type InterruptedError struct {
	Request *ApprovalRequest
	// Started is true when the journal shows the call had started.
	Started bool
}

func (e *InterruptedError) Error() string {
	if e.Started {
		return fmt.Sprintf("airlock: an earlier run of %s (request %s) was interrupted; its outcome is unknown and it is not run again",
			e.Request.Tool, e.Request.ID)
	}
	return fmt.Sprintf("airlock: the claim of %s (request %s) was interrupted before the call started here; reported unknown, not run again",
		e.Request.Tool, e.Request.ID)
}

// ToolError means the call ran and its function returned an error. Status is
// what was reported: failed, or unknown when the error wraps
// ErrOutcomeUnknown.
type ToolError struct {
	Request *ApprovalRequest
	Status  airlock.ExecutionStatus
	Err     error
}

func (e *ToolError) Error() string {
	id := ""
	if e.Request != nil {
		id = " (request " + e.Request.ID + ")"
	}
	return fmt.Sprintf("airlock: the approved call ran and failed%s: %v", id, e.Err)
}

// Unwrap returns the function's error.
func (e *ToolError) Unwrap() error { return e.Err }
