package airlock

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-readable error code. The set is closed: callers
// (the REST API, MCP tools, the Go client) switch on it.
type Code string

// The error codes of DESIGN.md §3, plus Internal for failures the caller
// cannot fix.
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
	CodePayloadTooLarge     Code = "payload_too_large"
	CodeRateLimited         Code = "rate_limited"
	CodeInternal            Code = "internal"
)

// Codes lists every code, for documentation and exhaustive tests.
var Codes = []Code{
	CodeInvalidRequest, CodeUnauthorized, CodeForbidden, CodeNotFound,
	CodeIdempotencyConflict, CodeNotPending, CodeDeadlinePassed, CodeNotApproved,
	CodeApprovalExpired, CodeAlreadyExecuted, CodeCommandFailed,
	CodePayloadTooLarge, CodeRateLimited, CodeInternal,
}

// Error is the one error type that crosses package boundaries. Message is
// written for the caller and says what to do; State names the state that
// holds when a transition lost a race; Field names the offending input.
type Error struct {
	Code    Code
	Message string
	Field   string
	State   State
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return e.Message
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
