package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/airlockhq/airlock"
)

// statuses is the one table from error code to HTTP status
// (docs/protocol.md lists it).
var statuses = map[airlock.Code]int{
	airlock.CodeInvalidRequest:      http.StatusBadRequest,
	airlock.CodeUnauthorized:        http.StatusUnauthorized,
	airlock.CodeForbidden:           http.StatusForbidden,
	airlock.CodeNotFound:            http.StatusNotFound,
	airlock.CodeIdempotencyConflict: http.StatusUnprocessableEntity,
	airlock.CodeNotPending:          http.StatusConflict,
	airlock.CodeDeadlinePassed:      http.StatusConflict,
	airlock.CodeNotApproved:         http.StatusConflict,
	airlock.CodeApprovalExpired:     http.StatusConflict,
	airlock.CodeAlreadyExecuted:     http.StatusConflict,
	airlock.CodeCommandFailed:       http.StatusConflict,
	airlock.CodeInvalidToken:        http.StatusBadRequest,
	airlock.CodeAlreadyUsed:         http.StatusConflict,
	airlock.CodePayloadTooLarge:     http.StatusRequestEntityTooLarge,
	airlock.CodeRateLimited:         http.StatusTooManyRequests,
	airlock.CodeUnavailable:         http.StatusServiceUnavailable,
	airlock.CodeInternal:            http.StatusInternalServerError,
}

// titles are the problems' short, fixed summaries, one per code.
var titles = map[airlock.Code]string{
	airlock.CodeInvalidRequest:      "Invalid request",
	airlock.CodeUnauthorized:        "Unauthorized",
	airlock.CodeForbidden:           "Forbidden",
	airlock.CodeNotFound:            "Not found",
	airlock.CodeIdempotencyConflict: "Idempotency key reused with a different body",
	airlock.CodeNotPending:          "Request is not pending",
	airlock.CodeDeadlinePassed:      "Decision deadline has passed",
	airlock.CodeNotApproved:         "Request is not approved",
	airlock.CodeApprovalExpired:     "Approval has expired",
	airlock.CodeAlreadyExecuted:     "Execution already claimed",
	airlock.CodeCommandFailed:       "Command could not be applied",
	airlock.CodeInvalidToken:        "Approval token does not verify",
	airlock.CodeAlreadyUsed:         "Approval token already used",
	airlock.CodePayloadTooLarge:     "Payload too large",
	airlock.CodeRateLimited:         "Rate limited",
	airlock.CodeUnavailable:         "Store unavailable",
	airlock.CodeInternal:            "Internal error",
}

// ProblemTypePrefix starts every problem's type URI; the code follows it.
const ProblemTypePrefix = "urn:airlock:problem:"

// problem writes err as a problem. Errors that are not *airlock.Error are
// internal: they are logged here, once, and the caller reads only
// "internal error". An unavailable store is logged here too, with its
// cause, and answered 503 with Retry-After. A caller that went away gets
// nothing.
func (h *handler) problem(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The client went away: nobody reads an answer, and it is no
		// server error. Metrics count it as 499, "client closed request".
		for w != nil {
			if sw, ok := w.(*statusWriter); ok {
				sw.clientGone()
				break
			}
			u, ok := w.(interface{ Unwrap() http.ResponseWriter })
			if !ok {
				break
			}
			w = u.Unwrap()
		}
		return
	}
	if cw, ok := w.(*checkedWriter); ok {
		// The call failed before its token check was made: make it now, so
		// that what is answered (and logged) is one error, not two.
		err = cw.settle(err)
	}
	var e *airlock.Error
	if !errors.As(err, &e) || e.Code == airlock.CodeInternal || statuses[e.Code] == 0 {
		h.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		e = &airlock.Error{Code: airlock.CodeInternal, Message: "internal error"}
	}
	switch e.Code {
	case airlock.CodeUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="airlock"`)
	case airlock.CodeUnavailable:
		h.log.Error("store unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", strconv.Itoa(int(airlock.UnavailableRetryAfter.Seconds())))
	}
	if errors.As(err, new(unsupportedMediaType)) {
		writeProblemStatus(w, http.StatusUnsupportedMediaType, "Unsupported media type", e.Code, e)
		return
	}
	writeProblemStatus(w, statuses[e.Code], titles[e.Code], e.Code, e)
}

// writeProblemStatus writes a problem with an explicit status.
func writeProblemStatus(w http.ResponseWriter, status int, title string, code airlock.Code, e *airlock.Error) {
	var buf bytes.Buffer
	encodeProblem(&buf, status, title, code, e)
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// encodeProblem writes e as a problem body, with a newline, to buf.
func encodeProblem(buf *bytes.Buffer, status int, title string, code airlock.Code, e *airlock.Error) {
	p := airlock.Problem{
		Type: ProblemTypePrefix + string(code), Title: title, Status: status,
		Detail: e.Message, Code: string(code), Field: e.Field, State: string(e.State), Reason: e.Reason,
	}
	if e.ConsumedAt != nil {
		p.ConsumedAt = string(appendTime(nil, *e.ConsumedAt))
	}
	if p.Detail == "" {
		p.Detail = title
	}
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(p) // a struct of strings always encodes
}

// itemProblem is the problem one item of a batch answers (a batch
// decision's result for one id): the problem the item alone would have
// been answered. Internal errors are logged here and read "internal error".
func (h *handler) itemProblem(r *http.Request, id string, err error) (status int, body []byte) {
	var e *airlock.Error
	if !errors.As(err, &e) || e.Code == airlock.CodeInternal || statuses[e.Code] == 0 {
		h.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "id", id, "err", err)
		e = &airlock.Error{Code: airlock.CodeInternal, Message: "internal error"}
	}
	var buf bytes.Buffer
	encodeProblem(&buf, statuses[e.Code], titles[e.Code], e.Code, e)
	return statuses[e.Code], bytes.TrimRight(buf.Bytes(), "\n")
}
