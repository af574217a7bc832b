package postgres_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/logtest"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/internal/testkit/callers"
	"github.com/airlockhq/airlock/provider"
)

// TestRememberedTokenRevokedElsewhere: a replica remembers the tokens it
// has looked up (provider.AuthenticateDeferred), and a caller taken from
// memory carries the check that its token is still live
// (airlock.Caller.Check), which the call's store makes with its first
// statement. After the tokens are revoked on another replica, every call
// of theirs through the provider, each write and each read, fails as
// unauthorized with its check made and failed, and changes nothing; a
// call that reached no statement fails at FinishTokenCheck. A live
// remembered token goes on working.
func TestRememberedTokenRevokedElsewhere(t *testing.T) {
	t.Parallel()
	schema := testkit.SchemaName(t, "t_")
	var rec logtest.Recorder
	a, err := provider.New(provider.Config{Store: open(t, schema), Logger: rec.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rec.Containing("store extras"), []string{"store extras token_stamp=false token_check=true change_feed=true event_watch=false"}; !slices.Equal(got, want) {
		t.Errorf("the provider logged %q, want %q", got, want)
	}
	store := open(t, schema)
	b, err := provider.New(provider.Config{Store: store, Logger: rec.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	admin := callers.Admin(t, a, "admin secret for the remembered-token test")
	secrets := map[string]string{}
	mint := func(name string, role airlock.Role, scopes ...string) airlock.Caller {
		t.Helper()
		tok, secret, err := a.CreateToken(ctx, admin, airlock.NewTokenInput{Name: name, Role: role, Principal: name, Scopes: scopes})
		if err != nil {
			t.Fatal(err)
		}
		secrets[tok.ID] = secret
		c, err := a.AuthenticateDeferred(ctx, secret)
		if err != nil || c.Check != nil {
			t.Fatalf("the first call of %s: %+v, %v; want the token looked up, no check to make", name, c.Check, err)
		}
		return c
	}
	agent := mint("agent", airlock.RoleAgent, airlock.ScopeWorkWrite)
	rev := mint("reviewer", airlock.RoleReviewer)
	adm := mint("second admin", airlock.RoleAdmin)
	live := mint("live reviewer", airlock.RoleReviewer)

	// What the revoked tokens' calls would change.
	inst, err := a.RegisterInstance(ctx, agent, airlock.InstanceInput{Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	create := func(key string) airlock.Request {
		t.Helper()
		r, _, err := a.CreateRequest(ctx, agent, inst.ID, key, airlock.CreateRequestInput{Tool: "pay", Arguments: json.RawMessage(`{"n":1}`), Timeout: "10m"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	pending, approved, claimed := create("pending"), create("approved"), create("claimed")
	for _, r := range []airlock.Request{approved, claimed} {
		if _, err := a.Decide(ctx, rev, r.ID, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Claim(ctx, agent, claimed.ID); err != nil {
		t.Fatal(err)
	}
	sess, err := a.OpenSession(ctx, agent, "session", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateColumn(ctx, rev, "todo", "To do"); err != nil {
		t.Fatal(err)
	}
	item, err := a.CreateWorkItem(ctx, rev, "an item", "todo")
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []airlock.Caller{agent, rev, adm} {
		if _, err := b.RevokeToken(ctx, admin, c.ID); err != nil {
			t.Fatal(err)
		}
	}
	before, err := store.ListEvents(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}

	// remembered is the caller a's next call of tok gets: from memory,
	// with its check pending.
	remembered := func(c airlock.Caller) airlock.Caller {
		t.Helper()
		got, err := a.AuthenticateDeferred(ctx, secrets[c.ID])
		if err != nil || got.Check == nil || !got.Check.Pending() {
			t.Fatalf("a's next call of %s: %+v, %v; want it taken from memory, its check pending", c.Name, got.Check, err)
		}
		return got
	}
	title, done := "renamed", "done"
	calls := []struct {
		what string
		as   airlock.Caller
		call func(c airlock.Caller) error
	}{
		{"register an instance", agent, func(c airlock.Caller) error {
			_, err := a.RegisterInstance(ctx, c, airlock.InstanceInput{Name: "another"})
			return err
		}},
		{"delete an instance", agent, func(c airlock.Caller) error { _, err := a.DeleteInstance(ctx, c, inst.ID); return err }},
		{"create a request", agent, func(c airlock.Caller) error {
			_, _, err := a.CreateRequest(ctx, c, inst.ID, "after", airlock.CreateRequestInput{Tool: "pay", Arguments: json.RawMessage(`{"n":2}`)})
			return err
		}},
		{"replay a request", agent, func(c airlock.Caller) error {
			_, _, err := a.CreateRequest(ctx, c, inst.ID, "pending", airlock.CreateRequestInput{Tool: "pay", Arguments: json.RawMessage(`{"n":1}`), Timeout: "10m"})
			return err
		}},
		{"cancel", agent, func(c airlock.Caller) error { _, err := a.Cancel(ctx, c, pending.ID); return err }},
		{"claim", agent, func(c airlock.Caller) error { _, err := a.Claim(ctx, c, approved.ID); return err }},
		{"report", agent, func(c airlock.Caller) error {
			_, err := a.Report(ctx, c, claimed.ID, airlock.ReportInput{Status: airlock.ExecSucceeded})
			return err
		}},
		{"open a session", agent, func(c airlock.Caller) error { _, err := a.OpenSession(ctx, c, "another", nil); return err }},
		{"heartbeat", agent, func(c airlock.Caller) error { _, _, err := a.Heartbeat(ctx, c, sess.ID); return err }},
		{"close a session", agent, func(c airlock.Caller) error { _, err := a.CloseSession(ctx, c, sess.ID); return err }},
		{"create an MCP request", agent, func(c airlock.Caller) error {
			_, _, err := a.CreateMCPRequest(ctx, c, provider.MCPRequestInput{Kind: airlock.KindMemoryChange, Title: "remember",
				IdempotencyKey: "mcp-after", Proposal: &airlock.Proposal{Mode: airlock.ProposalAdvisory}})
			return err
		}},
		{"approve", rev, func(c airlock.Caller) error {
			_, err := a.Decide(ctx, c, pending.ID, airlock.DecisionInput{Status: airlock.StateApproved})
			return err
		}},
		{"create a column", rev, func(c airlock.Caller) error { _, err := a.CreateColumn(ctx, c, "done", "Done"); return err }},
		{"create a work item", rev, func(c airlock.Caller) error { _, err := a.CreateWorkItem(ctx, c, "another", "todo"); return err }},
		{"update a work item", rev, func(c airlock.Caller) error {
			_, err := a.UpdateWorkItem(ctx, c, airlock.WorkItemPatch{ID: item.ID, Title: &title, ColumnKey: &done})
			return err
		}},
		{"mint a token", adm, func(c airlock.Caller) error {
			_, _, err := a.CreateToken(ctx, c, airlock.NewTokenInput{Name: "minted", Role: airlock.RoleAgent})
			return err
		}},
		{"revoke a token", adm, func(c airlock.Caller) error { _, err := a.RevokeToken(ctx, c, live.ID); return err }},
		{"read a request", agent, func(c airlock.Caller) error { _, err := a.Request(ctx, c, pending.ID, 0); return err }},
		{"list requests", rev, func(c airlock.Caller) error { _, err := a.ListRequests(ctx, c, provider.ListQuery{}); return err }},
		{"read the events", rev, func(c airlock.Caller) error { _, err := a.Events(ctx, c, 0, 10); return err }},
		{"read the board", rev, func(c airlock.Caller) error { _, err := a.Board(ctx, c); return err }},
		{"list sessions", agent, func(c airlock.Caller) error { _, err := a.Sessions(ctx, c); return err }},
		{"list tokens", adm, func(c airlock.Caller) error { _, err := a.Tokens(ctx, c); return err }},
	}
	for _, tc := range calls {
		c := remembered(tc.as)
		err := tc.call(c)
		made, passed := c.Check.Outcome()
		if airlock.ErrorCode(err) != airlock.CodeUnauthorized || !made || passed {
			t.Errorf("%s by a token revoked on another replica: %v, check made %v passed %v; want unauthorized, the check failed",
				tc.what, err, made, passed)
		}
	}
	// A call that reaches no statement (its input is refused first) has
	// its check made at the end, before it may answer.
	c := remembered(agent)
	_, _, err = a.CreateRequest(ctx, c, inst.ID, "invalid", airlock.CreateRequestInput{Tool: ""})
	if airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
		t.Fatalf("an invalid create = %v, want invalid_request before any statement", err)
	}
	if ferr := a.FinishTokenCheck(ctx, c); airlock.ErrorCode(ferr) != airlock.CodeUnauthorized {
		t.Errorf("FinishTokenCheck after a call that made no statement = %v, want unauthorized", ferr)
	}

	after, err := store.ListEvents(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("%d events after the refused calls, want %d: they changed something (%+v)", len(after), len(before), after[len(before):])
	}
	for _, want := range []struct {
		id      string
		state   airlock.State
		execute airlock.ExecutionStatus
	}{{pending.ID, airlock.StatePending, ""}, {approved.ID, airlock.StateApproved, ""}, {claimed.ID, airlock.StateApproved, airlock.ExecClaimed}} {
		got, err := store.GetRequest(ctx, want.id)
		if err != nil {
			t.Fatal(err)
		}
		var execute airlock.ExecutionStatus
		if got.Execution != nil {
			execute = got.Execution.Status
		}
		if got.State != want.state || execute != want.execute {
			t.Errorf("request %s after the refused calls: %s, execution %q; want %s, %q", want.id, got.State, execute, want.state, want.execute)
		}
	}

	// A live token taken from memory is unaffected.
	c = remembered(live)
	if _, err := a.Request(ctx, c, pending.ID, 0); err != nil {
		t.Errorf("a live remembered token's read: %v", err)
	}
	if made, passed := c.Check.Outcome(); !made || !passed {
		t.Errorf("a live remembered token's check: made %v passed %v, want passed", made, passed)
	}
	if err := a.FinishTokenCheck(ctx, c); err != nil {
		t.Errorf("FinishTokenCheck of a live token = %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c = remembered(live)
	if err := a.FinishTokenCheck(ctx, c); err != nil {
		t.Errorf("FinishTokenCheck of a live token that made no call = %v", err)
	}
}
