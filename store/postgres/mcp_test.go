package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/provider"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/airlockhq/airlock/store/storetest"
)

// agentToken stores owner's agent token, with the work:write scope that
// work_move commands need.
func agentToken(t testing.TB, s store.Store, owner string) {
	t.Helper()
	if err := s.CreateToken(t.Context(), airlock.Token{ID: owner, Name: "agent", Role: airlock.RoleAgent,
		Scopes: []string{airlock.ScopeWorkWrite}, Hash: airlock.HashSecret("secret of " + owner), CreatedBy: "tok_admin"}); err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
}

// openSession opens a session owned by owner.
func openSession(t testing.TB, s store.Store, owner string) airlock.Instance {
	t.Helper()
	in, err := s.CreateInstance(t.Context(), airlock.Instance{OwnerID: owner, Name: "session", Kind: airlock.InstanceSession}, owner)
	if err != nil {
		t.Fatalf("CreateInstance(session): %v", err)
	}
	return in
}

// linked makes params p an advisory MCP request linked to session sess.
func linked(sess airlock.Instance) func(*store.NewRequestParams) {
	return func(p *store.NewRequestParams) {
		r := &p.Request
		r.InstanceID, r.SessionID, r.OwnerID, p.Actor = sess.ID, sess.ID, sess.OwnerID, sess.OwnerID
		r.Kind, r.Tool, r.Arguments, r.Title = airlock.KindAgentRequest, "", nil, "May I?"
		r.Proposal = &airlock.Proposal{Mode: airlock.ProposalAdvisory}
	}
}

// moveOf makes params p a work_move proposal of item to column, observed
// where the item is now, as the provider makes it.
func moveOf(t testing.TB, item airlock.WorkItem, to string) func(*store.NewRequestParams) {
	input := json.RawMessage(`{"itemId":"` + item.ID + `","columnKey":"` + to + `"}`)
	observed, err := json.Marshal(airlock.WorkMoveObserved{FromColumnKey: item.ColumnKey, ItemTitle: item.Title})
	if err != nil {
		t.Fatal(err)
	}
	return func(p *store.NewRequestParams) {
		r := &p.Request
		r.Kind, r.Tool, r.Arguments, r.Title = airlock.KindWorkChange, airlock.MethodWorkMove, input, "Move "+item.Title+" to "+to
		r.Proposal = &airlock.Proposal{Mode: airlock.ProposalCommand, Command: &airlock.Command{
			Method: airlock.MethodWorkMove, Input: input, Observed: observed}}
	}
}

// board gives store s columns keys and one item per column (the first
// column's items first), and returns the items.
func board(t testing.TB, s store.Store, keys ...string) []airlock.WorkItem {
	t.Helper()
	bs := store.Board(s)
	var items []airlock.WorkItem
	for _, k := range keys {
		if _, err := bs.CreateColumn(t.Context(), airlock.Column{Key: k, Name: strings.ToUpper(k)}, "tok_r"); err != nil {
			t.Fatalf("CreateColumn: %v", err)
		}
	}
	for _, k := range keys {
		w, err := bs.CreateWorkItem(t.Context(), airlock.WorkItem{Title: "item in " + k, ColumnKey: k}, "tok_r")
		if err != nil {
			t.Fatalf("CreateWorkItem: %v", err)
		}
		items = append(items, w)
	}
	return items
}

func approve(s store.Store, ctx context.Context, id string) (airlock.Request, error) {
	return s.Decide(ctx, store.DecideParams{ID: id, Status: airlock.StateApproved, Validity: time.Minute, Actor: "tok_r"})
}

// startedOrDone waits until started is closed, or until every goroutine
// of wg has returned without closing it (they failed the test): it reports
// whether started was closed, so a failing worker cannot hang the test.
func startedOrDone(started chan struct{}, wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-started:
		return true
	case <-done:
		select {
		case <-started:
			return true
		default:
			return false
		}
	}
}

// TestWorkMoveJudgedAfterItsLocks holds, from another session, a row an
// approval of a work_move must lock (the item, as a concurrent move would;
// the agent's token, as a revocation would) until the request's deadline
// has passed: the approval, judged by the database's clock after it got
// the lock, is refused deadline_passed and moves nothing.
func TestWorkMoveJudgedAfterItsLocks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, lock string
	}{
		{"item", `SELECT 1 FROM work_items WHERE id = $1 FOR UPDATE`},
		{"token", `SELECT 1 FROM tokens WHERE id = 'tok_a' AND $1 <> '' FOR UPDATE`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, schema := openFresh(t)
			agentToken(t, s, "tok_a")
			in := instance(t, s, "tok_a")
			item := board(t, s, "todo", "done")[0]
			r, _, err := s.CreateRequest(t.Context(), params(in, moveOf(t, item, "done"),
				func(p *store.NewRequestParams) { p.Window = 300 * time.Millisecond }))
			if err != nil {
				t.Fatal(err)
			}
			judgedAfterLock(t, schema, tc.lock, item.ID, r.DeadlineAt, "approval", func() error {
				_, err := approve(s, t.Context(), r.ID)
				return err
			})
			if got, err := s.GetWorkItem(t.Context(), item.ID); err != nil || got.Version != 1 || got.ColumnKey != "todo" {
				t.Fatalf("item after a refused approval = %s, %v; want unchanged", show(got), err)
			}
		})
	}
}

// TestCommandFailuresAreNotRetried checks that neither command_failed nor
// an injected fault is retried as a transient failure, even when the fault
// wraps a lost connection: the hook sees each point once per approval.
func TestCommandFailuresAreNotRetried(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		points []string
		fail   error
	)
	hook := func(point string) error {
		mu.Lock()
		defer mu.Unlock()
		points = append(points, point)
		if point == postgres.FaultAfterEffect {
			return fail
		}
		return nil
	}
	s := open(t, testkit.SchemaName(t, "t_"), postgres.WithFaultHook(hook))
	agentToken(t, s, "tok_a")
	in := instance(t, s, "tok_a")
	items := board(t, s, "todo", "done")
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := points
		points = nil
		return out
	}

	fail = fmt.Errorf("connection dropped: %w", io.ErrUnexpectedEOF)
	r, _, err := s.CreateRequest(t.Context(), params(in, moveOf(t, items[0], "done")))
	if err != nil {
		t.Fatal(err)
	}
	_, err = approve(s, t.Context(), r.ID)
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "fault injected at "+postgres.FaultAfterEffect) {
		t.Fatalf("approval with a fault = %v, want the injected fault", err)
	}
	if got := seen(); !slices.Equal(got, []string{postgres.FaultAfterApproval, postgres.FaultAfterEffect}) {
		t.Fatalf("fault points seen %v, want each once: a fault is not retried", got)
	}

	fail = nil
	moved := "done"
	if _, err := s.UpdateWorkItem(t.Context(), airlock.WorkItemPatch{ID: items[0].ID, ColumnKey: &moved}, "tok_r"); err != nil {
		t.Fatal(err)
	}
	_, err = approve(s, t.Context(), r.ID)
	if airlock.ErrorCode(err) != airlock.CodeCommandFailed {
		t.Fatalf("approval of a moved item = %v, want command_failed", err)
	}
	if got := seen(); !slices.Equal(got, []string{postgres.FaultAfterApproval}) {
		t.Fatalf("fault points seen %v, want after_approval once: command_failed is not retried", got)
	}
}

// TestSchemaGuardsMCP checks that the schema itself refuses what the
// queries never do: changing a delivered instruction, rewriting a
// command's result, a second live default MCP instance.
func TestSchemaGuardsMCP(t *testing.T) {
	t.Parallel()
	s, schema := openFresh(t)
	agentToken(t, s, "tok_a")
	sess := openSession(t, s, "tok_a")
	item := board(t, s, "todo", "done")[0]
	r, _, err := s.CreateRequest(t.Context(), params(sess, linked(sess), moveOf(t, item, "done")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := approve(s, t.Context(), r.ID); err != nil {
		t.Fatal(err)
	}
	if _, ists, err := s.Heartbeat(t.Context(), sess.ID); err != nil || len(ists) != 1 {
		t.Fatalf("Heartbeat = %d instructions, %v; want 1", len(ists), err)
	}
	def, err := s.MCPInstance(t.Context(), "tok_a", "tok_a")
	if err != nil {
		t.Fatal(err)
	}
	c := conn(t, schema)
	for _, q := range []string{
		`UPDATE instructions SET delivered_at = NULL`,
		`UPDATE instructions SET note = 'rewritten'`,
		`UPDATE requests SET command_detail = 'rewritten' WHERE id = '` + r.ID + `'`,
		`UPDATE requests SET command_status = NULL, command_applied_at = NULL WHERE id = '` + r.ID + `'`,
		`INSERT INTO instances (id, owner_id, name, created_at, mcp_default) VALUES ('ins_second', 'tok_a', 'mcp', now(), true)`,
		`UPDATE instances SET kind = 'session' WHERE id = '` + def.ID + `'`,
	} {
		if _, err := c.Exec(t.Context(), q); err == nil {
			t.Errorf("%s succeeded, want the schema to refuse it", q)
		}
	}
}

// TestAgreesWithSQLiteMCP runs one script of sessions, instructions, the
// board and commands through both drivers on the same fake clock, and
// requires the same answers, value for value, errors' messages included.
func TestAgreesWithSQLiteMCP(t *testing.T) {
	t.Parallel()
	agree(t, agreeMCPScript)
}

// agreeMCPScript runs the MCP edge cases on s and returns what it saw,
// with the values each driver numbers or draws its own way (Seq, event
// and instruction IDs, the default instance's ID) zeroed.
func agreeMCPScript(t *testing.T, s store.Store, clock *storetest.FakeClock) []observation {
	ctx := t.Context()
	ss, bs := store.Sessions(s), store.Board(s)
	var obs []observation
	see := func(what string, v any, err error) {
		if err != nil {
			e, ok := errors.AsType[*airlock.Error](err)
			if !ok {
				t.Fatalf("%s: %v", what, err)
			}
			obs = append(obs, observation{what, *e})
			return
		}
		switch x := v.(type) {
		case airlock.Request:
			x.Seq = 0
			v = x
		case []airlock.Event:
			for i := range x {
				x[i].ID, x[i].UID = 0, "" // each store numbers and draws its own
				if x[i].Type == airlock.EventInstructionDelivered || strings.HasPrefix(x[i].InstanceID, "ins_") {
					x[i].Subject, x[i].InstanceID = "", ""
				}
			}
		}
		obs = append(obs, observation{what, v})
	}
	noIDs := func(ists []airlock.Instruction) []airlock.Instruction {
		for i := range ists {
			ists[i].ID = ""
		}
		return ists
	}
	agentToken(t, s, "tok_a")
	sess, err := s.CreateInstance(ctx, airlock.Instance{ID: "ses_one", OwnerID: "tok_a", Name: "säsSion ✓", Kind: airlock.InstanceSession,
		Metadata: json.RawMessage(`{"client" : "x"}`)}, "tok_a")
	see("open session", sess, err)
	_, err = s.CreateInstance(ctx, airlock.Instance{ID: "ses_bad", OwnerID: "tok_a", Kind: "robot"}, "tok_a")
	see("bad kind", nil, err)
	got, err := ss.GetSession(ctx, sess.ID)
	see("get session", got, err)

	for _, k := range []string{"todo", "doing", "done"} {
		c, err := bs.CreateColumn(ctx, airlock.Column{Key: k, Name: "Column " + k + " ✓"}, "tok_r")
		see("column "+k, c, err)
	}
	_, err = bs.CreateColumn(ctx, airlock.Column{Key: "todo", Name: "again"}, "tok_r")
	see("column taken", nil, err)
	clock.Advance(1500 * time.Nanosecond)
	w1, err := bs.CreateWorkItem(ctx, airlock.WorkItem{ID: "wi_one", Title: "Ship «it» 🚀", ColumnKey: "doing"}, "tok_r")
	see("item one", w1, err)
	w2, err := bs.CreateWorkItem(ctx, airlock.WorkItem{ID: "wi_two", Title: "Plan", ColumnKey: "todo"}, "tok_r")
	see("item two", w2, err)
	_, err = bs.CreateWorkItem(ctx, airlock.WorkItem{ID: "wi_nowhere", Title: "x", ColumnKey: "missing"}, "tok_r")
	see("item in no column", nil, err)
	title := "Plan the launch"
	w2, err = bs.UpdateWorkItem(ctx, airlock.WorkItemPatch{ID: w2.ID, Title: &title, IfVersion: 1}, "tok_r")
	see("rename", w2, err)
	_, err = bs.UpdateWorkItem(ctx, airlock.WorkItemPatch{ID: w2.ID, Title: &title, IfVersion: 1}, "tok_r")
	see("stale version", nil, err)
	missing := "missing"
	_, err = bs.UpdateWorkItem(ctx, airlock.WorkItemPatch{ID: w2.ID, ColumnKey: &missing}, "tok_r")
	see("to a missing column", nil, err)
	_, err = bs.UpdateWorkItem(ctx, airlock.WorkItemPatch{ID: "wi_missing", Title: &title}, "tok_r")
	see("missing item", nil, err)
	brd, err := bs.Board(ctx)
	see("board", brd, err)

	mk := func(id string, mods ...func(*store.NewRequestParams)) store.NewRequestParams {
		p := store.NewRequestParams{Request: airlock.Request{ID: id, IdempotencyKey: "key_" + id, Fingerprint: "fp_" + id,
			Timeout: "PT10M"}, Window: 10 * time.Minute}
		linked(sess)(&p)
		for _, m := range mods {
			m(&p)
		}
		return p
	}
	create := func(what string, p store.NewRequestParams) airlock.Request {
		r, _, err := s.CreateRequest(ctx, p)
		see(what, r, err)
		return r
	}
	question := create("question", mk("apr_q", func(p *store.NewRequestParams) {
		p.Request.Question = &airlock.Question{Choices: []string{"blue 🔵", "grün"}}
	}))
	denied := create("to deny", mk("apr_deny"))
	short := create("short", mk("apr_short", func(p *store.NewRequestParams) { p.Window = time.Minute }))
	move := create("move", mk("apr_move", moveOf(t, w1, "done")))
	stale := create("stale move", mk("apr_stale", moveOf(t, w1, "todo")))
	create("policy on a command", mk("apr_policy", moveOf(t, w1, "todo"), func(p *store.NewRequestParams) {
		p.Initial = &airlock.InitialDecision{Status: airlock.StateApproved, Validity: time.Minute}
	}))
	pending := create("stays pending", mk("apr_pending"))

	clock.Advance(time.Second + time.Nanosecond)
	r, err := s.Decide(ctx, store.DecideParams{ID: question.ID, Status: airlock.StateApproved, Note: "ok — 承認", Answer: "grün",
		Validity: time.Minute, Actor: "tok_r"})
	see("answer", r, err)
	r, err = s.Decide(ctx, store.DecideParams{ID: denied.ID, Status: airlock.StateDenied, Note: "no\nreason", Actor: "tok_r"})
	see("deny", r, err)
	r, err = approve(s, ctx, move.ID)
	see("approve move", r, err)
	_, err = approve(s, ctx, stale.ID)
	see("approve stale move", nil, err)
	r, err = s.GetRequest(ctx, stale.ID)
	see("stale move after", r, err)
	w, err := bs.GetWorkItem(ctx, w1.ID)
	see("moved item", w, err)

	in, ists, err := ss.Heartbeat(ctx, sess.ID)
	see("heartbeat", []any{in, noIDs(ists)}, err)
	clock.Set(short.DeadlineAt)
	rs, err := s.ExpireDue(ctx, 10)
	see("sweep", rs, err)
	clock.Advance(time.Minute)
	in, ists, err = ss.Heartbeat(ctx, sess.ID)
	see("second heartbeat", []any{in, noIDs(ists)}, err)
	in, ists, err = ss.Heartbeat(ctx, sess.ID)
	see("third heartbeat", []any{in, noIDs(ists)}, err)
	_, _, err = ss.Heartbeat(ctx, "ses_missing")
	see("heartbeat of no session", nil, err)

	cancelled, err := ss.CloseSession(ctx, sess.ID, "tok_a")
	see("close", cancelled, err)
	cancelled, err = ss.CloseSession(ctx, sess.ID, "tok_a")
	see("close again", cancelled, err)
	_, _, err = ss.Heartbeat(ctx, sess.ID)
	see("heartbeat of a closed session", nil, err)
	r, err = s.GetRequest(ctx, pending.ID)
	see("cancelled by the close", r, err)
	list, err := ss.ListSessions(ctx, "tok_a")
	see("list sessions", list, err)

	def, err := ss.MCPInstance(ctx, "tok_a", "tok_a")
	def.ID = ""
	see("default instance", def, err)
	r, err = ss.RequestByKey(ctx, "tok_a", "key_apr_move")
	see("request by key", r, err)
	_, err = ss.RequestByKey(ctx, "tok_b", "key_apr_move")
	see("another agent's key", nil, err)

	evs, err := s.ListEvents(ctx, 0, 1000)
	see("events", evs, err)
	return obs
}

// TestCloseSessionWhileApproving is T13 for a session across replicas: a
// session holding 200 pending linked requests is closed while reviewers
// approve them from two stores. Each ends approved before the close (with
// exactly one instruction) or cancelled by it (with none).
func TestCloseSessionWhileApproving(t *testing.T) {
	t.Parallel()
	schema := testkit.SchemaName(t, "t_")
	a, b := open(t, schema), open(t, schema)
	sess := openSession(t, a, "tok_a")
	const n = 200
	rs := seed(t, a, sess, n, linked(sess))
	var (
		approvals atomic.Int64
		started   = make(chan struct{})
		wg        sync.WaitGroup
	)
	for w := range 4 {
		s := []*postgres.Store{a, b}[w%2]
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				_, err := approve(s, t.Context(), rs[i].ID)
				switch {
				case err == nil:
					if approvals.Add(1) == 20 {
						close(started)
					}
				case code(err) != "not_pending/cancelled":
					t.Errorf("approve: %v, want success or not_pending/cancelled", err)
				}
			}
		})
	}
	if !startedOrDone(started, &wg) {
		t.FailNow()
	}
	cancelled, err := b.CloseSession(t.Context(), sess.ID, "tok_a")
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	closed, err := a.GetSession(t.Context(), sess.ID)
	if err != nil || closed.ClosedAt == nil {
		t.Fatalf("GetSession = %s, %v", show(closed), err)
	}
	instructed := map[string]int{}
	rows, err := conn(t, schema).Query(t.Context(), `SELECT request_id FROM instructions WHERE session_id = $1`, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		instructed[id]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	approved := 0
	for _, r := range rs {
		got, err := a.GetRequest(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch got.State {
		case airlock.StateApproved:
			approved++
			if instructed[r.ID] != 1 || !got.Decision.DecidedAt.Before(*closed.ClosedAt) {
				t.Fatalf("%s approved at %v (close at %v) with %d instructions, want one, before the close",
					r.ID, got.Decision.DecidedAt, *closed.ClosedAt, instructed[r.ID])
			}
		case airlock.StateCancelled:
			if instructed[r.ID] != 0 || !slices.Contains(cancelled, r.ID) {
				t.Fatalf("%s cancelled (listed by the close: %v) with %d instructions, want listed and none",
					r.ID, slices.Contains(cancelled, r.ID), instructed[r.ID])
			}
		default:
			t.Fatalf("%s ended %s, want approved or cancelled", r.ID, got.State)
		}
	}
	if approved+len(cancelled) != n || len(cancelled) == 0 {
		t.Fatalf("%d approved + %d cancelled, want %d with some of each", approved, len(cancelled), n)
	}
	t.Logf("%d approved before the close, %d cancelled by it", approved, len(cancelled))
}

// TestMCPThroughProviderReplicas drives the MCP features through two
// provider replicas on one schema, as `airlock serve` uses them: an agent
// opens a session and proposes a work_move on replica A, a reviewer
// approves it on replica B, the item moves, and the session's next
// heartbeat on A delivers the decision once.
func TestMCPThroughProviderReplicas(t *testing.T) {
	t.Parallel()
	schema := testkit.SchemaName(t, "t_")
	var services []*provider.Service
	for range 2 {
		svc, err := provider.New(provider.Config{Store: open(t, schema), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		services = append(services, svc)
	}
	a, b := services[0], services[1]
	ctx := t.Context()
	agent := airlock.Token{ID: "tok_agent", Name: "agent", Role: airlock.RoleAgent, Principal: "bot", Scopes: []string{airlock.ScopeWorkWrite},
		Hash: airlock.HashSecret("agent secret"), CreatedBy: "tok_admin"}
	reviewer := airlock.Token{ID: "tok_reviewer", Role: airlock.RoleReviewer, Principal: "ada"}
	if err := open(t, schema).CreateToken(ctx, agent); err != nil {
		t.Fatal(err)
	}
	asAgent, asReviewer := airlock.Caller{Token: agent}, airlock.Caller{Token: reviewer}
	for _, k := range []string{"todo", "done"} {
		if _, err := b.CreateColumn(ctx, asReviewer, k, strings.ToUpper(k)); err != nil {
			t.Fatal(err)
		}
	}
	item, err := b.CreateWorkItem(ctx, asReviewer, "Ship it", "todo")
	if err != nil {
		t.Fatal(err)
	}

	sess, err := a.OpenSession(ctx, asAgent, "coding session", nil)
	if err != nil {
		t.Fatal(err)
	}
	in := provider.MCPRequestInput{Kind: airlock.KindWorkChange, Title: "Ship it", SessionID: sess.ID, IdempotencyKey: "move-1",
		Proposal: &airlock.Proposal{Mode: airlock.ProposalCommand, Command: &airlock.Command{Method: airlock.MethodWorkMove,
			Input: json.RawMessage(`{"itemId":"` + item.ID + `","columnKey":"done"}`)}}}
	r, created, err := a.CreateMCPRequest(ctx, asAgent, in)
	if err != nil || !created || r.State != airlock.StatePending || !strings.Contains(string(r.Proposal.Command.Observed), `"fromColumnKey":"todo"`) {
		t.Fatalf("CreateMCPRequest = %s, %v, %v; want a new pending request observing the item in todo", show(r), created, err)
	}
	again, created, err := b.CreateMCPRequest(ctx, asAgent, in)
	if err != nil || created || again.ID != r.ID {
		t.Fatalf("replay on B = %s, created %v, %v; want the original", again.ID, created, err)
	}
	q, _, err := a.CreateMCPRequest(ctx, asAgent, provider.MCPRequestInput{Kind: airlock.KindAgentRequest, Title: "Colour?",
		IdempotencyKey: "q-1", Proposal: &airlock.Proposal{Mode: airlock.ProposalAdvisory}, Question: &airlock.Question{}})
	if err != nil || q.InstanceID == sess.ID {
		t.Fatalf("request without a session = %s, %v; want it on the agent's default instance", show(q), err)
	}

	approved, err := b.Decide(ctx, asReviewer, r.ID, airlock.DecisionInput{Status: airlock.StateApproved, Note: "go"})
	if err != nil || approved.CommandResult == nil || approved.CommandResult.Status != airlock.CommandApplied {
		t.Fatalf("approval on B = %s, %v; want the command applied", show(approved), err)
	}
	if w, err := a.WorkItem(ctx, asAgent, item.ID); err != nil || w.ColumnKey != "done" || w.Version != 2 {
		t.Fatalf("item after the approval = %s, %v; want in done at version 2", show(w), err)
	}
	_, ists, err := a.Heartbeat(ctx, asAgent, sess.ID)
	if err != nil || len(ists) != 1 || ists[0].RequestID != r.ID || ists[0].Status != airlock.StateApproved || ists[0].Note != "go" {
		t.Fatalf("heartbeat on A = %s, %v; want the approval's instruction", show(ists), err)
	}
	if _, ists, err := b.Heartbeat(ctx, asAgent, sess.ID); err != nil || len(ists) != 0 {
		t.Fatalf("second heartbeat on B = %s, %v; want nothing more", show(ists), err)
	}
	if n, err := b.CloseSession(ctx, asAgent, sess.ID); err != nil || n != 0 {
		t.Fatalf("CloseSession = %d, %v", n, err)
	}
}
