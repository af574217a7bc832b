package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

// Error is an answer of the server that is not a success: an RFC 9457
// problem mapped back to the domain's code. Switch on Code; for 409
// conflicts State names the state that holds (the one that won the race);
// Field names the input at fault for invalid_request.
//
// Errors.As also finds an *airlock.Error in it, so airlock.ErrorCode(err)
// works on client errors as on the server's own.
type Error struct {
	// Code is the stable code, or "" when the answer was not a problem
	// (a proxy's HTML page, say); Status then tells what happened.
	Code    airlock.Code
	Status  int
	State   airlock.State
	Field   string
	Message string // the problem's detail: what went wrong and what to do
	Method  string
	Path    string
	// Reason is why an approval token was refused (invalid_token): the
	// verifiers' word, as approvaltoken.Reason gives it.
	Reason string
	// ConsumedAt is when an approval token's request was first consumed
	// (already_used); nil otherwise.
	ConsumedAt *time.Time

	retryAfter time.Duration // from a 429's or 503's Retry-After
}

func (e *Error) Error() string {
	code := string(e.Code)
	if code == "" {
		code = "no problem code"
	}
	return fmt.Sprintf("%s %s: %s (%s, HTTP %d)", e.Method, e.Path, e.Message, code, e.Status)
}

// Unwrap returns the domain error with the same code, message, field and
// state, so errors.As(err, **airlock.Error) and airlock.ErrorCode work.
// An answer without a code unwraps to nothing.
func (e *Error) Unwrap() error {
	if e.Code == "" {
		return nil
	}
	return &airlock.Error{Code: e.Code, Message: e.Message, Field: e.Field, State: e.State, Reason: e.Reason, ConsumedAt: e.ConsumedAt}
}

// IsAlreadyUsed reports whether err is the server's answer that an
// approval token's request was consumed before (already_used); the
// *Error's ConsumedAt says when.
func IsAlreadyUsed(err error) bool { return IsCode(err, airlock.CodeAlreadyUsed) }

// IsCode reports whether err is an answer of the server with one of codes.
func IsCode(err error, codes ...airlock.Code) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	for _, c := range codes {
		if e.Code == c {
			return true
		}
	}
	return false
}

// decodeError turns a non-success answer into an *Error.
func decodeError(method, path string, res *http.Response, body []byte) *Error {
	e := &Error{Status: res.StatusCode, Method: method, Path: path}
	if s := res.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			e.retryAfter = time.Duration(n) * time.Second
		}
	}
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	var p airlock.Problem
	if (mt == "application/problem+json" || mt == "application/json") && json.Unmarshal(body, &p) == nil && p.Code != "" {
		e.fromProblem(p)
		return e
	}
	text := strings.TrimSpace(string(body))
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	if text == "" {
		text = http.StatusText(res.StatusCode)
	}
	e.Message = "the server answered without a problem document: " + text
	return e
}

// fromProblem sets e's code, message, field, state, reason and consumed_at
// from the problem p.
func (e *Error) fromProblem(p airlock.Problem) {
	e.Code = airlock.Code(p.Code)
	e.Message = p.Detail
	e.Field = p.Field
	e.State = airlock.State(p.State)
	e.Reason = p.Reason
	if at, err := time.Parse(time.RFC3339Nano, p.ConsumedAt); err == nil {
		e.ConsumedAt = &at
	}
	if e.Message == "" {
		e.Message = p.Title
	}
}
