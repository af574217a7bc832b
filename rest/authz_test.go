package rest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// matrixCallers are the columns of T14: two agents, a reviewer, a reviewer
// whose token has agent A's principal, an admin, no token, a revoked token,
// a verifier (a tool server's token: it may consume approval tokens and
// call nothing else) and an auditor (it reads the audit log and calls
// nothing else).
var matrixCallers = []string{"agentA", "agentB", "reviewer", "reviewerA", "admin", "none", "revoked", "verifier", "auditor"}

func (b *bundle) secret(caller string) string {
	switch caller {
	case "agentA":
		return b.agentA
	case "agentB":
		return b.agentB
	case "reviewer":
		return b.reviewer
	case "reviewerA":
		return b.reviewerA
	case "admin":
		return b.admin
	case "revoked":
		return b.revoked
	case "verifier":
		return b.verifier
	case "auditor":
		return b.auditor
	}
	return ""
}

// TestAuthorizationMatrix is T14: every caller × every endpoint, each cell
// on fresh fixtures owned by agent A, with the status expected.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const (
		ok      = http.StatusOK
		created = http.StatusCreated
		unauth  = http.StatusUnauthorized
		forbid  = http.StatusForbidden
		missing = http.StatusNotFound
	)
	// Each row builds its request on fresh fixtures; the expected statuses
	// follow matrixCallers' order.
	rows := []struct {
		endpoint string
		build    func(t *testing.T) req
		want     [9]int
	}{
		{"POST /v1/instances", func(t *testing.T) req {
			return req{method: "POST", path: "/v1/instances", body: `{"name":"x"}`}
		}, [9]int{created, created, forbid, forbid, forbid, unauth, unauth, forbid, forbid}},
		{"GET /v1/instances", func(t *testing.T) req {
			return req{method: "GET", path: "/v1/instances"}
		}, [9]int{ok, ok, ok, ok, ok, unauth, unauth, forbid, forbid}},
		{"GET /v1/instances/{id}", func(t *testing.T) req {
			inst, _ := b.pending(t, "10m")
			return req{method: "GET", path: "/v1/instances/" + inst}
		}, [9]int{ok, missing, ok, ok, ok, unauth, unauth, forbid, forbid}},
		{"DELETE /v1/instances/{id}", func(t *testing.T) req {
			inst, _ := b.pending(t, "10m")
			return req{method: "DELETE", path: "/v1/instances/" + inst}
		}, [9]int{ok, missing, forbid, forbid, ok, unauth, unauth, forbid, forbid}},
		{"POST /v1/instances/{id}/approval-requests", func(t *testing.T) req {
			inst, _ := b.pending(t, "10m")
			return req{method: "POST", path: "/v1/instances/" + inst + "/approval-requests",
				body: `{"tool":"ls","arguments":{}}`, header: map[string]string{"Idempotency-Key": "m"}}
		}, [9]int{created, missing, forbid, forbid, forbid, unauth, unauth, forbid, forbid}},
		{"GET /v1/approval-requests", func(t *testing.T) req {
			return req{method: "GET", path: "/v1/approval-requests"}
		}, [9]int{ok, ok, ok, ok, ok, unauth, unauth, forbid, forbid}},
		{"GET /v1/approval-requests/{id}", func(t *testing.T) req {
			_, id := b.pending(t, "10m")
			return req{method: "GET", path: "/v1/approval-requests/" + id}
		}, [9]int{ok, missing, ok, ok, ok, unauth, unauth, forbid, forbid}},
		{"POST /v1/approval-requests/{id}/cancel", func(t *testing.T) req {
			_, id := b.pending(t, "10m")
			return req{method: "POST", path: "/v1/approval-requests/" + id + "/cancel"}
		}, [9]int{ok, missing, forbid, forbid, forbid, unauth, unauth, forbid, forbid}},
		{"POST /v1/approval-requests/{id}/decision", func(t *testing.T) req {
			_, id := b.pending(t, "10m")
			return req{method: "POST", path: "/v1/approval-requests/" + id + "/decision", body: `{"status":"approved"}`}
		}, [9]int{forbid, forbid, ok, forbid, forbid, unauth, unauth, forbid, forbid}},
		// A batch answers 200 to any reviewer: reviewerA's result for its
		// own principal's request is forbidden inside it (TestBatchT38).
		{"POST /v1/approval-requests/decisions", func(t *testing.T) req {
			_, id := b.pending(t, "10m")
			return req{method: "POST", path: "/v1/approval-requests/decisions", body: `{"ids":["` + id + `"],"status":"approved"}`}
		}, [9]int{forbid, forbid, ok, ok, forbid, unauth, unauth, forbid, forbid}},
		{"POST /v1/approval-requests/{id}/execution", func(t *testing.T) req {
			return req{method: "POST", path: "/v1/approval-requests/" + b.approved(t) + "/execution"}
		}, [9]int{ok, missing, forbid, forbid, forbid, unauth, unauth, forbid, forbid}},
		{"PUT /v1/approval-requests/{id}/execution", func(t *testing.T) req {
			return req{method: "PUT", path: "/v1/approval-requests/" + b.claimed(t) + "/execution", body: `{"status":"succeeded"}`}
		}, [9]int{ok, missing, forbid, forbid, forbid, unauth, unauth, forbid, forbid}},
		{"GET /v1/events", func(t *testing.T) req {
			return req{method: "GET", path: "/v1/events"}
		}, [9]int{forbid, forbid, ok, ok, ok, unauth, unauth, forbid, forbid}},
		{"POST /v1/tokens", func(t *testing.T) req {
			return req{method: "POST", path: "/v1/tokens", body: `{"name":"n","role":"agent"}`}
		}, [9]int{forbid, forbid, forbid, forbid, created, unauth, unauth, forbid, forbid}},
		{"GET /v1/tokens", func(t *testing.T) req {
			return req{method: "GET", path: "/v1/tokens"}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, forbid}},
		{"DELETE /v1/tokens/{id}", func(t *testing.T) req {
			tok, _, err := b.svc.CreateToken(context.Background(), b.callers["admin"], airlock.NewTokenInput{Name: "victim", Role: airlock.RoleAgent})
			if err != nil {
				t.Fatal(err)
			}
			return req{method: "DELETE", path: "/v1/tokens/" + tok.ID}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, forbid}},
		{"POST /v1/webhooks", func(t *testing.T) req {
			return req{method: "POST", path: "/v1/webhooks", body: `{"url":"https://example.test/hook"}`}
		}, [9]int{forbid, forbid, forbid, forbid, created, unauth, unauth, forbid, forbid}},
		{"GET /v1/webhooks", func(t *testing.T) req {
			return req{method: "GET", path: "/v1/webhooks"}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, forbid}},
		{"GET /v1/webhooks/{id}", func(t *testing.T) req {
			return req{method: "GET", path: "/v1/webhooks/" + b.webhook(t)}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, forbid}},
		{"DELETE /v1/webhooks/{id}", func(t *testing.T) req {
			return req{method: "DELETE", path: "/v1/webhooks/" + b.webhook(t)}
		}, [9]int{forbid, forbid, forbid, forbid, http.StatusNoContent, unauth, unauth, forbid, forbid}},
		{"GET /v1/webhooks/{id}/deliveries", func(t *testing.T) req {
			return req{method: "GET", path: "/v1/webhooks/" + b.webhook(t) + "/deliveries"}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, forbid}},
		{"POST /v1/webhooks/{id}/test", func(t *testing.T) req {
			return req{method: "POST", path: "/v1/webhooks/" + b.webhook(t) + "/test"}
		}, [9]int{forbid, forbid, forbid, forbid, http.StatusAccepted, unauth, unauth, forbid, forbid}},
		{"POST /v1/grants", func(t *testing.T) req {
			inst, _ := b.pending(t, "10m")
			return req{method: "POST", path: "/v1/grants",
				body: `{"tool":"issue_refund","arguments":{"amount":4900},"instance_id":"` + inst + `","expires_in":"1h"}`}
		}, [9]int{forbid, forbid, created, forbid, created, unauth, unauth, forbid, forbid}},
		{"GET /v1/grants", func(t *testing.T) req {
			return req{method: "GET", path: "/v1/grants"}
		}, [9]int{forbid, forbid, ok, ok, ok, unauth, unauth, forbid, forbid}},
		{"GET /v1/grants/{id}", func(t *testing.T) req {
			return req{method: "GET", path: "/v1/grants/" + b.grant(t)}
		}, [9]int{forbid, forbid, ok, ok, ok, unauth, unauth, forbid, forbid}},
		{"DELETE /v1/grants/{id}", func(t *testing.T) req {
			return req{method: "DELETE", path: "/v1/grants/" + b.grant(t)}
		}, [9]int{forbid, forbid, ok, ok, ok, unauth, unauth, forbid, forbid}},
		{"POST /v1/webhooks/{id}/enable", func(t *testing.T) req {
			return req{method: "POST", path: "/v1/webhooks/" + b.webhook(t) + "/enable"}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, forbid}},
		{"GET /v1/board", func(t *testing.T) req {
			b.boardItem(t)
			return req{method: "GET", path: "/v1/board"}
		}, [9]int{ok, ok, ok, ok, ok, unauth, unauth, forbid, forbid}},
		{"POST /v1/board/columns", func(t *testing.T) req {
			return req{method: "POST", path: "/v1/board/columns", body: `{"key":"` + b.freshKey() + `","name":"C"}`}
		}, [9]int{forbid, forbid, created, created, created, unauth, unauth, forbid, forbid}},
		{"POST /v1/work-items", func(t *testing.T) req {
			col, _ := b.boardItem(t)
			return req{method: "POST", path: "/v1/work-items", body: `{"title":"T","column_key":"` + col + `"}`}
		}, [9]int{forbid, forbid, created, created, created, unauth, unauth, forbid, forbid}},
		{"GET /v1/work-items/{id}", func(t *testing.T) req {
			_, id := b.boardItem(t)
			return req{method: "GET", path: "/v1/work-items/" + id}
		}, [9]int{ok, ok, ok, ok, ok, unauth, unauth, forbid, forbid}},
		{"PATCH /v1/work-items/{id}", func(t *testing.T) req {
			_, id := b.boardItem(t)
			return req{method: "PATCH", path: "/v1/work-items/" + id, body: `{"title":"Renamed"}`}
		}, [9]int{forbid, forbid, ok, ok, ok, unauth, unauth, forbid, forbid}},
		{"GET /v1/sessions", func(t *testing.T) req {
			return req{method: "GET", path: "/v1/sessions"}
		}, [9]int{ok, ok, ok, ok, ok, unauth, unauth, forbid, forbid}},
		// The HTTP hook answers 200 to everyone, with the verdict in the
		// body: a 401 would let Claude Code run the tool (rest/hooks.go).
		// TestClaudeCodeHTTPHook checks the bodies.
		{"POST /v1/hooks/claude-code", func(t *testing.T) req {
			return req{method: "POST", path: "/v1/hooks/claude-code?wait=1s&match=NotThisTool",
				body: `{"session_id":"m","hook_event_name":"PreToolUse","tool_name":"Bash","tool_use_id":"t","tool_input":{}}`}
		}, [9]int{ok, ok, ok, ok, ok, ok, ok, ok, ok}},
		{"GET /v1/reviewers", func(t *testing.T) req {
			return req{method: "GET", path: "/v1/reviewers"}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, forbid}},
		{"PUT /v1/reviewers/{principal}/link", func(t *testing.T) req {
			return req{method: "PUT", path: "/v1/reviewers/carol/link", body: `{"email":"carol@example.com"}`}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, forbid}},
		{"POST /v1/reviewers/end-sessions", func(t *testing.T) req {
			return req{method: "POST", path: "/v1/reviewers/end-sessions", body: `{"principal":"oidc:https://id.example.com#ada"}`}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, forbid}},
		// A reviewer reads their own statistics (TestReviewerStats), not
		// another's.
		{"GET /v1/reviewers/{principal}/stats", func(t *testing.T) req {
			return req{method: "GET", path: "/v1/reviewers/dave/stats?since=7d"}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, forbid}},
		{"GET /v1/suggestions", func(t *testing.T) req {
			return req{method: "GET", path: "/v1/suggestions?min=2"}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, forbid}},
		// Slack's requests carry no token but Slack's signature; without
		// --slack-signing-secret the route is not there (TestSlack* in
		// slackapp check the signed requests).
		{"POST /slack/interactions", func(t *testing.T) req {
			return req{method: "POST", path: "/slack/interactions", body: `payload=%7B%7D`,
				header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}
		}, [9]int{missing, missing, missing, missing, missing, missing, missing, missing, missing}},
		{"GET /healthz", func(t *testing.T) req { return req{method: "GET", path: "/healthz"} }, [9]int{ok, ok, ok, ok, ok, ok, ok, ok, ok}},
		{"GET /readyz", func(t *testing.T) req { return req{method: "GET", path: "/readyz"} }, [9]int{ok, ok, ok, ok, ok, ok, ok, ok, ok}},
		{"GET /metrics", func(t *testing.T) req { return req{method: "GET", path: "/metrics"} }, [9]int{ok, ok, ok, ok, ok, ok, ok, ok, ok}},
		{"GET /openapi.yaml", func(t *testing.T) req { return req{method: "GET", path: "/openapi.yaml"} }, [9]int{ok, ok, ok, ok, ok, ok, ok, ok, ok}},
		{"GET /.well-known/jwks.json", func(t *testing.T) req { return req{method: "GET", path: "/.well-known/jwks.json"} }, [9]int{ok, ok, ok, ok, ok, ok, ok, ok, ok}},
		// Web Push (docs/phone.md): reviewers and admins, each for their
		// own browsers; the subscription deleted is the reviewer's.
		{"GET /v1/push/vapid-public-key", func(t *testing.T) req {
			return req{method: "GET", path: "/v1/push/vapid-public-key"}
		}, [9]int{forbid, forbid, ok, ok, ok, unauth, unauth, forbid, forbid}},
		{"POST /v1/push/subscriptions", func(t *testing.T) req {
			return req{method: "POST", path: "/v1/push/subscriptions", body: pushBody(t, "https://push.example.test/"+airlock.NewID("m_"))}
		}, [9]int{forbid, forbid, created, created, created, unauth, unauth, forbid, forbid}},
		{"DELETE /v1/push/subscriptions/{id}", func(t *testing.T) req {
			return req{method: "DELETE", path: "/v1/push/subscriptions/" + b.pushSubscription(t)}
		}, [9]int{forbid, forbid, http.StatusNoContent, missing, missing, unauth, unauth, forbid, forbid}},
		{"GET /v1/signing-keys", func(t *testing.T) req {
			return req{method: "GET", path: "/v1/signing-keys"}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, forbid}},
		{"POST /v1/signing-keys/rotate", func(t *testing.T) req {
			return req{method: "POST", path: "/v1/signing-keys/rotate"}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, forbid}},
		{"POST /v1/approval-tokens/consume", func(t *testing.T) req {
			return req{method: "POST", path: "/v1/approval-tokens/consume", body: `{"token":"` + b.approvalToken(t) + `"}`}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, ok, forbid}},
		// The audit log (docs/audit.md): auditors and admins only.
		{"GET /v1/audit/checkpoint", func(t *testing.T) req {
			b.checkpointed(t)
			return req{method: "GET", path: "/v1/audit/checkpoint"}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, ok}},
		{"GET /v1/audit/key", func(t *testing.T) req {
			return req{method: "GET", path: "/v1/audit/key"}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, ok}},
		{"GET /v1/audit/entries", func(t *testing.T) req {
			return req{method: "GET", path: "/v1/audit/entries?start=0&limit=10"}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, ok}},
		{"GET /v1/audit/proofs/inclusion", func(t *testing.T) req {
			b.checkpointed(t)
			return req{method: "GET", path: "/v1/audit/proofs/inclusion?index=0&tree_size=1"}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, ok}},
		{"GET /v1/audit/proofs/consistency", func(t *testing.T) req {
			b.checkpointed(t)
			return req{method: "GET", path: "/v1/audit/proofs/consistency?from=1&to=1"}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, ok}},
		{"GET /v1/audit/export", func(t *testing.T) req {
			return req{method: "GET", path: "/v1/audit/export?format=csv"}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, ok}},
		{"GET /v1/approval-requests/{id}/proof", func(t *testing.T) req {
			_, id := b.pending(t, "10m")
			b.checkpointed(t)
			return req{method: "GET", path: "/v1/approval-requests/" + id + "/proof"}
		}, [9]int{forbid, forbid, forbid, forbid, ok, unauth, unauth, forbid, ok}},
	}
	covered := map[string]bool{}
	unexpected2xx := 0
	var table strings.Builder
	fmt.Fprintf(&table, "%-45s %s\n", "endpoint", strings.Join(matrixCallers, " "))
	for _, row := range rows {
		covered[row.endpoint] = true
		fmt.Fprintf(&table, "%-45s", row.endpoint)
		for i, caller := range matrixCallers {
			q := row.build(t)
			q.token = b.secret(caller)
			got := b.status(t, q)
			fmt.Fprintf(&table, " %d", got)
			if got != row.want[i] {
				t.Errorf("%s as %s: %d, want %d", row.endpoint, caller, got, row.want[i])
				if got < 300 {
					unexpected2xx++
				}
			}
		}
		table.WriteString("\n")
	}
	t.Logf("authorization matrix:\n%s", table.String())
	if unexpected2xx != 0 {
		t.Errorf("%d unexpected 2xx", unexpected2xx)
	}
	for _, rt := range routes {
		if !covered[rt.pattern] {
			t.Errorf("route %s is not in the matrix", rt.pattern)
		}
	}
}

// status performs a call and returns its status; a stream is closed once
// its headers arrive.
func (b *bundle) status(t testing.TB, q req) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := b.client.Do(b.newRequest(ctx, t, q))
	if err != nil {
		t.Fatalf("%s %s: %v", q.method, q.path, err)
	}
	defer res.Body.Close()
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		io.Copy(io.Discard, res.Body)
	}
	return res.StatusCode
}

// TestAgentsSeeOnlyTheirOwn checks the facts behind the matrix: agent B
// cannot read, list or act on A's request (404, nothing listed), an agent
// cannot decide (403), and a reviewer cannot approve their own principal's
// request (403) while another reviewer can.
func TestAgentsSeeOnlyTheirOwn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst, id := b.pending(t, "10m")
	r := b.do(t, req{method: "GET", path: "/v1/approval-requests/" + id, token: b.agentB})
	want(t, r, http.StatusNotFound, airlock.CodeNotFound)
	r = b.do(t, req{method: "GET", path: "/v1/approval-requests?instance_id=" + inst, token: b.agentB})
	want(t, r, http.StatusOK, "")
	if n := len(r.obj(t)["items"].([]any)); n != 0 {
		t.Fatalf("agent B lists %d of A's requests", n)
	}
	r = b.do(t, req{method: "GET", path: "/v1/approval-requests", token: b.agentA})
	if n := len(r.obj(t)["items"].([]any)); n != 1 {
		t.Fatalf("agent A lists %d requests, want 1", n)
	}
	r = b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/decision", token: b.agentA, body: `{"status":"approved"}`})
	want(t, r, http.StatusForbidden, airlock.CodeForbidden)
	r = b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/decision", token: b.reviewerA, body: `{"status":"approved"}`})
	want(t, r, http.StatusForbidden, airlock.CodeForbidden)
	r = b.do(t, req{method: "GET", path: "/v1/approval-requests/" + id, token: b.reviewer})
	if r.obj(t)["state"] != "pending" {
		t.Fatalf("refused decisions changed the request: %s", r.body)
	}
	r = b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/decision", token: b.reviewer, body: `{"status":"approved"}`})
	want(t, r, http.StatusOK, "")
}

// TestAuthentication checks only "Authorization: Bearer" is read: a token
// in the query string, another scheme, or a revoked token are 401 with a
// WWW-Authenticate challenge.
func TestAuthentication(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, q := range []req{
		{method: "GET", path: "/v1/approval-requests?access_token=" + b.reviewer},
		{method: "GET", path: "/v1/approval-requests?token=" + b.reviewer},
		{method: "GET", path: "/v1/approval-requests", header: map[string]string{"Authorization": "Basic " + b.reviewer}},
		{method: "GET", path: "/v1/approval-requests", header: map[string]string{"Authorization": b.reviewer}},
		{method: "GET", path: "/v1/approval-requests", token: "airlock_unknown"},
		{method: "GET", path: "/v1/approval-requests", token: b.revoked},
	} {
		q.invalid = true
		r := b.do(t, q)
		want(t, r, http.StatusUnauthorized, airlock.CodeUnauthorized)
		if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: no Bearer challenge", q.path)
		}
	}
	// The scheme is case-insensitive.
	r := b.do(t, req{method: "GET", path: "/v1/approval-requests", header: map[string]string{"Authorization": "bearer " + b.reviewer}})
	want(t, r, http.StatusOK, "")
}
