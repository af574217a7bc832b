package rest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/provider"
)

// TestDecisionNeedsPasskey: with --require-passkey-for, the API cannot
// make the decision (no body carries an assertion): 403 forbidden, naming
// the inbox's page of the request, and the request stays pending.
func TestDecisionNeedsPasskey(t *testing.T) {
	b := setup(t, func(o *options) { o.requirePasskey = provider.AllRequests })
	_, id := b.pending(t, "10m")
	r := b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/decision", token: b.reviewer, body: `{"status":"approved","valid_for":"5m"}`})
	var problem struct{ Code, Detail string }
	json.Unmarshal(r.body, &problem)
	if r.status != http.StatusForbidden || problem.Code != string(airlock.CodeForbidden) ||
		!strings.Contains(problem.Detail, "passkey") || !strings.Contains(problem.Detail, "/requests/"+id) {
		t.Fatalf("a decision over the API = %d %s; want 403 forbidden naming the inbox's page", r.status, r.body)
	}
	got, err := b.svc.Request(context.Background(), b.callers["reviewer"], id, 0)
	if err != nil || got.State != airlock.StatePending {
		t.Fatalf("the request after the refused decision: %s, %v", got.State, err)
	}
}
