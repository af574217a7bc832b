package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/provider"
)

// TestBoardAuthorization is the authorization matrix of the board
// endpoints: reviewers and admins write, agents read, nobody else does
// either.
func TestBoardAuthorization(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.svc.CreateColumn(ctx, b.callers["reviewer"], "todo", "To do"); err != nil {
		t.Fatal(err)
	}
	item, err := b.svc.CreateWorkItem(ctx, b.callers["reviewer"], "Plan", "todo")
	if err != nil {
		t.Fatal(err)
	}
	type call struct {
		name, method, path, body string
		ok                       int // status when allowed
		write                    bool
	}
	var n int
	calls := func() []call {
		n++
		key := "col" + string(rune('a'+n%26)) + strings.Repeat("x", n/26)
		return []call{
			{"read the board", "GET", "/v1/board", "", 200, false},
			{"read an item", "GET", "/v1/work-items/" + item.ID, "", 200, false},
			{"add a column", "POST", "/v1/board/columns", `{"key":"` + key + `","name":"C"}`, 201, true},
			{"add an item", "POST", "/v1/work-items", `{"title":"T","column_key":"todo"}`, 201, true},
			{"rename an item", "PATCH", "/v1/work-items/" + item.ID, `{"title":"Plan ` + key + `"}`, 200, true},
		}
	}
	for _, who := range []struct {
		name         string
		token        string
		read, write  bool
		deniedStatus int
		deniedCode   airlock.Code
	}{
		{"agent", b.agentA, true, false, 403, airlock.CodeForbidden},
		{"reviewer", b.reviewer, true, true, 0, ""},
		{"admin", b.admin, true, true, 0, ""},
		{"revoked agent", b.revoked, false, false, 401, airlock.CodeUnauthorized},
		{"no token", "", false, false, 401, airlock.CodeUnauthorized},
	} {
		for _, c := range calls() {
			allowed := (c.write && who.write) || (!c.write && who.read)
			r := b.do(t, req{method: c.method, path: c.path, token: who.token, body: c.body})
			if allowed {
				want(t, r, c.ok, "")
				continue
			}
			if r.status != who.deniedStatus || r.obj(t)["code"] != string(who.deniedCode) {
				t.Fatalf("%s may not %s: got %d %s, want %d %s", who.name, c.name, r.status, r.body, who.deniedStatus, who.deniedCode)
			}
		}
	}
}

// TestBoardLifecycle manages a board over HTTP: columns in order, items
// whose version grows, and the errors that name their field.
func TestBoardLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []string{`{"key":"todo","name":"To do"}`, `{"key":"doing","name":"Doing"}`, `{"key":"done","name":"Done ✅"}`} {
		want(t, b.do(t, req{method: "POST", path: "/v1/board/columns", token: b.reviewer, body: c}), http.StatusCreated, "")
	}
	r := b.do(t, req{method: "POST", path: "/v1/board/columns", token: b.admin, body: `{"key":"todo","name":"Again"}`})
	want(t, r, http.StatusBadRequest, airlock.CodeInvalidRequest)
	if r.obj(t)["field"] != "key" {
		t.Fatalf("duplicate key problem %s, want field key", r.body)
	}
	r = b.do(t, req{method: "POST", path: "/v1/board/columns", token: b.admin, body: `{"key":"To Do","name":"x"}`, invalid: true})
	want(t, r, http.StatusBadRequest, airlock.CodeInvalidRequest)

	r = b.do(t, req{method: "POST", path: "/v1/work-items", token: b.admin, body: `{"title":"Ship it","column_key":"doing"}`})
	want(t, r, http.StatusCreated, "")
	item := r.obj(t)
	id := item["id"].(string)
	if r.header.Get("Location") != "/v1/work-items/"+id || item["version"] != float64(1) || item["column_key"] != "doing" {
		t.Fatalf("created item %s (Location %q)", r.body, r.header.Get("Location"))
	}
	r = b.do(t, req{method: "POST", path: "/v1/work-items", token: b.admin, body: `{"title":"Lost","column_key":"archive"}`})
	want(t, r, http.StatusBadRequest, airlock.CodeInvalidRequest)
	if r.obj(t)["field"] != "column_key" {
		t.Fatalf("unknown column problem %s, want field column_key", r.body)
	}
	r = b.do(t, req{method: "POST", path: "/v1/work-items", token: b.admin, body: `{"title":"x","column_key":"todo","version":3}`, invalid: true})
	want(t, r, http.StatusBadRequest, airlock.CodeInvalidRequest)

	r = b.do(t, req{method: "PATCH", path: "/v1/work-items/" + id, token: b.reviewer, body: `{"column_key":"done","if_version":1}`})
	want(t, r, http.StatusOK, "")
	if got := r.obj(t); got["version"] != float64(2) || got["column_key"] != "done" || got["title"] != "Ship it" {
		t.Fatalf("moved item %s, want version 2 in done", r.body)
	}
	r = b.do(t, req{method: "PATCH", path: "/v1/work-items/" + id, token: b.reviewer, body: `{"title":"Stale","if_version":1}`})
	want(t, r, http.StatusBadRequest, airlock.CodeInvalidRequest)
	if got := r.obj(t); got["field"] != "if_version" || !strings.Contains(got["detail"].(string), "version 2") {
		t.Fatalf("stale if_version problem %s", r.body)
	}
	r = b.do(t, req{method: "PATCH", path: "/v1/work-items/" + id, token: b.reviewer, body: `{}`, invalid: true})
	want(t, r, http.StatusBadRequest, airlock.CodeInvalidRequest)
	r = b.do(t, req{method: "PATCH", path: "/v1/work-items/wi_missing", token: b.reviewer, body: `{"title":"x"}`})
	want(t, r, http.StatusNotFound, airlock.CodeNotFound)
	want(t, b.do(t, req{method: "GET", path: "/v1/work-items/wi_missing", token: b.agentA}), http.StatusNotFound, airlock.CodeNotFound)

	r = b.do(t, req{method: "GET", path: "/v1/work-items/" + id, token: b.agentA})
	want(t, r, http.StatusOK, "")
	if got := r.obj(t); got["version"] != float64(2) || got["column_key"] != "done" {
		t.Fatalf("agent reads %s", r.body)
	}
	r = b.do(t, req{method: "GET", path: "/v1/board", token: b.agentA})
	want(t, r, http.StatusOK, "")
	var board struct {
		Columns []struct {
			Key      string
			Position int
			Items    []struct{ ID string }
		}
	}
	if err := json.Unmarshal(r.body, &board); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range board.Columns {
		keys = append(keys, c.Key)
	}
	if !slices.Equal(keys, []string{"todo", "doing", "done"}) || len(board.Columns[2].Items) != 1 || board.Columns[2].Items[0].ID != id ||
		len(board.Columns[1].Items) != 0 {
		t.Fatalf("board %s, want todo, doing, done with the item in done", r.body)
	}
}

// TestSessionsList checks GET /v1/sessions: reviewers and admins see every
// session, agents their own, each with its status.
func TestSessionsList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	a, bb := b.callers["agentA"], b.callers["agentB"]
	waiting, err := b.svc.OpenSession(ctx, a, "waiting one", json.RawMessage(`{"repo":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.svc.CreateMCPRequest(ctx, a, provider.MCPRequestInput{
		Kind: airlock.KindAgentRequest, Title: "May I?", SessionID: waiting.ID, IdempotencyKey: "k1",
		Proposal: &airlock.Proposal{Mode: airlock.ProposalAdvisory},
	}); err != nil {
		t.Fatal(err)
	}
	closed, err := b.svc.OpenSession(ctx, a, "closed one", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.CloseSession(ctx, a, closed.ID); err != nil {
		t.Fatal(err)
	}
	theirs, err := b.svc.OpenSession(ctx, bb, "B's", nil)
	if err != nil {
		t.Fatal(err)
	}

	list := func(token string) map[string]string {
		t.Helper()
		r := b.do(t, req{method: "GET", path: "/v1/sessions", token: token})
		want(t, r, http.StatusOK, "")
		var body struct{ Items []map[string]any }
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, s := range body.Items {
			out[s["id"].(string)] = s["status"].(string)
		}
		return out
	}
	mine := list(b.agentA)
	if len(mine) != 2 || mine[waiting.ID] != "waiting" || mine[closed.ID] != "closed" {
		t.Fatalf("agent A's sessions = %v, want its waiting and closed ones", mine)
	}
	for _, token := range []string{b.reviewer, b.admin} {
		if all := list(token); len(all) != 3 || all[theirs.ID] != "active" {
			t.Fatalf("all sessions = %v, want 3 with B's active", all)
		}
	}
	want(t, b.do(t, req{method: "GET", path: "/v1/sessions", token: b.revoked}), http.StatusUnauthorized, airlock.CodeUnauthorized)
	r := b.do(t, req{method: "GET", path: "/v1/instances/" + waiting.ID, token: b.agentA})
	want(t, r, http.StatusOK, "")
	if r.obj(t)["pending_count"] != float64(1) {
		t.Fatalf("the session as an instance: %s", r.body)
	}
}

// TestWorkMoveOverREST decides work_move proposals through the decision
// endpoint: approval moves the item; a moved item is 409 command_failed
// and the request stays pending.
func TestWorkMoveOverREST(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rev := b.callers["reviewer"]
	for _, k := range []string{"doing", "done", "review"} {
		if _, err := b.svc.CreateColumn(ctx, rev, k, k); err != nil {
			t.Fatal(err)
		}
	}
	item, err := b.svc.CreateWorkItem(ctx, rev, "Ship it", "doing")
	if err != nil {
		t.Fatal(err)
	}
	tok, secret, err := b.svc.CreateToken(ctx, b.callers["admin"], airlock.NewTokenInput{
		Name: "mover", Role: airlock.RoleAgent, Principal: "erin", Scopes: []string{airlock.ScopeWorkWrite},
	})
	if err != nil {
		t.Fatal(err)
	}
	mover, err := b.svc.Authenticate(ctx, secret)
	if err != nil || mover.ID != tok.ID {
		t.Fatal(err)
	}
	propose := func(key, to string) string {
		t.Helper()
		r, _, err := b.svc.CreateMCPRequest(ctx, mover, provider.MCPRequestInput{
			Kind: airlock.KindWorkChange, Title: "Move to " + to, IdempotencyKey: key,
			Proposal: &airlock.Proposal{Mode: airlock.ProposalCommand, Command: &airlock.Command{
				Method: airlock.MethodWorkMove, Input: json.RawMessage(`{"itemId":"` + item.ID + `","columnKey":"` + to + `"}`)}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	first, second := propose("m1", "done"), propose("m2", "review")

	r := b.do(t, req{method: "GET", path: "/v1/approval-requests/" + first, token: b.reviewer})
	want(t, r, http.StatusOK, "")
	if got := r.obj(t); got["tool"] != "work_move" || got["kind"] != "work_change" {
		t.Fatalf("a command request over REST: %s", r.body)
	}
	// The reviewer sees what the provider observed when it was requested.
	if body := string(r.body); !strings.Contains(body, `"observed":{`) || !strings.Contains(body, `"fromColumnKey":"doing"`) {
		t.Fatalf("a command request shows no observed column: %s", r.body)
	}
	r = b.do(t, req{method: "POST", path: "/v1/approval-requests/" + first + "/decision", token: b.reviewer, body: `{"status":"approved"}`})
	want(t, r, http.StatusOK, "")
	if res, ok := r.obj(t)["command_result"].(map[string]any); !ok || res["status"] != "applied" || res["applied_at"] == nil {
		t.Fatalf("an applied command shows no command_result: %s", r.body)
	}
	got, err := b.svc.WorkItem(ctx, rev, item.ID)
	if err != nil || got.ColumnKey != "done" {
		t.Fatalf("after approval the item is in %s, %v", got.ColumnKey, err)
	}
	r = b.do(t, req{method: "POST", path: "/v1/approval-requests/" + second + "/decision", token: b.reviewer, body: `{"status":"approved"}`})
	want(t, r, http.StatusConflict, airlock.CodeCommandFailed)
	if p := r.obj(t); p["state"] != "pending" || !strings.Contains(p["detail"].(string), "no longer in column doing (now in done)") {
		t.Fatalf("command_failed problem %s", r.body)
	}
	r = b.do(t, req{method: "GET", path: "/v1/approval-requests/" + second, token: b.reviewer})
	if r.obj(t)["state"] != "pending" {
		t.Fatalf("after command_failed: %s", r.body)
	}
}

var columnKeys atomic.Int64

// freshKey returns a column key no test has used.
func (b *bundle) freshKey() string { return fmt.Sprintf("col-%d", columnKeys.Add(1)) }

// boardItem creates, as the reviewer, a fresh column holding one item.
func (b *bundle) boardItem(t testing.TB) (column, itemID string) {
	t.Helper()
	ctx := context.Background()
	col, err := b.svc.CreateColumn(ctx, b.callers["reviewer"], b.freshKey(), "Column")
	if err != nil {
		t.Fatal(err)
	}
	item, err := b.svc.CreateWorkItem(ctx, b.callers["reviewer"], "Item", col.Key)
	if err != nil {
		t.Fatal(err)
	}
	return col.Key, item.ID
}
