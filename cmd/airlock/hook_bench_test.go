package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/hook"
)

// BenchmarkHookDecided measures what `airlock hook claude-code` adds to a
// decision already made: the hook's whole process, from exec to its
// answer on stdout, for a call the reviewer approved before the hook ran
// (as a grant or a policy rule would at creation). The hook then makes
// two round trips, the create (answered by the approved request) and the
// claim, against a real `airlock serve` on SQLite. It reports the median
// and the 99th percentile per call (docs/performance.md: p99 ≤ 50 ms).
//
//	go test -run '^$' -bench BenchmarkHookDecided -benchtime 200x ./cmd/airlock/
func BenchmarkHookDecided(b *testing.B) { benchmarkHook(b, false) }

// BenchmarkHookGranted is the same for a call a grant covers: the create
// is approved by the grant in its own write, then the hook claims it.
func BenchmarkHookGranted(b *testing.B) { benchmarkHook(b, true) }

func benchmarkHook(b *testing.B, granted bool) {
	dir := b.TempDir()
	srv := startProcess(b, dir, nil, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "airlock.db"),
		"--admin-token", testAdmin, "--log-level", "error", "--rate-limit", "1000000")
	c := newAPI(b, srv.URL)
	agent := c.mintToken(testAdmin, "bench agent", "agent")
	reviewer := c.mintToken(testAdmin, "bench reviewer", "reviewer")
	const session = "bench-session"
	c.call("POST", "/v1/instances", agent, `{"name":"`+hook.InstanceName("claude-code", session)+`"}`).want(b, 201, "instance")
	bin := binary(b)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "AIRLOCK_URL=" + srv.URL, "AIRLOCK_AGENT_TOKEN=" + agent,
		"AIRLOCK_STATE_DIR=" + filepath.Join(dir, "state")}

	stdin := func(i int) []byte {
		return fmt.Appendf(nil, `{"session_id":%q,"transcript_path":"/t.jsonl","cwd":"/work","permission_mode":"default",`+
			`"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"go test ./..."},"tool_use_id":"toolu_%d"}`, session, i)
	}
	run := func(in []byte) (string, time.Duration) {
		cmd := exec.Command(bin, "hook", "claude-code", "--wait", "1m")
		cmd.Env = env
		cmd.Stdin = bytes.NewReader(in)
		start := time.Now()
		out, err := cmd.Output()
		took := time.Since(start)
		if err != nil {
			b.Fatalf("hook: %v", err)
		}
		return string(out), took
	}
	// approve makes the request the hook will ask for (the same key and
	// body) and approves it, before the hook runs.
	approve := func(in []byte) {
		p, err := hook.ParsePayload(in)
		if err != nil {
			b.Fatal(err)
		}
		call, err := hook.ClaudeCode.Call(p)
		if err != nil {
			b.Fatal(err)
		}
		var inst string
		list := c.call("GET", "/v1/instances", agent, "").want(b, 200, "instances")
		for _, it := range list.Body["items"].([]any) {
			if m := it.(map[string]any); m["name"] == hook.InstanceName("claude-code", session) {
				inst = m["id"].(string)
			}
		}
		body, _ := json.Marshal(map[string]any{"tool": call.Tool, "arguments": call.Arguments, "timeout": "60s", "context": call.Context})
		r := c.call("POST", "/v1/instances/"+inst+"/approval-requests", agent, string(body), "Idempotency-Key", call.Key).want(b, 201, "create")
		c.call("POST", "/v1/approval-requests/"+r.Str("id")+"/decision", reviewer, `{"status":"approved"}`).want(b, 200, "approve")
	}

	// One call first, so the hook has remembered the session's instance.
	approve(stdin(-1))
	if granted {
		var inst string
		for _, it := range c.call("GET", "/v1/instances", agent, "").want(b, 200, "instances").Body["items"].([]any) {
			if m := it.(map[string]any); m["name"] == hook.InstanceName("claude-code", session) {
				inst = m["id"].(string)
			}
		}
		c.call("POST", "/v1/grants", reviewer, `{"tool":"Bash","instance_id":"`+inst+`","arguments":{"command":"go test ./..."},"expires_in":"1h"}`).
			want(b, 201, "grant")
		approve = func([]byte) {}
	}
	if out, _ := run(stdin(-1)); !strings.Contains(out, `"allow"`) {
		b.Fatalf("warm-up answer %s", out)
	}
	times, starts := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		in := stdin(i)
		approve(in)
		b.StartTimer()
		out, took := run(in)
		b.StopTimer()
		if !strings.Contains(out, `"permissionDecision":"allow"`) {
			b.Fatalf("answer %s, want allow", out)
		}
		times = append(times, took)
		// The floor on a machine as loaded as this one now: the same
		// binary starting and exiting (`airlock version`), untimed.
		start := time.Now()
		if err := exec.Command(bin, "version").Run(); err != nil {
			b.Fatal(err)
		}
		starts = append(starts, time.Since(start))
		b.StartTimer()
	}
	b.StopTimer()
	pct := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(times, 0.50), "p50-ms")
	b.ReportMetric(pct(times, 0.99), "p99-ms")
	b.ReportMetric(pct(starts, 0.50), "start-p50-ms")
	b.ReportMetric(pct(starts, 0.99), "start-p99-ms")
}
