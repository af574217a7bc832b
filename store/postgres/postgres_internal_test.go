package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestPayloads(t *testing.T) {
	t.Parallel()
	id := func(i int) string { return fmt.Sprintf("apr_%024d", i) } // as long as real IDs
	many := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = id(i)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		ids   []string
		count int // notifications; 1 with an empty payload means "re-read all"
		all   bool
	}{
		{"none", nil, 0, false},
		{"one", many(1), 1, false},
		{"one payload's worth", many(maxPayload / 29), 1, false},
		{"a few payloads", many(1000), 4, false},
		// An instance delete of 10,000 or 100,000: listed, not "re-read
		// all", which would wake every waiter (docs/performance.md, "Scale").
		{"an instance of 10,000", many(10_000), 37, false},
		{"an instance of 100,000", many(100_000), 368, false},
		{"too many to list", many(maxNotifications*maxPayload/29 + 1), 1, true},
	} {
		got := payloads(tc.ids)
		if len(got) != tc.count {
			t.Errorf("%s: %d payloads, want %d", tc.name, len(got), tc.count)
			continue
		}
		if tc.all {
			if got[0] != "" || parsePayload(got[0]) != nil {
				t.Errorf("%s: payload %q, want the empty re-read-all payload", tc.name, got[0])
			}
			continue
		}
		var back []string
		for _, p := range got {
			if len(p) >= 8000 {
				t.Errorf("%s: a payload of %d bytes; PostgreSQL refuses 8000 or more", tc.name, len(p))
			}
			back = append(back, parsePayload(p)...)
		}
		if !slices.Equal(back, tc.ids) && len(tc.ids) > 0 {
			t.Errorf("%s: payloads carry %d IDs, want the %d given, in order", tc.name, len(back), len(tc.ids))
		}
	}
}

func TestParsePayload(t *testing.T) {
	t.Parallel()
	if got := parsePayload(""); got != nil {
		t.Errorf(`parsePayload("") = %q, want nil: re-read everything`, got)
	}
	if got := parsePayload(eventsOnlyPayload); got == nil || len(got) != 0 {
		t.Errorf("parsePayload(%q) = %#v, want no IDs, not nil: only event streams wake", eventsOnlyPayload, got)
	}
	if got := parsePayload("apr_1,apr_2"); !slices.Equal(got, []string{"apr_1", "apr_2"}) {
		t.Errorf("parsePayload = %q, want both IDs", got)
	}
}

func TestTransient(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return &pgconn.PgError{Code: code, Message: "x"} }
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"serialization failure", pg("40001"), true},
		{"deadlock", pg("40P01"), true},
		{"server shutting down", pg("57P01"), true},
		{"connection exception", pg("08006"), true},
		{"connection lost mid-transaction", fmt.Errorf("query: %w", io.ErrUnexpectedEOF), true},
		{"serialization failure at commit", &commitError{pg("40001")}, true},
		{"connection lost during commit", &commitError{io.ErrUnexpectedEOF}, false},
		{"server shut down during commit", &commitError{pg("57P01")}, false},
		{"statement timeout", pg("57014"), false},
		{"constraint", pg("23505"), false},
		{"domain refusal", airlock.Conflict(airlock.CodeNotPending, airlock.StateApproved, "x"), false},
		{"unavailable, translated, wrapping a lost connection", translate(fmt.Errorf("query: %w", io.ErrUnexpectedEOF), "request", "apr_1"), true},
		{"command_failed", airlock.Conflict(airlock.CodeCommandFailed, airlock.StatePending, "x"), false},
		{"injected fault wrapping a lost connection", fmt.Errorf("decide: %w", &faultError{Point: FaultAfterApproval, Err: io.ErrUnexpectedEOF}), false},
		{"cancelled", context.Canceled, false},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), false},
		{"nil", nil, false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("%s: transient = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTranslate(t *testing.T) {
	t.Parallel()
	if err := translate(&pgconn.PgError{Code: "22021", Message: "invalid byte sequence for encoding \"UTF8\": 0x00"}, "request", "apr_1"); airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
		t.Errorf("NUL refused by the database = %v, want invalid_request", err)
	}
	for _, tc := range []struct {
		name string
		err  error
		code airlock.Code
		says string
	}{
		{"statement timeout", &pgconn.PgError{Code: "57014"}, airlock.CodeUnavailable, "statement timeout"},
		{"server shutting down", &pgconn.PgError{Code: "57P01"}, airlock.CodeUnavailable, "shutting down or restarting"},
		{"server starting up", &pgconn.PgError{Code: "57P03"}, airlock.CodeUnavailable, "shutting down or restarting"},
		{"connection failure", &pgconn.PgError{Code: "08006"}, airlock.CodeUnavailable, "connection to its database failed"},
		{"disk full", &pgconn.PgError{Code: "53100"}, airlock.CodeUnavailable, "out of resources"},
		{"too many connections", &pgconn.PgError{Code: "53300"}, airlock.CodeUnavailable, "out of resources"},
		{"read-only (a standby)", &pgconn.PgError{Code: "25006"}, airlock.CodeUnavailable, "read-only"},
		{"connection lost", fmt.Errorf("query: %w", io.ErrUnexpectedEOF), airlock.CodeUnavailable, "lost its connection"},
		{"connection lost during commit", &commitError{io.ErrUnexpectedEOF}, airlock.CodeUnavailable, "may have been recorded"},
		{"no connection in time", fmt.Errorf("acquire: %w", context.DeadlineExceeded), airlock.CodeUnavailable, "did not answer in time"},
		{"constraint", &pgconn.PgError{Code: "23505"}, airlock.CodeInternal, "constraint violated"},
		{"unknown", errors.New("something else"), airlock.CodeInternal, "something else"},
	} {
		err := translate(tc.err, "request", "apr_1")
		if airlock.ErrorCode(err) != tc.code || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s = %v, want %s saying %q", tc.name, err, tc.code, tc.says)
		}
		if tc.code == airlock.CodeUnavailable && !errors.Is(err, tc.err) {
			t.Errorf("%s = %v, which lost the cause %v", tc.name, err, tc.err)
		}
	}
	domain := airlock.NotFound("request", "apr_1")
	if err := translate(domain, "request", "apr_1"); !errors.Is(err, domain) {
		t.Errorf("domain error = %v, want it unchanged", err)
	}
}
