package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/storetest"
)

// batchPolicy routes refunds to the payments group, two approvals needed
// (carol, the bundle's reviewer, and erin are in it), and restarts to the
// ops group, which carol is not in.
const batchPolicy = `groups:
  payments: [carol, erin]
  ops: [olga]
rules:
  - {name: payments, match: 'request.tool == "issue_refund"', action: ask, reviewers: payments, approvals: 2}
  - {name: ops, match: 'request.tool == "restart"', action: ask, reviewers: ops}
`

// batchItem is one id of T38's batch and what the reviewer's decision of
// it alone is expected to be.
type batchItem struct {
	id   string
	kind string // plain, unknown, decided, expired, own, group, voted, quorum
}

// batchWorld creates T38's 100 requests: 59 plain calls the reviewer may
// approve, an unknown id, 10 already denied, 10 about to expire, 5 of the
// reviewer's own principal, 5 for a group the reviewer is not in, 5 needing
// two votes that the reviewer has voted on already and 5 needing two votes
// that nobody has voted on. The expired ones expire when clock advances.
func batchWorld(t *testing.T, b *bundle, own airlock.Caller) []batchItem {
	t.Helper()
	ctx := context.Background()
	agent := b.callers["agentA"]
	create := func(c airlock.Caller, tool, timeout string) string {
		t.Helper()
		inst, err := b.svc.RegisterInstance(ctx, c, airlock.InstanceInput{Name: "t38"})
		if err != nil {
			t.Fatal(err)
		}
		r, _, err := b.svc.CreateRequest(ctx, c, inst.ID, airlock.NewID("key_"), airlock.CreateRequestInput{
			Tool: tool, Arguments: json.RawMessage(`{"n":1}`), Timeout: timeout,
		})
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	var items []batchItem
	add := func(n int, kind string, id func() string) {
		for range n {
			items = append(items, batchItem{id: id(), kind: kind})
		}
	}
	add(59, "plain", func() string { return create(agent, "ls", "10m") })
	add(1, "unknown", func() string { return airlock.NewID(airlock.PrefixRequest) })
	add(10, "decided", func() string {
		id := create(agent, "ls", "10m")
		if _, err := b.svc.Decide(ctx, b.callers["reviewer"], id, airlock.DecisionInput{Status: airlock.StateDenied, Note: "first"}); err != nil {
			t.Fatal(err)
		}
		return id
	})
	add(10, "expired", func() string { return create(agent, "ls", "1m") })
	add(5, "own", func() string { return create(own, "ls", "10m") })
	add(5, "group", func() string { return create(agent, "restart", "10m") })
	add(5, "voted", func() string {
		id := create(agent, "issue_refund", "10m")
		if _, err := b.svc.Decide(ctx, b.callers["reviewer"], id, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
			t.Fatal(err)
		}
		return id
	})
	add(5, "quorum", func() string { return create(agent, "issue_refund", "10m") })
	// Interleave the kinds, as a reviewer's selection would be.
	for i := range items {
		j := (i * 37) % len(items)
		items[i], items[j] = items[j], items[i]
	}
	return items
}

// TestBatchT38 is T38 on both stores: a batch of 100 ids where some are
// decided, expired, the reviewer's own or for another group answers a
// result per id; nothing is decided twice; and every result is the one the
// reviewer's decision of that id alone gets, on a twin of the same
// requests decided one by one, so a batch makes no decision the reviewer
// could not make one by one.
func TestBatchT38(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		name := "sqlite"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clock := storetest.NewFakeClock(time.Now().UTC())
			opts := []func(*options){withPolicy(t, batchPolicy), func(o *options) { o.clock = clock }}
			if pg {
				opts = append(opts, func(o *options) { o.postgres = true })
			}
			testBatchT38(t, setup(t, opts...), clock)
		})
	}
}

func testBatchT38(t *testing.T, b *bundle, clock *storetest.FakeClock) {
	ctx := context.Background()
	mint := func(name, principal string, role airlock.Role) (airlock.Caller, string) {
		_, secret, err := b.svc.CreateToken(ctx, b.callers["admin"], airlock.NewTokenInput{Name: name, Role: role, Principal: principal})
		if err != nil {
			t.Fatal(err)
		}
		c, err := b.svc.Authenticate(ctx, secret)
		if err != nil {
			t.Fatal(err)
		}
		return c, secret
	}
	own, _ := mint("carol's agent", "carol", airlock.RoleAgent)
	_, erin := mint("Erin", "erin", airlock.RoleReviewer)

	batch, single := batchWorld(t, b, own), batchWorld(t, b, own)
	if len(batch) != 100 {
		t.Fatalf("the world has %d requests, want 100", len(batch))
	}
	clock.Advance(2 * time.Minute) // the 1m ones are past their deadline

	ids := make([]string, len(batch))
	for i, it := range batch {
		ids[i] = it.id
	}
	decideBatch := func(token string, ids []string, extra string) resp {
		body, _ := json.Marshal(ids)
		return b.do(t, req{method: "POST", path: "/v1/approval-requests/decisions", token: token,
			body: `{"ids":` + string(body) + `,"status":"approved","note":"batch"` + extra + `}`})
	}
	r := decideBatch(b.reviewer, ids, `,"valid_for":"2m"`)
	want(t, r, http.StatusOK, "")
	results := batchResults(t, r)
	if len(results) != len(batch) {
		t.Fatalf("%d results for %d ids", len(results), len(batch))
	}

	// The twin, decided one by one: each id's result must be the same.
	for i, it := range single {
		one := b.do(t, req{method: "POST", path: "/v1/approval-requests/" + it.id + "/decision", token: b.reviewer,
			body: `{"status":"approved","note":"batch","valid_for":"2m"}`})
		res := results[i]
		if res.ID != batch[i].id {
			t.Fatalf("result %d is for %s, want %s: results are in the order of ids", i, res.ID, batch[i].id)
		}
		// An expired request answers deadline_passed to the write that
		// finds it due, or not_pending once the scheduler expired it first:
		// either is the same refusal.
		norm := func(c airlock.Code) airlock.Code {
			if c == airlock.CodeDeadlinePassed {
				return airlock.CodeNotPending
			}
			return c
		}
		if res.Status != one.status || norm(res.code()) != norm(code(one)) {
			t.Errorf("%s (%s): the batch answered %d %s, alone it is %d %s", it.kind, res.ID, res.Status, res.code(), one.status, code(one))
		}
	}

	wantResult := map[string]struct {
		status int
		code   airlock.Code
		state  airlock.State
	}{
		"plain":   {200, "", airlock.StateApproved},
		"unknown": {404, airlock.CodeNotFound, ""},
		"decided": {409, airlock.CodeNotPending, airlock.StateDenied},
		"expired": {409, airlock.CodeDeadlinePassed, airlock.StateExpired},
		"own":     {403, airlock.CodeForbidden, airlock.StatePending},
		"group":   {403, airlock.CodeForbidden, airlock.StatePending},
		"voted":   {403, airlock.CodeForbidden, airlock.StatePending},
		"quorum":  {200, "", airlock.StatePending},
	}
	approved := 0
	for i, it := range batch {
		res, w := results[i], wantResult[it.kind]
		if res.Status != w.status || (res.code() != w.code && !(it.kind == "expired" && res.code() == airlock.CodeNotPending)) {
			t.Errorf("%s (%s): result %d %s, want %d %s", it.kind, it.id, res.Status, res.code(), w.status, w.code)
		}
		if it.kind == "unknown" {
			continue
		}
		got, err := b.st.GetRequest(ctx, it.id)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != w.state {
			t.Errorf("%s (%s) is %s after the batch, want %s", it.kind, it.id, got.State, w.state)
		}
		switch it.kind {
		case "plain":
			approved++
			if got.Decision == nil || got.Decision.DecidedBy != b.callers["reviewer"].ID || got.Decision.Note != "batch" ||
				got.Decision.ExpiresAt.Sub(got.Decision.DecidedAt) != 2*time.Minute {
				t.Errorf("plain %s decided as %+v", it.id, got.Decision)
			}
			if res.Request["state"] != "approved" {
				t.Errorf("plain %s: the result's request is %v", it.id, res.Request["state"])
			}
		case "decided":
			if got.Decision == nil || got.Decision.Note != "first" {
				t.Errorf("decided %s was decided twice: %+v", it.id, got.Decision)
			}
		case "own", "group":
			if got.Decision != nil || len(got.Votes) != 0 {
				t.Errorf("%s %s has a decision or vote the reviewer could not make: %+v %+v", it.kind, it.id, got.Decision, got.Votes)
			}
		case "voted", "quorum":
			if len(got.Votes) != 1 {
				t.Errorf("%s %s has %d votes, want 1: a principal votes once", it.kind, it.id, len(got.Votes))
			}
		}
	}
	if approved != 59 {
		t.Fatalf("%d approved, want 59", approved)
	}

	// The same batch again decides nothing: every id was decided or voted.
	for i, res := range batchResults(t, decideBatch(b.reviewer, ids, "")) {
		if res.Status == http.StatusOK {
			t.Errorf("%s (%s) was decided a second time", batch[i].kind, res.ID)
		}
	}

	// Quorum rules count each vote: erin's batch completes the quorums, and
	// is refused the ops group's and the decided ones.
	for i, res := range batchResults(t, decideBatch(erin, ids, "")) {
		switch batch[i].kind {
		case "voted", "quorum":
			if res.Status != http.StatusOK || res.Request["state"] != "approved" || len(res.Request["votes"].([]any)) != 2 {
				t.Errorf("%s %s after erin's vote: %d %v", batch[i].kind, res.ID, res.Status, res.Request)
			}
		case "own":
			if res.Status != http.StatusOK { // erin may decide carol's agent's calls
				t.Errorf("own %s for erin: %d %s", res.ID, res.Status, res.code())
			}
		default:
			if res.Status == http.StatusOK {
				t.Errorf("%s %s decided by erin", batch[i].kind, res.ID)
			}
		}
	}
}

// TestBatchRefusals: what no id could be decided with refuses the whole
// batch, and decides nothing.
func TestBatchRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, id := b.pending(t, "10m")
	many := make([]string, airlock.MaxBatchIDs+1)
	for i := range many {
		many[i] = fmt.Sprintf("%q", airlock.NewID(airlock.PrefixRequest))
	}
	for _, c := range []struct {
		name, token, body string
		status            int
		code              airlock.Code
		invalid           bool
	}{
		{"an agent", b.agentA, `{"ids":["` + id + `"],"status":"approved"}`, 403, airlock.CodeForbidden, false},
		{"an admin", b.admin, `{"ids":["` + id + `"],"status":"approved"}`, 403, airlock.CodeForbidden, false},
		{"no ids", b.reviewer, `{"ids":[],"status":"approved"}`, 400, airlock.CodeInvalidRequest, true},
		{"101 ids", b.reviewer, `{"ids":[` + strings.Join(many, ",") + `],"status":"approved"}`, 400, airlock.CodeInvalidRequest, true},
		{"an id twice", b.reviewer, `{"ids":["` + id + `","` + id + `"],"status":"approved"}`, 400, airlock.CodeInvalidRequest, true},
		{"an edit", b.reviewer, `{"ids":["` + id + `"],"status":"approved","arguments":{"amount":1}}`, 400, airlock.CodeInvalidRequest, true},
		{"a grant", b.reviewer, `{"ids":["` + id + `"],"status":"approved","grant":{"expires_in":"1h"}}`, 400, airlock.CodeInvalidRequest, true},
		{"a bad status", b.reviewer, `{"ids":["` + id + `"],"status":"expired"}`, 400, airlock.CodeInvalidRequest, true},
		{"a bad valid_for", b.reviewer, `{"ids":["` + id + `"],"status":"approved","valid_for":"forever"}`, 400, airlock.CodeInvalidRequest, false},
		{"a denial valid_for", b.reviewer, `{"ids":["` + id + `"],"status":"denied","valid_for":"1m"}`, 400, airlock.CodeInvalidRequest, false},
	} {
		r := b.do(t, req{method: "POST", path: "/v1/approval-requests/decisions", token: c.token, body: c.body, invalid: c.invalid})
		if r.status != c.status || code(r) != c.code {
			t.Errorf("%s: %d %s, want %d %s: %s", c.name, r.status, code(r), c.status, c.code, r.body)
		}
	}
	got, err := b.st.GetRequest(context.Background(), id)
	if err != nil || got.State != airlock.StatePending {
		t.Fatalf("after refused batches the request is %v (%v)", got.State, err)
	}
}

// batchResult is one result of a batch decision's answer.
type batchResult struct {
	ID      string           `json:"id"`
	Status  int              `json:"status"`
	Request map[string]any   `json:"request"`
	Problem *airlock.Problem `json:"problem"`
}

func (r batchResult) code() airlock.Code {
	if r.Problem == nil {
		return ""
	}
	return airlock.Code(r.Problem.Code)
}

func batchResults(t *testing.T, r resp) []batchResult {
	t.Helper()
	want(t, r, http.StatusOK, "")
	var out struct {
		Results []batchResult `json:"results"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	return out.Results
}

// code is the problem code of an answer, "" for a success.
func code(r resp) airlock.Code {
	if r.status < 300 {
		return ""
	}
	var p airlock.Problem
	_ = json.Unmarshal(r.body, &p)
	return airlock.Code(p.Code)
}
