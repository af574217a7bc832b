package airlock

import (
	"errors"
	"fmt"
	"time"
)

// Code is a stable, machine-readable error code. The set is closed: callers
// (the REST API, MCP tools, the Go client) switch on it.
type Code string

// The error codes, with their HTTP statuses in docs/protocol.md: those a
// caller can act on, Unavailable for a store that cannot serve now (a full
// disk, a database that cannot be reached) and Internal for failures the
// caller cannot fix.
const (
	CodeInvalidRequest      Code = "invalid_request"
	CodeUnauthorized        Code = "unauthorized"
	CodeForbidden           Code = "forbidden"
	CodeNotFound            Code = "not_found"
	CodeIdempotencyConflict Code = "idempotency_conflict"
	CodeNotPending          Code = "not_pending"
	CodeDeadlinePassed      Code = "deadline_passed"
	CodeNotApproved         Code = "not_approved"
	CodeApprovalExpired     Code = "approval_expired"
	CodeAlreadyExecuted     Code = "already_executed"
	CodeCommandFailed       Code = "command_failed"
	CodeInvalidToken        Code = "invalid_token" // an approval token that does not verify; Error.Reason says why
	CodeAlreadyUsed         Code = "already_used"  // an approval token whose request was consumed; Error.ConsumedAt says when
	CodePayloadTooLarge     Code = "payload_too_large"
	CodeRateLimited         Code = "rate_limited"
	CodeUnavailable         Code = "unavailable"
	CodeInternal            Code = "internal"
)

// Codes lists every code, for documentation and exhaustive tests.
var Codes = []Code{
	CodeInvalidRequest, CodeUnauthorized, CodeForbidden, CodeNotFound,
	CodeIdempotencyConflict, CodeNotPending, CodeDeadlinePassed, CodeNotApproved,
	CodeApprovalExpired, CodeAlreadyExecuted, CodeCommandFailed,
	CodeInvalidToken, CodeAlreadyUsed,
	CodePayloadTooLarge, CodeRateLimited, CodeUnavailable, CodeInternal,
}

// Error is the one error type that crosses package boundaries. Message is
// written for the caller and says what to do; State names the state that
// holds when a transition lost a race; Field names the offending input;
// Err is the cause, for the log only: callers never see it.
type Error struct {
	Code    Code
	Message string
	Field   string
	State   State
	// Reason is why an approval token was refused (invalid_token): the
	// verifiers' stable word, such as "signature" or "expired".
	Reason string
	// ConsumedAt is when an approval token's request was first consumed
	// (already_used).
	ConsumedAt *time.Time
	Err        error
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = string(e.Code)
	}
	if e.Err != nil {
		// For logs; callers are shown Message alone.
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause, so that the edge that logs an error logs what
// the store said.
func (e *Error) Unwrap() error { return e.Err }

// Problem is the RFC 9457 body of an error answer of the REST API
// (docs/protocol.md): the server writes it and the Go client reads it, so
// both use this one type. Field, State, Reason and ConsumedAt are omitted
// when empty.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
	Field  string `json:"field,omitempty"`
	State  string `json:"state,omitempty"`
	// Reason is Error.Reason: why an approval token was refused.
	Reason string `json:"reason,omitempty"`
	// ConsumedAt is Error.ConsumedAt in RFC 3339.
	ConsumedAt string `json:"consumed_at,omitempty"`
}

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns an invalid_request error that names the field at fault.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidRequest, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Conflict returns an error for a transition that lost to state.
func Conflict(code Code, state State, format string, args ...any) *Error {
	return &Error{Code: code, State: state, Message: fmt.Sprintf(format, args...)}
}

// UnavailableRetryAfter is how long a caller told unavailable should wait
// before retrying (REST's Retry-After, the MCP error's text): soon enough
// to ride out a database restart or failover, far enough apart that
// waiting callers do not hammer a store that is down.
const UnavailableRetryAfter = 2 * time.Second

// Unavailable returns an unavailable error: the store cannot serve the call
// now, for the reason format says, and a retry later may succeed; the
// message ends with when to retry. cause is what the store said; it goes
// to the log, not to the caller.
func Unavailable(cause error, format string, args ...any) *Error {
	return &Error{Code: CodeUnavailable, Message: fmt.Sprintf(format, args...) + "; retry in " + UnavailableRetryAfter.String(), Err: cause}
}

// ErrorCode returns the code of err, CodeInternal for errors that are not
// *Error, and "" for nil.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrNotFound is returned by stores for a missing row; callers wrap it with
// the name of the thing looked for.
var ErrNotFound = &Error{Code: CodeNotFound, Message: "not found"}

// NotFound returns a not_found error naming what was missing.
func NotFound(what, id string) *Error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf("%s %q not found", what, id)}
}
