package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/gate"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/internal/testkit/apitest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// audience is the name the tool server goes by in these tests.
const audience = "ledger-test"

// approvedArgs are the arguments every approval in these tests is for.
const approvedArgs = `{"from":"alice","to":"bob","amount":100}`

// TestBehindTheGate puts the real `airlock gate --token-audience` in front
// of the example (both built binaries) and calls it with the Go SDK's
// client while a reviewer, watching the event stream, decides.
func TestBehindTheGate(t *testing.T) {
	t.Parallel()
	t.Run("approved: runs exactly once, recording who approved", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g, ledger := b.gate(t)
		res, id := b.callDecided(t, g, airlock.StateApproved)
		if res.IsError || text(res) != "transferred 100 from alice to bob" {
			t.Fatalf("the approved call answered %+v: %s", res, text(res))
		}
		want := "transfer 100 alice -> bob, approved by Carol (human), request " + id
		if got := lines(t, ledger); len(got) != 1 || got[0] != want {
			t.Fatalf("ledger %q, want [%q]", got, want)
		}
		if stderr := g.exit(t); strings.Contains(stderr, "refused") {
			t.Fatalf("the example refused a call:\n%s", stderr)
		}
	})
	t.Run("denied: the gate never calls, nothing runs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g, ledger := b.gate(t)
		res, _ := b.callDecided(t, g, airlock.StateDenied)
		if !res.IsError || strings.Contains(text(res), "transferred") {
			t.Fatalf("the denied call answered %+v: %s", res, text(res))
		}
		if got := lines(t, ledger); len(got) != 0 {
			t.Fatalf("a denied call ran: ledger %q", got)
		}
		// Had the gate called, the example would have refused the call,
		// which carried no token, and said so.
		if stderr := g.exit(t); strings.Contains(stderr, "refused") {
			t.Fatalf("the gate called the example:\n%s", stderr)
		}
	})
}

// TestStraightToTheServer connects a client to the example directly,
// bypassing the gate, with a token the test claimed itself: an approval
// of transfer_funds with approvedArgs for an instance whose token_audience
// is audience.
func TestStraightToTheServer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type call struct {
		tool, args string
		token      bool   // send the claimed token in _meta
		refused    string // the reason the call is refused, or "" when it runs
	}
	for _, tt := range []struct {
		name     string
		audience string // the server's --audience
		calls    []call
		runs     int
	}{
		{"the token runs the call once; the same token again is refused", audience,
			[]call{{"transfer_funds", approvedArgs, true, ""}, {"transfer_funds", approvedArgs, true, "replayed"}}, 1},
		{"arguments changed after the approval are refused; the approved ones, keys reordered, still run", audience,
			[]call{{"transfer_funds", `{"from":"alice","to":"mallory","amount":100}`, true, "arguments"},
				{"transfer_funds", `{"amount":100,"to":"bob","from":"alice"}`, true, ""}}, 1},
		{"a call without a token is refused", audience,
			[]call{{"transfer_funds", approvedArgs, false, "missing"}}, 0},
		{"a token for another tool server is refused", "other-ledger",
			[]call{{"transfer_funds", approvedArgs, true, "audience"}}, 0},
		{"a token for another tool is refused", audience,
			[]call{{"close_account", `{"account":"alice"}`, true, "tool"}}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			token := b.approvedToken(t)
			ledger := filepath.Join(t.TempDir(), "ledger.txt")
			cs := connect(t, exec.Command(b.tool, "--airlock-url", b.url, "--audience", tt.audience, "--ledger", ledger))
			for i, c := range tt.calls {
				params := &mcp.CallToolParams{Name: c.tool, Arguments: json.RawMessage(c.args)}
				if c.token {
					params.Meta = mcp.Meta{gate.ApprovalTokenMeta: token}
				}
				res, err := cs.CallTool(t.Context(), params)
				if err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
				if got := refusal(res); got != c.refused {
					t.Fatalf("call %d (%s %s) refused for %q, want %q: %s", i+1, c.tool, c.args, got, c.refused, text(res))
				}
			}
			if got := lines(t, ledger); len(got) != tt.runs {
				t.Fatalf("%d runs, want %d: ledger %q", len(got), tt.runs, got)
			}
		})
	}
}

// TestReplicasConsumeAtAirlock: two processes of the server, each with a
// verifier token, spend approvals at Airlock; a token that ran at one is
// refused at the other, which a process's own memory could not do.
func TestReplicasConsumeAtAirlock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	token := b.approvedToken(t)
	var ledgers []string
	var servers []*running
	for range 2 {
		ledger := filepath.Join(t.TempDir(), "ledger.txt")
		cmd := exec.Command(b.tool, "--airlock-url", b.url, "--audience", audience, "--ledger", ledger)
		cmd.Env = append(testkit.CleanEnv(), "AIRLOCK_VERIFIER_TOKEN="+b.verifierSecret)
		ledgers, servers = append(ledgers, ledger), append(servers, connect(t, cmd))
	}
	for i, want := range []string{"", "replayed"} {
		params := &mcp.CallToolParams{Name: "transfer_funds", Arguments: json.RawMessage(approvedArgs), Meta: mcp.Meta{gate.ApprovalTokenMeta: token}}
		res, err := servers[i].CallTool(t.Context(), params)
		if err != nil {
			t.Fatal(err)
		}
		if got := refusal(res); got != want {
			t.Fatalf("server %d refused for %q, want %q: %s", i+1, got, want, text(res))
		}
	}
	if a, b := lines(t, ledgers[0]), lines(t, ledgers[1]); len(a) != 1 || len(b) != 0 {
		t.Fatalf("ledgers %q and %q; want one run, at the first server", a, b)
	}
}

// bundle is a running Airlock (in process, over a real SQLite file) with
// an agent and a reviewer, and the example built.
type bundle struct {
	url              string
	agent, reviewer  *client.Client
	agentSecret      string
	verifierSecret   string
	airlockBin, tool string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	s := apitest.Start(t, apitest.Config{})
	agent, secret := s.Mint(t, "agent", airlock.RoleAgent, "bot")
	reviewer, _ := s.Mint(t, "Carol", airlock.RoleReviewer, "carol")
	_, verifier := s.Mint(t, "ledger", airlock.RoleVerifier, "ledger")
	return &bundle{
		url: s.URL, agent: agent, reviewer: reviewer, agentSecret: secret, verifierSecret: verifier,
		airlockBin: testkit.Airlock(t, false),
		tool:       testkit.Build(t, "github.com/airlockhq/airlock/examples/verified-tool", false),
	}
}

// gate starts `airlock gate --token-audience audience` in front of the
// example and returns the gate (whose stderr has the example's) and the
// example's ledger.
func (b *bundle) gate(t *testing.T) (*running, string) {
	t.Helper()
	ledger := filepath.Join(t.TempDir(), "ledger.txt")
	cmd := exec.Command(b.airlockBin, "gate", "--url", b.url, "--journal", t.TempDir(), "--token-audience", audience,
		"--", b.tool, "--airlock-url", b.url, "--audience", audience, "--ledger", ledger)
	cmd.Env = append(testkit.CleanEnv(), "AIRLOCK_AGENT_TOKEN="+b.agentSecret)
	return connect(t, cmd), ledger
}

// callDecided calls transfer_funds with approvedArgs through cs while the
// reviewer decides its request with status, and returns the result and
// the request's id.
func (b *bundle) callDecided(t *testing.T, cs *running, status airlock.State) (*mcp.CallToolResult, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	type decision struct {
		id  string
		err error
	}
	decided := make(chan decision, 1)
	go func() {
		for ev, err := range b.reviewer.Events(ctx, 0) {
			if err != nil {
				decided <- decision{err: err}
				return
			}
			if ev.Event.Type == airlock.EventRequestCreated && ev.Request.Tool == "transfer_funds" {
				_, err := b.reviewer.Decide(ctx, ev.Request.ID, client.DecisionInput{Status: status})
				decided <- decision{ev.Request.ID, err}
				return
			}
		}
		decided <- decision{err: errors.New("the event stream ended before the request was created")}
	}()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "transfer_funds", Arguments: json.RawMessage(approvedArgs)})
	if err != nil {
		t.Fatal(err)
	}
	d := <-decided
	if d.err != nil {
		t.Fatal(d.err)
	}
	return res, d.id
}

// approvedToken returns the approval token of a fresh claim: the agent
// asks for transfer_funds with approvedArgs on an instance for audience,
// the reviewer approves, and the agent claims the execution.
func (b *bundle) approvedToken(t *testing.T) string {
	t.Helper()
	ctx := t.Context()
	inst, err := b.agent.RegisterInstance(ctx, "verified-tool test", nil, client.WithTokenAudience(audience))
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := b.agent.CreateRequest(ctx, inst.ID, rand.Text(), client.CreateRequestInput{Tool: "transfer_funds", Arguments: json.RawMessage(approvedArgs)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.reviewer.Approve(ctx, r.ID, ""); err != nil {
		t.Fatal(err)
	}
	r, err = b.agent.ClaimExecution(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Execution.ApprovalToken == "" {
		t.Fatalf("the claim of %s returned no approval token", r.ID)
	}
	return r.Execution.ApprovalToken
}

// running is an MCP server process with the Go SDK's client connected to
// its stdio.
type running struct {
	*mcp.ClientSession
	stderr *testkit.Buffer
	once   sync.Once
}

// connect starts cmd and connects a client to it. The process must exit
// cleanly once the session is closed, at the latest when the test ends.
func connect(t *testing.T, cmd *exec.Cmd) *running {
	t.Helper()
	r := &running{stderr: &testkit.Buffer{}}
	cmd.Stderr = r.stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "verified-tool-test", Version: "1.0"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("start %s: %v\nstderr:\n%s", cmd.Args[0], err, r.stderr.String())
	}
	r.ClientSession = cs
	t.Cleanup(func() { r.exit(t) })
	return r
}

// exit closes the session, waits for the process to exit and returns all
// it wrote to stderr.
func (r *running) exit(t *testing.T) string {
	t.Helper()
	r.once.Do(func() {
		if err := r.Close(); err != nil {
			t.Errorf("the server did not exit cleanly: %v\nstderr:\n%s", err, r.stderr.String())
		}
	})
	return r.stderr.String()
}

// refusal returns the reason the example gave for refusing a call, "" when
// the call ran, and "(not refused by the example)" for any other error.
func refusal(res *mcp.CallToolResult) string {
	if !res.IsError {
		return ""
	}
	rest, ok := strings.CutPrefix(text(res), "not approved (")
	code, _, found := strings.Cut(rest, ")")
	if !ok || !found {
		return "(not refused by the example)"
	}
	return code
}

// text joins a result's text content.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// lines returns the ledger's lines; none when it does not exist.
func lines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}
