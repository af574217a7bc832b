package rest

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// TestUnknownRouteAndWrongMethod checks both answer with problems: 404 for
// a path nobody serves, 405 with Allow for a known path.
func TestUnknownRouteAndWrongMethod(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, req{method: "GET", path: "/v1/nothing", token: b.reviewer})
	want(t, r, http.StatusNotFound, airlock.CodeNotFound)
	r = b.do(t, req{method: "GET", path: "/v1/boards", token: b.reviewer})
	want(t, r, http.StatusNotFound, airlock.CodeNotFound)
	r = b.do(t, req{method: "PATCH", path: "/v1/approval-requests/apr_x", token: b.reviewer, body: `{}`})
	want(t, r, http.StatusMethodNotAllowed, airlock.CodeInvalidRequest)
	if allow := r.header.Get("Allow"); !strings.Contains(allow, "GET") {
		t.Fatalf("Allow %q", allow)
	}
	r = b.do(t, req{method: "DELETE", path: "/healthz"})
	want(t, r, http.StatusMethodNotAllowed, "")
	// A missing resource on a real route.
	r = b.do(t, req{method: "GET", path: "/v1/approval-requests/apr_missing", token: b.reviewer})
	want(t, r, http.StatusNotFound, airlock.CodeNotFound)
	if r.obj(t)["type"] != ProblemTypePrefix+"not_found" || r.obj(t)["title"] == "" {
		t.Fatalf("problem: %s", r.body)
	}
}

// TestConflictsNameTheState checks the 409s: each names the state that
// holds.
func TestConflictsNameTheState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, id := b.pending(t, "10m")
	r := b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/execution", token: b.agentA})
	want(t, r, http.StatusConflict, airlock.CodeNotApproved)
	want(t, b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/cancel", token: b.agentA}), http.StatusOK, "")
	r = b.do(t, reqDecide(id, b.reviewer, "approved"))
	want(t, r, http.StatusConflict, airlock.CodeNotPending)
	if r.obj(t)["state"] != "cancelled" {
		t.Fatalf("conflict: %s", r.body)
	}
	r = b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/cancel", token: b.agentA})
	want(t, r, http.StatusConflict, airlock.CodeNotPending)
	r = b.do(t, req{method: "PUT", path: "/v1/approval-requests/" + id + "/execution", token: b.agentA, body: `{"status":"succeeded"}`})
	if r.status != http.StatusConflict && r.status != http.StatusBadRequest {
		t.Fatalf("report without claim: %d %s", r.status, r.body)
	}
	// Deleting an instance with nothing pending cancels nothing.
	inst := b.instance(t, b.agentB)
	r = b.do(t, req{method: "DELETE", path: "/v1/instances/" + inst, token: b.admin})
	want(t, r, http.StatusOK, "")
	if string(bytes.TrimSpace(r.body)) != `{"cancelled":0}` {
		t.Fatalf("delete: %s", r.body)
	}
	want(t, b.do(t, req{method: "DELETE", path: "/v1/instances/" + inst, token: b.admin}), http.StatusNotFound, airlock.CodeNotFound)
}

// TestTokens checks a token's secret is shown once, works at once, never
// appears in the list, and stops working at once when revoked.
func TestTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, req{method: "POST", path: "/v1/tokens", token: b.admin, body: `{"name":"ci","role":"reviewer","principal":"erin"}`})
	want(t, r, http.StatusCreated, "")
	tok := r.obj(t)
	secret, _ := tok["secret"].(string)
	if !strings.HasPrefix(secret, airlock.TokenSecretPrefix) || tok["role"] != "reviewer" || tok["principal"] != "erin" {
		t.Fatalf("created token: %s", r.body)
	}
	want(t, b.do(t, req{method: "GET", path: "/v1/approval-requests", token: secret}), http.StatusOK, "")

	r = b.do(t, req{method: "GET", path: "/v1/tokens", token: b.admin})
	want(t, r, http.StatusOK, "")
	if bytes.Contains(r.body, []byte(secret)) || bytes.Contains(r.body, []byte(`"secret"`)) {
		t.Fatalf("token list shows a secret: %s", r.body)
	}
	if !bytes.Contains(r.body, []byte(tok["id"].(string))) {
		t.Fatalf("token list lacks the new token: %s", r.body)
	}

	r = b.do(t, req{method: "DELETE", path: "/v1/tokens/" + tok["id"].(string), token: b.admin})
	want(t, r, http.StatusOK, "")
	if r.obj(t)["revoked_at"] == nil {
		t.Fatalf("revoked token: %s", r.body)
	}
	want(t, b.do(t, req{method: "GET", path: "/v1/approval-requests", token: secret}), http.StatusUnauthorized, airlock.CodeUnauthorized)
	want(t, b.do(t, req{method: "DELETE", path: "/v1/tokens/tok_missing", token: b.admin}), http.StatusNotFound, airlock.CodeNotFound)

	for _, body := range []string{
		`{"name":"x","role":"root"}`,
		`{"name":"x","role":"agent","scopes":["everything"]}`,
		`{"name":"x","role":"agent","secret":"airlock_mine"}`,
		`{"role":"agent"}`,
	} {
		r := b.do(t, req{method: "POST", path: "/v1/tokens", token: b.admin, body: body, invalid: true})
		want(t, r, http.StatusBadRequest, airlock.CodeInvalidRequest)
	}
}

// TestMetrics checks /metrics serves the registry with HTTP counters by
// route pattern (not by raw path) and the provider's collectors.
func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, b.agentA)
	b.do(t, req{method: "GET", path: "/v1/instances/" + inst, token: b.agentA})
	b.do(t, req{method: "GET", path: "/nope"})
	r := b.do(t, req{method: "GET", path: "/metrics"})
	want(t, r, http.StatusOK, "")
	for _, line := range []string{
		`airlock_http_requests_total{code="201",route="POST /v1/instances"} 1`,
		`airlock_http_requests_total{code="200",route="GET /v1/instances/{id}"} 1`,
		`airlock_http_requests_total{code="404",route="unmatched"} 1`,
		`airlock_http_request_duration_seconds_count{route="POST /v1/instances"} 1`,
		`airlock_requests_total{state="pending"} 0`,
	} {
		if !strings.Contains(string(r.body), line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	if strings.Contains(string(r.body), inst) {
		t.Errorf("/metrics has a series per instance ID")
	}
}

// TestReadiness checks /readyz follows the store while /healthz stays 200.
func TestReadiness(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.noScheduler = true })
	want(t, b.do(t, req{method: "GET", path: "/readyz"}), http.StatusOK, "")
	b.store.Close()
	r := b.do(t, req{method: "GET", path: "/readyz"})
	want(t, r, http.StatusServiceUnavailable, "")
	want(t, b.do(t, req{method: "GET", path: "/healthz"}), http.StatusOK, "")
	if err := b.svc.Ready(context.Background()); err == nil {
		t.Fatal("closed store is ready")
	}

	// An internal error says only "internal error" and is logged once.
	r = b.do(t, req{method: "GET", path: "/v1/approval-requests", token: b.reviewer})
	want(t, r, http.StatusInternalServerError, airlock.CodeInternal)
	if r.obj(t)["detail"] != "internal error" {
		t.Fatalf("internal problem: %s", r.body)
	}
	if errs := b.logs.Take(); len(errs) != 1 || !strings.Contains(errs[0], "internal error") {
		t.Fatalf("logged %q, want the internal error once", errs)
	}
}

// TestQueryParameters: a parameter given twice, or a malformed query, is
// 400 naming it; url.Values would have used the first silently.
func TestQueryParameters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, b.agentA)
	id := b.create(t, b.agentA, inst, "q", `{"tool":"ls","arguments":{}}`).obj(t)["id"].(string)
	cases := []struct{ path, field string }{
		{"/v1/approval-requests?state=pending&state=approved", "state"},
		{"/v1/approval-requests?limit=1&tool=ls&limit=100", "limit"},
		{"/v1/approval-requests/" + id + "?wait=1s&wait=60s", "wait"},
		{"/v1/approval-requests?state=%zz", ""},
		{"/v1/approval-requests?state=pending;tool=ls", ""},
	}
	for _, c := range cases {
		r := b.do(t, req{method: "GET", path: c.path, token: b.reviewer, invalid: true})
		want(t, r, http.StatusBadRequest, airlock.CodeInvalidRequest)
		if f, _ := r.obj(t)["field"].(string); f != c.field {
			t.Errorf("%s: field %q, want %q (%s)", c.path, f, c.field, r.body)
		}
	}
	// The same parameters once each are served.
	r := b.do(t, req{method: "GET", path: "/v1/approval-requests?state=pending&limit=1", token: b.reviewer})
	want(t, r, http.StatusOK, "")
	// A bad token is still told so first.
	r = b.do(t, req{method: "GET", path: "/v1/approval-requests?state=a&state=b", token: "airlock_nope", invalid: true})
	want(t, r, http.StatusUnauthorized, airlock.CodeUnauthorized)
}
