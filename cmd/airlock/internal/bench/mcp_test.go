package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/mcpserver"
)

// TestMCPRevisions runs the mcp scenario small: a warm-up, then passes at
// 2026-07-28, 2025-11-25, 2025-11-25, 2026-07-28, every call read at its
// pass's revision; each revision summed, revision_ratio between them and,
// with the server in its own process, the server's CPU per call at each
// and revision_cpu_ratio.
func TestMCPRevisions(t *testing.T) {
	t.Parallel()
	// Enough calls that each revision's server CPU spans many of the
	// kernel's 10 ms ticks: with a dozen, one revision read 0 at times.
	rep := run(t, Config{Scenario: MCP, Clients: 2, Duration: 60 * time.Second, Count: 400})
	m := rep.MCP
	if m == nil {
		t.Fatal("no mcp report")
	}
	if !m.Compared || m.Note != "" || len(m.Passes) != len(mcpOrder) {
		t.Fatalf("mcp report compared %v (%q) over %d passes, want compared over %d", m.Compared, m.Note, len(m.Passes), len(mcpOrder))
	}
	var newOps, oldOps int64
	for i, p := range m.Passes {
		if want := mcpRevision(mcpOrder[i]); p.Revision != want {
			t.Errorf("pass %d at %s, want %s", i+1, p.Revision, want)
		}
		// 400 less the warm-up's 40, shared out: 90 each.
		checkResult(t, fmt.Sprintf("pass %d, at %s", i+1, p.Revision), p.Result, 90)
		if p.Calls < p.Ops {
			t.Errorf("pass %d: %d calls read at %s for %d successful ones", i+1, p.Calls, p.Revision, p.Ops)
		}
		if p.Revision == mcpserver.Revision2026 {
			newOps += p.Ops
		} else {
			oldOps += p.Ops
		}
	}
	if m.At2025 == nil {
		t.Fatal("no 2025-11-25 result")
	}
	checkResult(t, "at 2026-07-28", m.At2026, 180)
	checkResult(t, "at 2025-11-25", *m.At2025, 180)
	if m.At2026.Ops != newOps || m.At2025.Ops != oldOps || newOps+oldOps != 360 {
		t.Errorf("revisions of %d and %d calls, want the passes' %d and %d, 360 in all", m.At2026.Ops, m.At2025.Ops, newOps, oldOps)
	}
	if want := round(m.At2026.OpsPerS/m.At2025.OpsPerS, 3); m.RevisionRatio != want || want <= 0 {
		t.Errorf("revision_ratio %v, want %v", m.RevisionRatio, want)
	}
	if rep.Ops != m.At2026.Ops || rep.OpsPerS != m.At2026.OpsPerS {
		t.Errorf("the report's result is %d ops at %.1f/s, want the 2026-07-28 revision's", rep.Ops, rep.OpsPerS)
	}
	paths := []string{"mcp.compared", "mcp.revision_ratio", "mcp.at_2026_07_28.ops_per_s", "mcp.at_2025_11_25.ops_per_s", "mcp.at_2025_11_25.latency_ms.p99"}
	wantTable := []string{"airlock mcp, at 2026-07-28", "mcp, at 2025-11-25", "pass 1, at 2026-07-28", "pass 3, at 2025-11-25",
		"revision_ratio: ", "2026, 2025, 2025, 2026", "revision_cpu_ratio: "}
	if procCPUAvailable() {
		// The server runs in a process of its own: its CPU per call is
		// measured apart from the clients', at each revision.
		if m.At2026.ServerCPUPerOpUS <= 0 || m.At2025.ServerCPUPerOpUS <= 0 {
			t.Fatalf("server CPU per call %.1f µs at 2026-07-28, %.1f µs at 2025-11-25: want both measured", m.At2026.ServerCPUPerOpUS, m.At2025.ServerCPUPerOpUS)
		}
		if want := round(m.At2026.ServerCPUPerOpUS/m.At2025.ServerCPUPerOpUS, 3); m.RevisionCPURatio != want {
			t.Errorf("revision_cpu_ratio %v, want %v", m.RevisionCPURatio, want)
		}
		if want := round(m.At2026.ServerCPUPerOpUS-m.At2025.ServerCPUPerOpUS, 1); m.RevisionServerCPUUS != want {
			t.Errorf("revision_server_cpu_us_per_op %v, want %v", m.RevisionServerCPUUS, want)
		}
		paths = append(paths, "mcp.revision_cpu_ratio", "mcp.at_2026_07_28.server_cpu_us_per_op", "mcp.at_2025_11_25.server_cpu_us_per_op")
		wantTable = append(wantTable, "server CPU per call: ", "target ≤ 1.00")
	}

	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, path := range paths {
		if lookup(doc, path) == nil {
			t.Errorf("JSON report has no %s:\n%s", path, b)
		}
	}
	if ps, _ := lookup(doc, "mcp.passes").([]any); len(ps) != len(mcpOrder) || lookup(ps[1].(map[string]any), "revision") != "2025-11-25" {
		t.Errorf("JSON report's passes:\n%s", b)
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	for _, want := range wantTable {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

// TestMCPWrongRevision pins the clients to the other revision than their
// pass's: the run fails at the first pass that spoke the wrong one, and
// reports no figure for it.
func TestMCPWrongRevision(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		pin   func(revision string) string
		wants []string
	}{
		// The warm-up, at 2026-07-28, already speaks 2025-11-25.
		{"always 2025-11-25", func(string) string { return mcpRevision2025 },
			[]string{"mcp warm-up", "calls spoke 2025-11-25, at a pass meant to be at 2026-07-28"}},
		// The warm-up and pass 1 are right; pass 2, at 2025-11-25, is not.
		{"always 2026-07-28", func(string) string { return mcpserver.Revision2026 },
			[]string{"mcp pass 2, at 2025-11-25", "calls spoke 2026-07-28, at a pass meant to be at 2025-11-25"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var progress bytes.Buffer
			rep, err := Run(t.Context(), Config{Scenario: MCP, Clients: 2, Duration: 40 * time.Second, Count: 12, Progress: &progress, mcpPin: tt.pin})
			if err == nil {
				t.Fatalf("a run whose clients spoke the wrong revision reported %+v", rep.MCP)
			}
			for _, want := range tt.wants {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q\nprogress:\n%s", err, want, progress.String())
				}
			}
		})
	}
}

// TestRevisionLog reads the MCP-Protocol-Version of tools/call requests
// only, and fails on any call at another revision, or on none at all.
func TestRevisionLog(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	defer srv.Close()
	send := func(l *revisionLog, method, version string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		if version != "" {
			req.Header.Set("Mcp-Protocol-Version", version)
		}
		res, err := (&http.Client{Transport: l}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}

	l := newRevisionLog("2025-11-25", nil)
	if _, err := l.check(); err == nil || !strings.Contains(err.Error(), "no tools/call at 2025-11-25") {
		t.Errorf("check with no call = %v, want an error saying none was sent", err)
	}
	send(l, "initialize", "")
	send(l, "tools/call", "2025-11-25")
	send(l, "tools/call", "2025-11-25")
	send(l, "notifications/initialized", "2026-07-28")
	if n, err := l.check(); n != 2 || err != nil {
		t.Errorf("check = %d, %v; want the 2 tools/call, the other requests not counted", n, err)
	}
	send(l, "tools/call", "2026-07-28")
	send(l, "tools/call", "")
	_, err := l.check()
	for _, want := range []string{"1 calls spoke 2026-07-28", "1 calls spoke no MCP-Protocol-Version", "meant to be at 2025-11-25"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("check after calls at other revisions = %v, want it to say %q", err, want)
		}
	}
}

// TestMCPHalfMax: with --half-max the mcp scenario finds the maximum and
// paces at half of it, both at 2026-07-28 and every call read at it, and
// says that it compared no revisions.
func TestMCPHalfMax(t *testing.T) {
	t.Parallel()
	rep := run(t, Config{Scenario: MCP, Clients: 2, Count: 20, Duration: 30 * time.Second, HalfMax: true})
	if rep.Max == nil || rep.MCP == nil {
		t.Fatalf("maximum %v, mcp report %v: want both", rep.Max, rep.MCP)
	}
	checkResult(t, "unpaced mcp", *rep.Max, 20)
	checkResult(t, "mcp at half", rep.Result, 20)
	if m := rep.MCP; m.Compared || m.At2025 != nil || m.RevisionRatio != 0 || m.At2026.Ops != rep.Ops {
		t.Errorf("mcp report with --half-max %+v, want 2026-07-28 only, no ratio", m)
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	if out := table.String(); !strings.Contains(out, "both runs are at 2026-07-28") || strings.Contains(out, "revision_ratio: ") {
		t.Errorf("table of an mcp run with --half-max:\n%s", out)
	}
}

// TestMCPRemote drives a server at --url: the revision is the clients',
// so the passes are compared there too, and --server-pid gives the
// server's CPU per call at each.
func TestMCPRemote(t *testing.T) {
	t.Parallel()
	srv, err := openTarget(t.Context(), Config{Clients: 2, Progress: &bytes.Buffer{}}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close(context.Background())
	cfg := Config{Scenario: MCP, Clients: 2, Duration: 60 * time.Second, Count: 400, URLs: []string{srv.urls[0]}, Token: srv.admin} // CPU over many ticks, as in TestMCPRevisions
	if procCPUAvailable() {
		cfg.ServerPID = srv.children[0].pid
	}
	m := run(t, cfg).MCP
	if m == nil || !m.Compared || len(m.Passes) != len(mcpOrder) || m.At2025 == nil || m.RevisionRatio <= 0 {
		t.Fatalf("mcp report over --url %+v, want both revisions compared", m)
	}
	if procCPUAvailable() && m.RevisionCPURatio <= 0 {
		t.Errorf("over --url with --server-pid: no revision_cpu_ratio (server CPU %.1f and %.1f µs per call)", m.At2026.ServerCPUPerOpUS, m.At2025.ServerCPUPerOpUS)
	}
}
