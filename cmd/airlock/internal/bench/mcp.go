package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock/internal/mcpsdk"
	"github.com/airlockhq/airlock/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The mcp scenario is approval_request tool calls through /mcp with the Go
// SDK client, at two revisions in interleaved passes on the same warm
// servers (interleave.go): "on" is clients at 2026-07-28, which the
// server answers without the SDK (mcpserver/direct.go), "off" clients
// pinned to 2025-11-25, the newest revision with sessions. Nothing on the
// server switches: each pass connects its own clients at its revision.
// It reports revision_ratio (calls/s at 2026-07-28 ÷ at 2025-11-25) and
// revision_cpu_ratio, the server's CPU per call in the same order (target
// ≤ 1.0; docs/performance.md, "What an MCP call costs at each revision").
// Every call's MCP-Protocol-Version header is read on its way out: a pass
// that spoke another revision than its own fails the run.

// mcpRevision2025 is the revision the "off" passes pin their clients to.
const mcpRevision2025 = "2025-11-25"

// mcpOrder is the mcp scenario's measured passes: whether each is at
// 2026-07-28 (else at 2025-11-25).
var mcpOrder = [...]bool{true, false, false, true}

// mcpRevision is the revision of a pass: 2026-07-28 when on.
func mcpRevision(on bool) string {
	if on {
		return mcpserver.Revision2026
	}
	return mcpRevision2025
}

// MCPReport is what the mcp scenario measured.
type MCPReport struct {
	// Compared says whether the run measured both revisions: it does
	// unless --half-max, whose two runs (the maximum, then half of it)
	// are at 2026-07-28 only (Note says so).
	Compared bool      `json:"compared"`
	Note     string    `json:"note,omitempty"`
	Passes   []MCPPass `json:"passes,omitempty"`
	// At2026 and At2025 are the passes of each revision summed.
	At2026 Result  `json:"at_2026_07_28"`
	At2025 *Result `json:"at_2025_11_25,omitempty"`
	// RevisionRatio is At2026's calls/s over At2025's.
	RevisionRatio float64 `json:"revision_ratio,omitempty"`
	// PassSpread is as in ClaimReport: when it exceeds |1 − RevisionRatio|
	// the machine's noise is larger than the revisions' difference.
	PassSpread float64 `json:"pass_spread,omitempty"`
	// RevisionCPURatio is the server CPU per call at 2026-07-28 over at
	// 2025-11-25 (target ≤ 1.0): measured when the servers run in their
	// own processes, or with --server-pid.
	RevisionCPURatio float64 `json:"revision_cpu_ratio,omitempty"`
	// RevisionServerCPUUS is the server CPU per call at 2026-07-28 less at
	// 2025-11-25 (negative when the newer revision costs less).
	RevisionServerCPUUS float64 `json:"revision_server_cpu_us_per_op,omitempty"`
}

// MCPPass is one pass of the mcp scenario.
type MCPPass struct {
	Revision string `json:"revision"`
	// Calls is how many tools/call requests the pass's clients sent, each
	// read on its way out with the pass's MCP-Protocol-Version.
	Calls int64 `json:"calls_checked"`
	Result
}

// validateMCP checks what only the mcp scenario needs.
func (c Config) validateMCP() error {
	if c.Scenario != MCP || c.HalfMax {
		return nil
	}
	if c.Count < len(mcpOrder) {
		return fmt.Errorf("--count must be at least %d for mcp: it runs %d passes, at 2026-07-28 and at 2025-11-25", len(mcpOrder), len(mcpOrder))
	}
	if c.Duration < 100*time.Millisecond {
		return fmt.Errorf("--duration must be at least 100ms for mcp: it runs a warm-up and %d passes within it", len(mcpOrder))
	}
	return nil
}

// revisionLog is an http.RoundTripper that reads the MCP-Protocol-Version
// header of every tools/call request on its way to Next, and counts the
// calls at want and at any other revision: what the clients said, not
// what they were told to say.
type revisionLog struct {
	want  string
	next  http.RoundTripper
	calls atomic.Int64
	mu    sync.Mutex
	wrong map[string]int64 // by the header's value
}

func newRevisionLog(want string, next http.RoundTripper) *revisionLog {
	if next == nil {
		next = http.DefaultTransport
	}
	return &revisionLog{want: want, next: next, wrong: map[string]int64{}}
}

// RoundTrip counts r when it is a tools/call and sends it.
func (l *revisionLog) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && isToolCall(r) {
		if got := r.Header.Get("Mcp-Protocol-Version"); got == l.want {
			l.calls.Add(1)
		} else {
			l.mu.Lock()
			l.wrong[got]++
			l.mu.Unlock()
		}
	}
	return l.next.RoundTrip(r)
}

// isToolCall reports whether r's JSON-RPC body is a tools/call, from a
// copy of the body (the SDK's requests can be read again); a body that
// cannot be copied counts as one, so that no call goes unchecked.
func isToolCall(r *http.Request) bool {
	if r.GetBody == nil {
		return true
	}
	body, err := r.GetBody()
	if err != nil {
		return true
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	return err != nil || bytes.Contains(b, []byte(`"method":"tools/call"`))
}

// check returns the calls at the wanted revision, or an error naming the
// revisions spoken instead, or saying none was: a pass whose calls went
// at another revision measured that one, not its own.
func (l *revisionLog) check() (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.wrong) > 0 {
		var spoken []string
		for v, n := range l.wrong {
			if v == "" {
				v = "no MCP-Protocol-Version"
			}
			spoken = append(spoken, fmt.Sprintf("%d calls spoke %s", n, v))
		}
		sort.Strings(spoken)
		return 0, fmt.Errorf("%s, at a pass meant to be at %s: the client did not speak the pass's revision, and its figures would be another revision's", strings.Join(spoken, ", "), l.want)
	}
	n := l.calls.Load()
	if n == 0 {
		return 0, fmt.Errorf("no tools/call at %s was sent: the pass measured nothing", l.want)
	}
	return n, nil
}

// mcpClient connects client i of a pass at revision, its requests through
// log, and returns its operation: one approval_request call, run and phase
// naming its idempotency keys. Pinning the client is what the SDK offers
// (ClientSessionOptions.ProtocolVersion); at 2026-07-28, its default, it is
// left unpinned, as mcpserver's tests do.
func mcpClient(ctx context.Context, cfg Config, t *target, i int, revision string, log *revisionLog, run string, phase int) (clientOp, func(), error) {
	pin := revision
	if cfg.mcpPin != nil {
		pin = cfg.mcpPin(revision)
	}
	var opts *mcp.ClientSessionOptions
	if pin != mcpserver.Revision2026 {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: pin}
	}
	hc := &http.Client{Transport: mcpsdk.Bearer{Token: t.agent, Next: log}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "airlock-bench", Version: "v1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: t.base(i) + "/mcp", HTTPClient: hc}, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to %s/mcp at %s: %w", t.base(i), revision, err)
	}
	return func(ctx context.Context, n int64) error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "approval_request", Arguments: map[string]any{
			"kind": "agent_request", "title": fmt.Sprintf("bench %d", n),
			"proposal":       map[string]any{"mode": "advisory"},
			"idempotencyKey": fmt.Sprintf("bench-%s-%d-%d", run, phase, n), "expiresInMinutes": 60,
		}})
		if err != nil {
			return err
		}
		if res.IsError {
			var msg []string
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					msg = append(msg, tc.Text)
				}
			}
			return fmt.Errorf("approval_request refused: %s", strings.Join(msg, " "))
		}
		return nil
	}, func() { cs.Close() }, nil
}

// runMCP runs the mcp scenario's interleaved passes (with --half-max,
// runLoadScenario runs it at 2026-07-28 instead).
func runMCP(ctx context.Context, cfg Config, t *target, rep *Report) error {
	run := randomHex(4)
	mr := &MCPReport{Compared: true}
	var calls []int64 // per measured pass
	pass := func(phase int, on bool, duration time.Duration, count int) (Result, error) {
		log := newRevisionLog(mcpRevision(on), t.hc.Transport)
		res, err := runLoad(ctx, cfg.Clients, duration, count, cfg.Rate, t.serverCPU(), func(ctx context.Context, i int) (clientOp, func(), error) {
			return mcpClient(ctx, cfg, t, i, mcpRevision(on), log, run, phase)
		})
		if err != nil {
			return Result{}, err
		}
		n, err := log.check()
		if err != nil {
			return Result{}, err
		}
		if n < res.Ops {
			return Result{}, fmt.Errorf("%d calls succeeded but %d were read at %s: some went by another way than the one checked", res.Ops, n, mcpRevision(on))
		}
		if phase < len(mcpOrder) {
			calls = append(calls, n)
		}
		return res, nil
	}
	results, err := runInterleavedNamed(ctx, cfg, t, "mcp", func(on bool) string { return "at " + mcpRevision(on) }, mcpOrder[:],
		func(bool) error { return nil }, pass)
	if err != nil {
		return err
	}
	var on, off []Result
	for i, res := range results {
		mr.Passes = append(mr.Passes, MCPPass{Revision: mcpRevision(mcpOrder[i]), Calls: calls[i], Result: res})
		if mcpOrder[i] {
			on = append(on, res)
		} else {
			off = append(off, res)
		}
	}
	at2025 := mergeResults(off)
	mr.At2026, mr.At2025 = mergeResults(on), &at2025
	if at2025.OpsPerS > 0 {
		mr.RevisionRatio = round(mr.At2026.OpsPerS/at2025.OpsPerS, 3)
	}
	mr.PassSpread = round(max(passSpread(on), passSpread(off)), 3)
	if mr.At2026.ServerCPUPerOpUS > 0 && at2025.ServerCPUPerOpUS > 0 {
		mr.RevisionCPURatio = round(mr.At2026.ServerCPUPerOpUS/at2025.ServerCPUPerOpUS, 3)
		mr.RevisionServerCPUUS = round(mr.At2026.ServerCPUPerOpUS-at2025.ServerCPUPerOpUS, 1)
	}
	rep.Result, rep.MCP = mr.At2026, mr
	return nil
}

// writeRows adds the mcp scenario's rows to the report's table, after the
// 2026-07-28 row: the 2025-11-25 one, then each pass.
func (mr *MCPReport) writeRows(row func(name string, res Result)) {
	if mr.At2025 == nil {
		return
	}
	row("mcp, at "+mcpRevision2025, *mr.At2025)
	for i, p := range mr.Passes {
		row(fmt.Sprintf("  pass %d, at %s", i+1, p.Revision), p.Result)
	}
}

// writeSummary says what the mcp scenario's rows mean.
func (mr *MCPReport) writeSummary(w io.Writer) {
	if !mr.Compared {
		fmt.Fprintf(w, "\nmcp: approval_request tool calls, every call read at %s; %s\n", mcpserver.Revision2026, mr.Note)
		return
	}
	order := make([]bool, len(mr.Passes))
	for i, p := range mr.Passes {
		order[i] = p.Revision == mcpserver.Revision2026
	}
	comparison{
		scenario: "mcp", what: "approval_request tool calls with the Go SDK client, every call read for its MCP-Protocol-Version",
		ratioName: "revision_ratio", ratioOf: "calls/s at 2026-07-28 ÷ at 2025-11-25", cost: "the revisions' difference",
		targetNote: "its target is on the server's CPU, below",
		cpuOf:      "server CPU per call", on: "at 2026-07-28", off: "at 2025-11-25",
		ratio: mr.RevisionRatio, spread: mr.PassSpread, order: order, orderOf: map[bool]string{true: "2026", false: "2025"},
		onCPU: mr.At2026.ServerCPUPerOpUS, offCPU: mr.At2025.ServerCPUPerOpUS, deltaCPU: mr.RevisionServerCPUUS,
		cpuRatioName: "revision_cpu_ratio", cpuRatio: mr.RevisionCPURatio, cpuRatioOf: "server CPU per call at 2026-07-28 ÷ at 2025-11-25", cpuTarget: 1.0,
	}.write(w)
}
