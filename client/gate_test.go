package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testkit"
)

// gate returns a Gate of the bundle's agent with its own journal.
func (b *bundle) gate(t testing.TB, c *client.Client, mod ...func(*client.GateConfig)) *client.Gate {
	t.Helper()
	if c == nil {
		c = b.agent
	}
	cfg := client.GateConfig{Client: c, InstanceID: b.instance, JournalDir: t.TempDir(), Timeout: "10m", PollWait: time.Second}
	for _, m := range mod {
		m(&cfg)
	}
	g, err := client.NewGate(cfg)
	if err != nil {
		t.Fatalf("NewGate: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// decideOnPending returns an OnPending that decides the request once, as
// the reviewer, the first time the gate reports it pending.
func (b *bundle) decideOnPending(t testing.TB, in client.DecisionInput) func(*client.ApprovalRequest) {
	var once sync.Once
	return func(r *client.ApprovalRequest) {
		once.Do(func() {
			if _, err := b.reviewer.Decide(context.Background(), r.ID, in); err != nil {
				t.Errorf("decide %s: %v", r.ID, err)
			}
		})
	}
}

var approve = client.DecisionInput{Status: airlock.StateApproved}

// counter is a tool that counts its runs.
type counter struct{ n atomic.Int64 }

func (c *counter) run(context.Context) error { c.n.Add(1); return nil }

func TestGateApprovedRunsOnceAndReports(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.gate(t, nil)
	ctx := context.Background()
	var tool counter
	args := `{"payment_id": "p_1", "amount": 4900}`
	call := client.Call{Tool: "issue_refund", Arguments: []byte(args), AttemptKey: "call-1",
		AgentReasoning: "charged twice", Context: []byte(`{"ticket":7}`), OnPending: b.decideOnPending(t, approve)}
	out, err := g.Run(ctx, call, tool.run)
	if err != nil || tool.n.Load() != 1 {
		t.Fatalf("run: %v, tool ran %d times", err, tool.n.Load())
	}
	if out.Status != airlock.ExecSucceeded || out.ReportErr != nil {
		t.Fatalf("outcome %+v", out)
	}
	r, err := b.agent.GetRequest(ctx, out.Request.ID)
	if err != nil || r.Execution == nil || r.Execution.Status != airlock.ExecSucceeded {
		t.Fatalf("server's execution: %+v %v", r.Execution, err)
	}
	if r.Tool != "issue_refund" || string(r.Arguments) != args || r.AgentReasoning != "charged twice" {
		t.Fatalf("the request is not exactly the call: %+v", r)
	}
	// The same approval again (same call, same attempt): not run again.
	call.OnPending = nil
	_, err = g.Run(ctx, call, tool.run)
	var already *client.AlreadyExecutedError
	if !errors.As(err, &already) || !already.Here || already.Status != airlock.ExecSucceeded || tool.n.Load() != 1 {
		t.Fatalf("second run: %v (tool ran %d times)", err, tool.n.Load())
	}
	// A fresh gate (another journal, as another process) finds the claim taken.
	_, err = b.gate(t, nil).Run(ctx, call, tool.run)
	if !errors.As(err, &already) || already.Here || already.Status != airlock.ExecSucceeded || tool.n.Load() != 1 {
		t.Fatalf("run from another gate: %v (tool ran %d times)", err, tool.n.Load())
	}
}

func TestGateOutcomesWithoutRunning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	g := b.gate(t, nil)
	var tool counter

	t.Run("denied carries the note", func(t *testing.T) {
		_, err := g.Run(ctx, client.Call{Tool: "delete_repo", Arguments: []byte(`{"repo":"x"}`),
			OnPending: b.decideOnPending(t, client.DecisionInput{Status: airlock.StateDenied, Note: "use the archive instead"})}, tool.run)
		var de *client.DeniedError
		if !errors.As(err, &de) || de.Note() != "use the archive instead" || !strings.Contains(err.Error(), "use the archive instead") {
			t.Fatalf("got %v, want a DeniedError with the note", err)
		}
	})
	t.Run("nobody decided: expired", func(t *testing.T) {
		_, err := g.Run(ctx, client.Call{Tool: "delete_repo", Arguments: []byte(`{"repo":"y"}`), Timeout: "100ms"}, tool.run)
		var ee *client.ExpiredError
		if !errors.As(err, &ee) || ee.Request.State != airlock.StateExpired || !strings.Contains(err.Error(), "nobody decided") {
			t.Fatalf("got %v, want an ExpiredError", err)
		}
	})
	t.Run("instance deleted while waiting: cancelled", func(t *testing.T) {
		in, err := b.agent.RegisterInstance(ctx, "doomed", nil)
		if err != nil {
			t.Fatal(err)
		}
		g2 := b.gate(t, nil, func(c *client.GateConfig) { c.InstanceID = in.ID })
		var once sync.Once
		_, err = g2.Run(ctx, client.Call{Tool: "delete_repo", Arguments: []byte(`{"repo":"z"}`), OnPending: func(*client.ApprovalRequest) {
			once.Do(func() {
				if _, err := b.agent.DeleteInstance(ctx, in.ID); err != nil {
					t.Error(err)
				}
			})
		}}, tool.run)
		var ce *client.CancelledError
		if !errors.As(err, &ce) || ce.Abandoned || ce.Request.State != airlock.StateCancelled {
			t.Fatalf("got %v, want a CancelledError (not abandoned)", err)
		}
	})
	t.Run("caller gives up: the gate withdraws the request", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		var id string
		_, err := g.Run(cctx, client.Call{Tool: "delete_repo", Arguments: []byte(`{"repo":"w"}`), OnPending: func(r *client.ApprovalRequest) {
			id = r.ID
			cancel()
		}}, tool.run)
		var ce *client.CancelledError
		if !errors.As(err, &ce) || !ce.Abandoned || !errors.Is(err, context.Canceled) || ce.CancelErr != nil {
			t.Fatalf("got %v, want an abandoned CancelledError", err)
		}
		if r, err := b.agent.GetRequest(ctx, id); err != nil || r.State != airlock.StateCancelled {
			t.Fatalf("request after giving up: %+v %v, want cancelled", r, err)
		}
	})
	t.Run("caller gives up while the create is answered: the gate withdraws the request", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		lost := &cancelAfterCreate{next: b.hc.Transport, cancel: cancel}
		agent, err := client.New(b.url, b.agentSecret, client.WithHTTPClient(&http.Client{Transport: lost}))
		if err != nil {
			t.Fatal(err)
		}
		ga := b.gate(t, agent)
		_, err = ga.Run(cctx, client.Call{Tool: "delete_repo", Arguments: []byte(`{"repo":"s"}`)}, tool.run)
		var ce *client.CancelledError
		if !errors.As(err, &ce) || !ce.Abandoned || !errors.Is(err, context.Canceled) || ce.CancelErr != nil || ce.Request.ID == "" {
			t.Fatalf("got %v, want an abandoned CancelledError naming the request", err)
		}
		if lost.created.Load() != 2 {
			t.Fatalf("the gate asked %d times, want twice: the ask cut short, then the same key to find it", lost.created.Load())
		}
		if r, err := b.agent.GetRequest(ctx, ce.Request.ID); err != nil || r.State != airlock.StateCancelled {
			t.Fatalf("request after giving up: %+v %v, want cancelled", r, err)
		}
	})
	t.Run("permission lapsed before the claim: not claimed", func(t *testing.T) {
		late := b.gate(t, nil, func(c *client.GateConfig) { c.Now = func() time.Time { return time.Now().Add(time.Hour) } })
		var id string
		_, err := late.Run(ctx, client.Call{Tool: "delete_repo", Arguments: []byte(`{"repo":"v"}`), OnPending: func(r *client.ApprovalRequest) {
			id = r.ID
			b.decideOnPending(t, approve)(r)
		}}, tool.run)
		var le *client.LapsedError
		if !errors.As(err, &le) || le.Claimed {
			t.Fatalf("got %v, want a LapsedError before claiming", err)
		}
		if r, _ := b.agent.GetRequest(ctx, id); r.Execution != nil {
			t.Fatalf("a lapsed approval was claimed: %+v", r.Execution)
		}
	})
	t.Run("permission lapsed between claim and start: reported failed", func(t *testing.T) {
		var checks atomic.Int64
		late := b.gate(t, nil, func(c *client.GateConfig) {
			c.Now = func() time.Time {
				if checks.Add(1) == 1 {
					return time.Now()
				}
				return time.Now().Add(time.Hour) // the check immediately before starting
			}
		})
		out, err := late.Run(ctx, client.Call{Tool: "delete_repo", Arguments: []byte(`{"repo":"u"}`), OnPending: b.decideOnPending(t, approve)}, tool.run)
		var le *client.LapsedError
		if !errors.As(err, &le) || !le.Claimed || out.Request.Execution == nil || out.Request.Execution.Status != airlock.ExecFailed {
			t.Fatalf("got %v %+v, want a claimed LapsedError reported failed", err, out)
		}
	})
	if tool.n.Load() != 0 {
		t.Fatalf("the tool ran %d times; it must never run without a valid approval", tool.n.Load())
	}
}

func TestGateToolFailures(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	g := b.gate(t, nil)
	boom := errors.New("disk full")
	out, err := g.Run(ctx, client.Call{Tool: "write", Arguments: []byte(`{"n":1}`), OnPending: b.decideOnPending(t, approve)},
		func(context.Context) error { return boom })
	var te *client.ToolError
	if !errors.As(err, &te) || !errors.Is(err, boom) || out.Status != airlock.ExecFailed || out.Request.Execution.Detail != "disk full" {
		t.Fatalf("failed tool: %v %+v", err, out)
	}
	out, err = g.Run(ctx, client.Call{Tool: "write", Arguments: []byte(`{"n":2}`), OnPending: b.decideOnPending(t, approve)},
		func(context.Context) error {
			return fmt.Errorf("connection lost mid-call: %w", client.ErrOutcomeUnknown)
		})
	if !errors.As(err, &te) || te.Status != airlock.ExecUnknown || out.Request.Execution.Status != airlock.ExecUnknown {
		t.Fatalf("unknown outcome: %v %+v", err, out)
	}
	// A panic is reported unknown, then carried on.
	var id string
	func() {
		defer func() {
			if v := recover(); v != "kaboom" {
				t.Fatalf("recovered %v, want the tool's panic", v)
			}
		}()
		g.Run(ctx, client.Call{Tool: "write", Arguments: []byte(`{"n":3}`), OnPending: func(r *client.ApprovalRequest) {
			id = r.ID
			b.decideOnPending(t, approve)(r)
		}}, func(context.Context) error { panic("kaboom") })
	}()
	if r, err := b.agent.GetRequest(ctx, id); err != nil || r.Execution.Status != airlock.ExecUnknown {
		t.Fatalf("after a panic: %+v %v", r.Execution, err)
	}
	// Result-returning form.
	v, _, err := client.Do(ctx, g, client.Call{Tool: "sum", Arguments: []byte(`{"a":1,"b":2}`), OnPending: b.decideOnPending(t, approve)},
		func(context.Context) (int, error) { return 3, nil })
	if err != nil || v != 3 {
		t.Fatalf("Do: %v %v", v, err)
	}
}

// TestGateChangedArguments: changed arguments are a new request and key;
// the approval of the first call does not cover them.
func TestGateChangedArguments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.gate(t, nil)
	small := client.Call{Tool: "issue_refund", Arguments: []byte(`{"amount": 82000}`), AttemptKey: "a"}
	// Same document, other spelling: same key.
	respaced := small
	respaced.Arguments = []byte(`{ "amount":82000 }`)
	big := small
	big.Arguments = []byte(`{"amount": 820000}`)
	ks, _ := g.Key(small)
	kr, _ := g.Key(respaced)
	kb, _ := g.Key(big)
	if ks != kr || ks == kb {
		t.Fatalf("keys: %s %s %s; want the same document to share a key and changed arguments not to", ks, kr, kb)
	}
	next := small
	next.AttemptKey = "b"
	if kn, _ := g.Key(next); kn == ks {
		t.Fatal("a new attempt key must give a new key")
	}
	ctx := context.Background()
	var tool counter
	small.OnPending = b.decideOnPending(t, approve)
	out1, err := g.Run(ctx, small, tool.run)
	if err != nil {
		t.Fatal(err)
	}
	var id2 string
	big.OnPending = func(r *client.ApprovalRequest) {
		id2 = r.ID
		b.decideOnPending(t, client.DecisionInput{Status: airlock.StateDenied, Note: "ten times more?"})(r)
	}
	if _, err := g.Run(ctx, big, tool.run); !errors.As(err, new(*client.DeniedError)) || id2 == out1.Request.ID {
		t.Fatalf("changed arguments: %v (request %s vs %s)", err, id2, out1.Request.ID)
	}
	if tool.n.Load() != 1 {
		t.Fatalf("tool ran %d times", tool.n.Load())
	}
}

// TestGateClaimAnswerLost: when the claim's answer is lost, the gate reads
// the request back; the claim had landed, so it cannot know whether the
// claim was its own: it does not run the call and reports unknown.
func TestGateClaimAnswerLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	agent, ft := b.faulty(t, b.agentSecret)
	ft.add("POST", "/execution", true, 1)
	g := b.gate(t, agent)
	var tool counter
	out, err := g.Run(context.Background(), client.Call{Tool: "t", Arguments: []byte(`{}`), OnPending: b.decideOnPending(t, approve)}, tool.run)
	var ie *client.InterruptedError
	if !errors.As(err, &ie) || ie.Started || tool.n.Load() != 0 || out.Request.Execution.Status != airlock.ExecUnknown {
		t.Fatalf("got %v %+v, tool ran %d", err, out, tool.n.Load())
	}
	// A claim that never left is simply sent again.
	ft.add("POST", "/execution", false, 2)
	if _, err := g.Run(context.Background(), client.Call{Tool: "t", Arguments: []byte(`{"n":2}`), OnPending: b.decideOnPending(t, approve)}, tool.run); err != nil || tool.n.Load() != 1 {
		t.Fatalf("claim after refused connections: %v, tool ran %d", err, tool.n.Load())
	}
}

func TestGateJournalIsLocked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := t.TempDir()
	g, err := client.NewGate(client.GateConfig{Client: b.agent, InstanceID: b.instance, JournalDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.NewGate(client.GateConfig{Client: b.agent, InstanceID: b.instance, JournalDir: dir}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second gate on one journal: %v, want it refused", err)
	}
	g.Close()
	g, err = client.NewGate(client.GateConfig{Client: b.agent, InstanceID: b.instance, JournalDir: dir})
	if err != nil {
		t.Fatalf("reopen after close: %v", err)
	}
	g.Close()
}

// TestGateClaimRace is T06 through the client: N approved requests and 8
// gates (each with its own journal, as 8 processes would be) running every
// one of the N calls at once. Each call runs exactly once: N runs, N
// succeeded, 7N AlreadyExecutedError.
//
// It does not run in parallel with the package's other tests: alone, its
// figure is also a measure (about 15 s under -race on 2 cores).
func TestGateClaimRace(t *testing.T) {
	testkit.Long(t)
	const n = 1000
	const gates = 8
	b := setupBinary(t)
	ctx := context.Background()
	start := time.Now()

	gs := make([]*client.Gate, gates)
	for i := range gs {
		gs[i] = b.gate(t, nil)
	}
	calls := make([]client.Call, n)
	for i := range calls {
		calls[i] = client.Call{Tool: "transfer", Arguments: []byte(fmt.Sprintf(`{"to":"acct_%d","cents":%d}`, i, 100+i)), AttemptKey: "t06"}
		key, err := gs[0].Key(calls[i])
		if err != nil {
			t.Fatal(err)
		}
		r, _, err := b.agent.CreateRequest(ctx, b.instance, key, client.CreateRequestInput{Tool: calls[i].Tool, Arguments: calls[i].Arguments, Timeout: "10m"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.reviewer.Approve(ctx, r.ID, ""); err != nil {
			t.Fatal(err)
		}
	}
	setupTook := time.Since(start)

	runs := make([]atomic.Int64, n)
	var ok, already, other atomic.Int64
	var wg sync.WaitGroup
	raceStart := time.Now()
	for gi, g := range gs {
		wg.Go(func() {
			order := rand.New(rand.NewPCG(uint64(gi), 6)).Perm(n)
			for _, i := range order {
				_, err := g.Run(ctx, calls[i], func(context.Context) error { runs[i].Add(1); return nil })
				switch {
				case err == nil:
					ok.Add(1)
				case errors.As(err, new(*client.AlreadyExecutedError)):
					already.Add(1)
				default:
					other.Add(1)
					t.Errorf("call %d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	raceTook := time.Since(raceStart)
	total := int64(0)
	for i := range runs {
		if r := runs[i].Load(); r != 1 {
			t.Errorf("call %d ran %d times", i, r)
		}
		total += runs[i].Load()
	}
	if total != int64(n) || ok.Load() != int64(n) || already.Load() != int64((gates-1)*n) || other.Load() != 0 {
		t.Fatalf("runs %d, succeeded %d, already_executed %d, other %d; want %d, %d, %d, 0",
			total, ok.Load(), already.Load(), other.Load(), n, n, (gates-1)*n)
	}
	succeeded := 0
	for r, err := range b.reviewer.AllRequests(ctx, client.ListRequestsOptions{Tool: "transfer", Limit: 200}) {
		if err != nil {
			t.Fatal(err)
		}
		if r.Execution != nil && r.Execution.Status == airlock.ExecSucceeded {
			succeeded++
		}
	}
	if succeeded != n {
		t.Fatalf("server shows %d executions succeeded, want %d", succeeded, n)
	}
	t.Logf("T06: %d approved × %d gates: %d runs, %d already_executed; setup %v, race %v", n, gates, total, already.Load(), setupTook, raceTook)
}

// TestGateSameCallConcurrently: the same call run twice at once in one
// gate runs once; the second run waits for the first and finds its
// outcome in the journal.
func TestGateSameCallConcurrently(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.gate(t, nil)
	var tool counter
	call := client.Call{Tool: "t", Arguments: []byte(`{"x":1}`), AttemptKey: "dup", OnPending: b.decideOnPending(t, approve)}
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := g.Run(context.Background(), call, tool.run)
			errs <- err
		}()
	}
	var ok, here int
	for range 2 {
		err := <-errs
		var ae *client.AlreadyExecutedError
		switch {
		case err == nil:
			ok++
		case errors.As(err, &ae) && ae.Here && ae.Status == airlock.ExecSucceeded:
			here++
		default:
			t.Errorf("run: %v", err)
		}
	}
	if ok != 1 || here != 1 || tool.n.Load() != 1 {
		t.Fatalf("%d succeeded, %d found it done, tool ran %d times; want 1, 1, 1", ok, here, tool.n.Load())
	}
	// A run that cannot get the lock gives up with its context.
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	release := make(chan struct{})
	holder, stopHolder := context.WithCancel(context.Background())
	held := make(chan struct{})
	go func() {
		defer close(held)
		g.Run(holder, client.Call{Tool: "t", Arguments: []byte(`{"x":2}`), OnPending: func(*client.ApprovalRequest) {
			select {
			case <-started:
			default:
				close(started)
				<-release
			}
		}}, tool.run)
	}()
	<-started
	cancel()
	_, err := g.Run(ctx, client.Call{Tool: "t", Arguments: []byte(`{"x":2}`)}, tool.run)
	close(release)
	stopHolder()
	<-held
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("blocked run: %v", err)
	}
}

// cancelAfterCreate lets the first create reach the server, then ends the
// caller's context before the answer is read: the request stands on the
// server, and the caller never learns its ID.
type cancelAfterCreate struct {
	next    http.RoundTripper
	cancel  context.CancelFunc
	created atomic.Int64
}

func (c *cancelAfterCreate) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/approval-requests") {
		return c.next.RoundTrip(req)
	}
	if c.created.Add(1) > 1 {
		return c.next.RoundTrip(req)
	}
	res, err := c.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	c.cancel()
	return nil, context.Canceled
}
