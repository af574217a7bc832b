package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

func TestNewRequestParamsWithDefaults(t *testing.T) {
	t.Parallel()
	p := store.NewRequestParams{Window: time.Minute}.WithDefaults()
	if !strings.HasPrefix(p.Request.ID, airlock.PrefixRequest) || p.Request.Kind != airlock.KindToolCall {
		t.Fatalf("defaults = ID %q, kind %q; want a fresh %s ID and %s", p.Request.ID, p.Request.Kind, airlock.PrefixRequest, airlock.KindToolCall)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate after WithDefaults: %v", err)
	}
	set := store.NewRequestParams{Request: airlock.Request{ID: "apr_given", Kind: airlock.KindWorkChange}}.WithDefaults()
	if set.Request.ID != "apr_given" || set.Request.Kind != airlock.KindWorkChange {
		t.Fatalf("WithDefaults changed what was set: ID %q, kind %q", set.Request.ID, set.Request.Kind)
	}
}

func TestNewRequestParamsValidateWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		window time.Duration
		ok     bool
	}{{-time.Hour, false}, {0, false}, {time.Nanosecond, false}, {999 * time.Nanosecond, false}, {time.Microsecond, true}, {time.Hour, true}} {
		err := store.NewRequestParams{Request: airlock.Request{Kind: airlock.KindToolCall}, Window: tc.window}.Validate()
		if (err == nil) != tc.ok || (err != nil && (airlock.ErrorCode(err) != airlock.CodeInvalidRequest || !strings.Contains(err.Error(), "at least 1µs"))) {
			t.Errorf("Validate with a window of %v = %v, want ok %v (or invalid_request asking for at least 1µs)", tc.window, err, tc.ok)
		}
	}
}

func TestNewRequestParamsReplay(t *testing.T) {
	t.Parallel()
	p := store.NewRequestParams{Request: airlock.Request{IdempotencyKey: "k1", Fingerprint: "fp_a"}}
	prev := airlock.Request{ID: "apr_prev", IdempotencyKey: "k1", Fingerprint: "fp_a"}
	if got, err := p.Replay(prev); err != nil || got.ID != prev.ID {
		t.Fatalf("Replay of the same call = %q, %v; want the earlier request", got.ID, err)
	}
	prev.Fingerprint = "fp_b"
	_, err := p.Replay(prev)
	if airlock.ErrorCode(err) != airlock.CodeIdempotencyConflict || !strings.Contains(err.Error(), `"k1"`) || !strings.Contains(err.Error(), "apr_prev") {
		t.Fatalf("Replay of another call = %v, want idempotency_conflict naming the key and the earlier request", err)
	}
}

func TestDecideParamsValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p     store.DecideParams
		field string // "" for valid
	}{
		{store.DecideParams{Status: airlock.StateApproved, Validity: time.Microsecond}, ""},
		{store.DecideParams{Status: airlock.StateDenied}, ""},
		{store.DecideParams{Status: airlock.StateApproved, Validity: 999 * time.Nanosecond}, "valid_for"},
		{store.DecideParams{Status: airlock.StateCancelled}, "status"},
		{store.DecideParams{}, "status"},
	} {
		err := tc.p.Validate()
		e, _ := err.(*airlock.Error)
		if (tc.field == "") != (err == nil) || (e != nil && (e.Code != airlock.CodeInvalidRequest || e.Field != tc.field)) {
			t.Errorf("Validate(%+v) = %v, want an error on %q (none when empty)", tc.p, err, tc.field)
		}
	}
}
