package airlock_test

import (
	"encoding/json"
	"testing"

	"github.com/airlockhq/airlock"
)

// TestAdapterClaims: a preview and a reversibility are checked on create
// and count in the fingerprint only when given, so a replay with other
// claims is another call and calls without them keep their fingerprint.
func TestAdapterClaims(t *testing.T) {
	t.Parallel()
	base := airlock.CreateRequestInput{Tool: "run_sql", Arguments: json.RawMessage(`{"sql":"DROP TABLE t"}`)}
	plain, err := base.Fingerprint("ins_1")
	if err != nil {
		t.Fatal(err)
	}
	withClaims := base
	withClaims.Preview = &airlock.Preview{Type: "text", Content: "drops table t"}
	withClaims.Reversibility = airlock.Irreversible
	if err := withClaims.Validate(); err != nil {
		t.Fatalf("valid claims refused: %v", err)
	}
	fp, err := withClaims.Fingerprint("ins_1")
	if err != nil || fp == plain {
		t.Fatalf("fingerprint with claims %q (%v) equals the plain one %q", fp, err, plain)
	}
	other := withClaims
	other.Reversibility = airlock.Reversible
	if fp2, _ := other.Fingerprint("ins_1"); fp2 == fp {
		t.Fatal("another reversibility has the same fingerprint")
	}
	for _, bad := range []airlock.CreateRequestInput{
		{Tool: "t", Arguments: json.RawMessage(`{}`), Preview: &airlock.Preview{Type: "html", Content: "x"}},
		{Tool: "t", Arguments: json.RawMessage(`{}`), Preview: &airlock.Preview{Type: "diff"}},
		{Tool: "t", Arguments: json.RawMessage(`{}`), Preview: &airlock.Preview{Type: "text", Content: string(make([]byte, airlock.MaxPreviewBytes+1))}},
		{Tool: "t", Arguments: json.RawMessage(`{}`), Reversibility: "mostly"},
	} {
		if err := bad.Validate(); airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
			t.Errorf("%+v: %v; want invalid_request", bad.Preview, err)
		}
	}
}
