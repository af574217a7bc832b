package rest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/store"
)

// TestPurgedRequestOverHTTP: a request whose payloads the retention
// purged reads with purged_at and without arguments, reasoning or context
// (absent, never null), in its own read and in the list; every answer
// validates against the OpenAPI document.
func TestPurgedRequestOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, b.agentA)
	r := b.create(t, b.agentA, inst, "k1", `{"tool":"issue_refund","arguments":{"payment_id":"payment_123"},"timeout":"30m","agent_reasoning":"charged twice","context":{"session_id":"s"}}`)
	want(t, r, http.StatusCreated, "")
	id := r.obj(t)["id"].(string)
	want(t, b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/decision", token: b.reviewer, body: `{"status":"denied"}`}), http.StatusOK, "")
	r = b.do(t, req{method: "GET", path: "/v1/approval-requests/" + id, token: b.reviewer})
	if _, ok := r.obj(t)["purged_at"]; ok {
		t.Fatalf("a request not purged has purged_at: %s", r.body)
	}
	// The retention's purge, for any request decided a microsecond ago.
	purged, err := b.store.PurgePayloads(t.Context(), store.PurgeParams{Age: time.Microsecond})
	if err != nil || len(purged) != 1 || purged[0] != id {
		t.Fatalf("PurgePayloads = %v, %v; want %s", purged, err, id)
	}
	for _, path := range []string{"/v1/approval-requests/" + id, "/v1/approval-requests?state=denied"} {
		r = b.do(t, req{method: "GET", path: path, token: b.reviewer})
		want(t, r, http.StatusOK, "")
		body := string(r.body)
		for _, gone := range []string{`"arguments"`, `"agent_reasoning"`, `"context"`, "payment_123", "charged twice"} {
			if strings.Contains(body, gone) {
				t.Fatalf("GET %s of a purged request has %s: %s", path, gone, body)
			}
		}
		if !strings.Contains(body, `"purged_at":"`) || !strings.Contains(body, `"tool":"issue_refund"`) || !strings.Contains(body, `"state":"denied"`) {
			t.Fatalf("GET %s of a purged request = %s; want its tool, state and purged_at", path, body)
		}
	}
}
