package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
)

func TestMain(m *testing.M) {
	// A run re-executes this test binary as its server, and the tests of
	// child processes as the processes they need.
	switch {
	case IsChild():
		os.Exit(ChildMain())
	case os.Getenv(burnEnv) != "":
		os.Exit(burnMain())
	case os.Getenv(runEnv) != "":
		os.Exit(runMain())
	}
	testkit.Main(m)
}

// short is a run small enough for -race on two cores.
func short(scenario string) Config {
	return Config{Scenario: scenario, Clients: 2, Duration: 20 * time.Second, Count: 12}
}

func run(t *testing.T, cfg Config) *Report {
	t.Helper()
	var progress bytes.Buffer
	cfg.Progress = &progress
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run(%s): %v\nprogress:\n%s", cfg.Scenario, err, progress.String())
	}
	return rep
}

// checkResult checks a measured stream: ops within the count bound, no
// errors, and latencies in order.
func checkResult(t *testing.T, name string, res Result, maxOps int) {
	t.Helper()
	l := res.LatencyMS
	switch {
	case res.Ops <= 0 || res.Ops > int64(maxOps):
		t.Errorf("%s: %d ops, want 1..%d", name, res.Ops, maxOps)
	case res.Errors != 0:
		t.Errorf("%s: %d errors %v", name, res.Errors, res.ErrorKinds)
	case res.OpsPerS <= 0 || res.ElapsedS <= 0:
		t.Errorf("%s: %.1f ops/s over %.3fs", name, res.OpsPerS, res.ElapsedS)
	case !(0 < l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.Max):
		t.Errorf("%s: latencies out of order: %+v", name, l)
	}
}

// TestLifecycleWithBaseline runs the lifecycle scenario in-process, with
// the raw baseline after it, and checks the report and its JSON.
//
// It runs apart from the package's parallel tests: it compares the process's
// CPU per operation across runs, which other tests in the process would add to.
func TestLifecycleWithBaseline(t *testing.T) {
	cfg := short(Lifecycle)
	// Enough lifecycles for each server to use some clock ticks of CPU.
	cfg.Count = 40
	cfg.Baseline, cfg.HTTPBaseline = true, true
	var pids []int // set before Run returns, read after
	cfg.onChild = func(pid int) { pids = append(pids, pid) }
	rep := run(t, cfg)
	checkResult(t, "lifecycle", rep.Result, cfg.Count)
	if rep.Ops != int64(cfg.Count) {
		t.Errorf("lifecycle ran %d ops, want the count bound %d (the duration bound is far)", rep.Ops, cfg.Count)
	}
	if rep.Raw == nil {
		t.Fatal("no raw baseline in a lifecycle report")
	}
	checkResult(t, "raw", rep.Raw.Result, cfg.Count)
	if rep.Raw.Connections != 1 || rep.Raw.Store != "sqlite" {
		t.Errorf("raw baseline on %s with %d connections, want sqlite with 1", rep.Raw.Store, rep.Raw.Connections)
	}
	if want := round(rep.OpsPerS/rep.Raw.OpsPerS, 3); rep.RatioToRaw != want {
		t.Errorf("ratio_to_raw %v, want %v", rep.RatioToRaw, want)
	}
	if rep.RawHTTP == nil {
		t.Fatal("no raw baseline over HTTP in a lifecycle report with HTTPBaseline")
	}
	checkResult(t, "raw over HTTP", rep.RawHTTP.Result, cfg.Count)
	if rep.RawHTTP.Transport != "http" || rep.RawHTTP.Store != "sqlite" || rep.Raw.Transport != "" {
		t.Errorf("raw baselines over %q on %s and over %q, want http on sqlite and direct", rep.RawHTTP.Transport, rep.RawHTTP.Store, rep.Raw.Transport)
	}
	if want := round(rep.RawHTTP.OpsPerS/rep.Raw.OpsPerS, 3); rep.RawHTTPToRaw != want {
		t.Errorf("raw_http_to_raw %v, want %v", rep.RawHTTPToRaw, want)
	}
	if want := round(rep.OpsPerS/rep.RawHTTP.OpsPerS, 3); rep.RatioToRawHTTP != want {
		t.Errorf("ratio_to_raw_http %v, want %v", rep.RatioToRawHTTP, want)
	}
	if rep.Commits == nil || rep.Commits.Ops < 2*int64(cfg.Count) || rep.Commits.Commits == 0 {
		t.Errorf("SQLite write counters %+v, want at least 2 writes per lifecycle", rep.Commits)
	}

	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"scenario", "target", "store", "clients", "ops", "errors", "ops_per_s", "elapsed_s",
		"latency_ms.p50", "latency_ms.p90", "latency_ms.p99", "latency_ms.max", "bounds.duration_s", "bounds.count",
		"raw.ops_per_s", "raw.connections", "raw.latency_ms.p99", "ratio_to_raw", "commits.ops_per_commit",
		"machine.cpus", "machine.load_before", "machine.load_after",
		"process_cpu_us_per_op", "raw.process_cpu_us_per_op",
		"raw_http.ops_per_s", "raw_http.transport", "raw_http_to_raw", "ratio_to_raw_http",
		"server_cpu_us_per_op", "client_cpu_us_per_op", "raw_http.server_cpu_us_per_op", "raw_http.client_cpu_us_per_op",
		"server_cpu_ratio_to_raw_http"} {
		if lookup(m, path) == nil {
			t.Errorf("JSON report has no %s:\n%s", path, b)
		}
	}
	if m["scenario"] != "lifecycle" || m["target"] != "in-process" || m["store"] != "sqlite" {
		t.Errorf("JSON report names %v on %v with %v", m["scenario"], m["target"], m["store"])
	}

	var table bytes.Buffer
	rep.WriteTable(&table)
	// Airlock's server and the raw baseline's over HTTP ran in processes
	// of their own, measured apart from the clients, and stopped with
	// the run; the direct raw baseline has no server.
	if len(pids) != 2 {
		t.Errorf("the run started %d server processes, want 2 (Airlock, raw over HTTP)", len(pids))
	}
	for _, pid := range pids {
		if procCPUAvailable() && !gone(pid) {
			t.Errorf("the server process %d outlived its run", pid)
		}
	}
	if procCPUAvailable() {
		for name, res := range map[string]Result{"lifecycle": rep.Result, "raw over HTTP": rep.RawHTTP.Result} {
			if res.ServerCPUPerOpUS <= 0 || res.ClientCPUPerOpUS <= 0 || res.ClientCPUPerOpUS != res.CPUPerOpUS {
				t.Errorf("%s: server CPU %.1f µs/op, client %.1f µs/op (process %.1f); want both measured, the client's the process's",
					name, res.ServerCPUPerOpUS, res.ClientCPUPerOpUS, res.CPUPerOpUS)
			}
		}
		if want := round(rep.ServerCPUPerOpUS/rep.RawHTTP.ServerCPUPerOpUS, 3); rep.ServerCPURatioToRawHTTP != want {
			t.Errorf("server_cpu_ratio_to_raw_http %v, want %v", rep.ServerCPURatioToRawHTTP, want)
		}
	}
	if rep.Raw.ServerCPUPerOpUS != 0 || rep.Raw.ClientCPUPerOpUS != 0 {
		t.Errorf("the direct raw baseline, with no server, has server CPU %v and client CPU %v", rep.Raw.ServerCPUPerOpUS, rep.Raw.ClientCPUPerOpUS)
	}
	// CPU is measured for each part. Which part costs more is a
	// measurement, not something a test of a short run on a shared
	// machine can pin: a burst of other work lands in any of them.
	if rep.CPUPerOpUS <= 0 || rep.ServerCPUPerOpUS <= 0 || rep.Raw.CPUPerOpUS <= 0 || rep.RawHTTP.CPUPerOpUS+rep.RawHTTP.ServerCPUPerOpUS <= 0 {
		t.Errorf("CPU per lifecycle: airlock %.1f + %.1f µs, raw %.1f µs, raw over HTTP %.1f + %.1f µs; want each measured", rep.CPUPerOpUS, rep.ServerCPUPerOpUS,
			rep.Raw.CPUPerOpUS, rep.RawHTTP.CPUPerOpUS, rep.RawHTTP.ServerCPUPerOpUS)
	}
	for _, want := range []string{"airlock lifecycle", "raw (1 conn)", "raw over HTTP (1 conn, 2 clients)", "ratio to raw", "what Airlock adds", "p99 ms", "CPU µs/op", "server µs/op", "server CPU per op, airlock ÷ raw over HTTP"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

// TestRawWithHTTPBaseline runs the raw scenario alone with the raw
// baseline over HTTP beside it: both measured, one ratio between them, and
// no Airlock ratio claimed for a run that had no Airlock in it.
func TestRawWithHTTPBaseline(t *testing.T) {
	t.Parallel()
	cfg := short(Raw)
	cfg.HTTPBaseline = true
	rep := run(t, cfg)
	checkResult(t, "raw", rep.Result, cfg.Count)
	if rep.RawHTTP == nil {
		t.Fatal("no raw baseline over HTTP beside the raw scenario")
	}
	checkResult(t, "raw over HTTP", rep.RawHTTP.Result, cfg.Count)
	if want := round(rep.RawHTTP.OpsPerS/rep.OpsPerS, 3); rep.RawHTTPToRaw != want || rep.RatioToRawHTTP != 0 {
		t.Errorf("raw_http_to_raw %v (want %v), ratio_to_raw_http %v (want none)", rep.RawHTTPToRaw, want, rep.RatioToRawHTTP)
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	if out := table.String(); !strings.Contains(out, "what HTTP itself costs") || strings.Contains(out, "what Airlock adds") {
		t.Errorf("table of a raw run with its HTTP baseline:\n%s", out)
	}
}

// lookup follows a dotted path in decoded JSON.
func lookup(m map[string]any, path string) any {
	var v any = m
	for _, k := range strings.Split(path, ".") {
		o, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = o[k]
	}
	return v
}

// TestScenarios runs create, mcp and raw briefly.
func TestScenarios(t *testing.T) {
	t.Parallel()
	for _, s := range []string{Create, MCP, Raw} {
		t.Run(s, func(t *testing.T) {
			t.Parallel()
			rep := run(t, short(s))
			checkResult(t, s, rep.Result, 12)
			if rep.Raw != nil {
				t.Errorf("%s ran the raw baseline, which belongs to lifecycle", s)
			}
		})
	}
}

// TestDurationBound gives a run a far count and a short duration: it must
// stop at the duration.
func TestDurationBound(t *testing.T) {
	t.Parallel()
	cfg := Config{Scenario: Create, Clients: 2, Duration: 300 * time.Millisecond, Count: MaxOps}
	start := time.Now()
	rep := run(t, cfg)
	if rep.ElapsedS < 0.3 || rep.ElapsedS > 10 {
		t.Errorf("a 300ms run measured for %.3fs", rep.ElapsedS)
	}
	if took := time.Since(start); took > time.Minute {
		t.Errorf("a 300ms run took %s in all", took)
	}
	if rep.Ops <= 0 || rep.Ops >= MaxOps {
		t.Errorf("%d ops", rep.Ops)
	}
}

// TestRate paces creates at 40 per second: 20 of them take half a second,
// not as little as the server allows.
func TestRate(t *testing.T) {
	t.Parallel()
	rep := run(t, Config{Scenario: Create, Clients: 4, Count: 20, Duration: 20 * time.Second, Rate: 40})
	checkResult(t, "paced create", rep.Result, 20)
	if rep.Ops != 20 || rep.ElapsedS < 0.45 || rep.Bounds.Rate != 40 {
		t.Errorf("%d creates paced at 40/s measured over %.3fs (bounds %+v), want 20 over about 0.5s", rep.Ops, rep.ElapsedS, rep.Bounds)
	}
	if l := rep.StartLagMS; l == nil || l.Max < l.P50 || l.Max > rep.LatencyMS.Max {
		t.Errorf("start lag %+v: want one, within the latency (max %.2f ms) it is part of", l, rep.LatencyMS.Max)
	}
}

// TestHalfMax finds the maximum of creates, bounded by count, then paces
// the same count at half of it: the second run takes about twice as long.
func TestHalfMax(t *testing.T) {
	t.Parallel()
	rep := run(t, Config{Scenario: Create, Clients: 2, Count: 60, Duration: 30 * time.Second, HalfMax: true})
	if rep.Max == nil {
		t.Fatal("no maximum in the report")
	}
	checkResult(t, "unpaced create", *rep.Max, 60)
	checkResult(t, "create at half", rep.Result, 60)
	if want := math.Round(rep.Max.OpsPerS / 2); rep.Bounds.Rate != want || rep.StartLagMS == nil {
		t.Errorf("paced at %g/s with start lag %v, want %g/s (half of %.1f)", rep.Bounds.Rate, rep.StartLagMS, want, rep.Max.OpsPerS)
	}
	// 60 operations due at 0, 1/rate, …: the last is due at 59/rate.
	if minS := 59 / rep.Bounds.Rate; rep.ElapsedS < minS {
		t.Errorf("the paced run took %.3fs, less than the %.3fs its schedule needs", rep.ElapsedS, minS)
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	for _, want := range []string{"maximum, unpaced", "at half:", "after they were due"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

// TestWait runs the wait scenario with a few waiters and rounds. It is
// not parallel: it measures the process's memory, which other tests'
// allocations would disturb.
func TestWait(t *testing.T) {
	rep := run(t, Config{Scenario: Wait, Clients: 20, Count: 5, Duration: 20 * time.Second})
	x := rep.Wait
	if x == nil {
		t.Fatal("no wait report")
	}
	if x.Waiters != 20 || x.Answered != 20 || rep.Errors != 0 {
		t.Errorf("%d waiters, %d answered by the broadcast, errors %v; want 20, 20, none", x.Waiters, x.Answered, rep.ErrorKinds)
	}
	if x.Rounds != 5 || x.WaiterMS.P50 <= 0 || x.DecisionMS.P50 <= 0 {
		t.Errorf("%d rounds, waiter %+v, decision %+v", x.Rounds, x.WaiterMS, x.DecisionMS)
	}
	if x.BroadcastMS <= 0 || x.BroadcastMS < x.BroadcastCallMS-1 {
		t.Errorf("broadcast answered all in %v ms, its call took %v ms", x.BroadcastMS, x.BroadcastCallMS)
	}
	// With 20 waiters the memory figures are mostly noise (a GC's
	// fluctuation divided by 20); the docs measure 10,000.
	if x.GrossBytesPerWaiter == 0 || x.MemorySource == "" {
		t.Errorf("memory per waiter not measured: %+v", x)
	}
	if x.Transport != "tcp" {
		t.Errorf("20 waiters went over %s, want tcp", x.Transport)
	}
}

// TestWaitReplicas runs the wait scenario over three replicas on
// PostgreSQL: the waiters take the replicas in turn, and the one change on
// the first answers those waiting on the other two as well. 30 a replica
// come at once from one address with a token the second and third have
// not seen, more than the authentication guard lets through at a time
// unless the run shows each replica the token first. Not parallel, as
// TestWait.
func TestWaitReplicas(t *testing.T) {
	db := testkit.PostgresURL(t)
	rep := run(t, Config{Scenario: Wait, DB: db, Replicas: 3, Clients: 90, Count: 3, Duration: 20 * time.Second})
	x := rep.Wait
	if x == nil {
		t.Fatal("no wait report")
	}
	if x.Waiters != 90 || x.Answered != 90 || rep.Errors != 0 {
		t.Errorf("%d waiters, %d answered by the broadcast, errors %v; want 90, 90, none", x.Waiters, x.Answered, rep.ErrorKinds)
	}
	if !slices.Equal(x.PerServer, []int{30, 30, 30}) {
		t.Errorf("waiters per server %v, want 30 on each of 3", x.PerServer)
	}
	if w := x.WokenMS; !(0 < w.P50 && w.P50 <= w.P99 && w.P99 <= w.Max && w.Max <= x.BroadcastMS+0.001) {
		t.Errorf("each waiter woken %+v, the last %v ms after the change", w, x.BroadcastMS)
	}
	if x.FDLimit < 2*90+512 || x.Transport != "tcp" {
		t.Errorf("%d waiters over %s with %d open files allowed", x.Waiters, x.Transport, x.FDLimit)
	}
}

// TestDialFromSpreadsSources checks that waiters past waitersPerSource
// connect from the next loopback address: the ephemeral ports of one
// source address run out near 28,000 connections to one server.
func TestDialFromSpreadsSources(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for i, want := range map[int]string{0: "127.0.0.1", waitersPerSource - 1: "127.0.0.1", waitersPerSource: "127.0.0.2", 3 * waitersPerSource: "127.0.0.4"} {
		c, err := dialFrom(t.Context(), i, ln.Addr().String())
		if err != nil {
			t.Fatalf("waiter %d: %v", i, err)
		}
		if got := c.LocalAddr().(*net.TCPAddr).IP.String(); got != want {
			t.Errorf("waiter %d connected from %s, want %s", i, got, want)
		}
		c.Close()
	}
}

// TestExpiry runs the expiry scenario with a few hundred requests.
func TestExpiry(t *testing.T) {
	t.Parallel()
	rep := run(t, Config{Scenario: Expiry, Clients: 4, Count: 300, Duration: 30 * time.Second})
	x := rep.Expiry
	if x == nil {
		t.Fatal("no expiry report")
	}
	if x.Pending != 300 || x.ExpiredPerS <= 0 || x.Sweeps == 0 || x.MaxSweepMS <= 0 || x.MaxSweepRows == 0 {
		t.Errorf("expiry report %+v", x)
	}
	if x.Waiters != expiryWaiters || rep.Errors != 0 {
		t.Errorf("%d waiters heard expired (errors %v), want %d", x.Waiters, rep.ErrorKinds, expiryWaiters)
	}
	if x.WokenAfterDeadlineMS.P50 < 0 || x.LastExpiredAfterDeadlineMS < 0 {
		t.Errorf("woken %+v, last expired %v ms after the deadline: before it", x.WokenAfterDeadlineMS, x.LastExpiredAfterDeadlineMS)
	}
}

// TestRemoteServer drives a server through its URL and admin token, as
// `airlock bench --url --token` does, and checks that the tokens the run
// minted are revoked afterwards.
func TestRemoteServer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv, err := openTarget(ctx, Config{Clients: 2, Progress: &bytes.Buffer{}}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close(context.Background())

	cfg := short(Lifecycle)
	cfg.URLs, cfg.Token = []string{srv.urls[0] + "/"}, srv.admin
	if procCPUAvailable() {
		cfg.ServerPID = srv.children[0].pid
	}
	rep := run(t, cfg)
	checkResult(t, "lifecycle over --url", rep.Result, cfg.Count)
	if procCPUAvailable() && (rep.ServerCPUPerOpUS <= 0 || rep.ClientCPUPerOpUS != rep.CPUPerOpUS) {
		t.Errorf("over --url with --server-pid: server CPU %.1f µs/op, client %.1f µs/op (process %.1f); want the server's measured",
			rep.ServerCPUPerOpUS, rep.ClientCPUPerOpUS, rep.CPUPerOpUS)
	}
	if rep.Target != srv.urls[0] || rep.Store != "remote" || rep.Commits != nil {
		t.Errorf("report on %q, store %q, commits %v", rep.Target, rep.Store, rep.Commits)
	}
	var list struct {
		Items []struct {
			Name      string  `json:"name"`
			RevokedAt *string `json:"revoked_at"`
		} `json:"items"`
	}
	if err := srv.call(ctx, "GET", srv.urls[0], "/v1/tokens", srv.admin, "", &list); err != nil {
		t.Fatal(err)
	}
	// The server's own bench tokens stay live; the run's two are revoked.
	live, revoked := 0, 0
	for _, tok := range list.Items {
		if tok.Name != "airlock bench agent" && tok.Name != "airlock bench reviewer" {
			continue
		}
		if tok.RevokedAt == nil {
			live++
		} else {
			revoked++
		}
	}
	if live != 2 || revoked != 2 {
		t.Errorf("bench tokens after the run: %d live, %d revoked; want the server's 2 live and the run's 2 revoked", live, revoked)
	}

	cfg.Token, cfg.ServerPID = srv.agent, 0
	if _, err := Run(ctx, cfg); err == nil || !strings.Contains(err.Error(), "admin token") {
		t.Errorf("run with an agent token = %v, want an error asking for an admin token", err)
	}
}

// TestRefusals checks what a run refuses before doing anything: targets
// off this machine, unbounded or oversized runs, and an existing file.
func TestRefusals(t *testing.T) {
	t.Parallel()
	existing := filepath.Join(t.TempDir(), "real.db")
	if err := os.WriteFile(existing, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"remote URL", Config{URLs: []string{"http://192.0.2.1:8080"}, Token: "x"}, "--allow-remote"},
		{"remote host name", Config{URLs: []string{"https://airlock.example.com"}, Token: "x"}, "--allow-remote"},
		{"remote database", Config{DB: "postgres://u:secret@192.0.2.1/db"}, "--allow-remote"},
		{"URL without a token", Config{URLs: []string{"http://127.0.0.1:1"}}, "--token"},
		{"not an http URL", Config{URLs: []string{"ftp://127.0.0.1"}, Token: "x"}, "http://"},
		{"too long", Config{Duration: 2 * time.Hour}, "--duration"},
		{"negative duration", Config{Duration: -time.Second}, "--duration"},
		{"too many ops", Config{Count: MaxOps + 1}, "--count"},
		{"too many pending", Config{Scenario: Expiry, Count: MaxPending + 1}, "--count"},
		{"too large a scale", Config{Scenario: Scale, Count: MaxPending + 1, DB: "postgres://postgres@127.0.0.1:5432/test"}, "--count"},
		{"scale on SQLite", Config{Scenario: Scale}, "postgres://"},
		{"scale of a remote server", Config{Scenario: Scale, URLs: []string{"http://127.0.0.1:1"}, Token: "x", DB: "postgres://postgres@127.0.0.1:5432/test"}, "--url"},
		{"paced scale", Config{Scenario: Scale, Rate: 10, DB: "postgres://postgres@127.0.0.1:5432/test"}, "--rate"},
		{"too many groups", Config{Scenario: Scale, Groups: MaxGroups + 1, DB: "postgres://postgres@127.0.0.1:5432/test"}, "--groups"},
		{"groups without scale", Config{Scenario: Lifecycle, Groups: 5}, "--groups"},
		{"too many waiters", Config{Scenario: Wait, Clients: MaxWaiters + 1}, "--clients"},
		{"unknown scenario", Config{Scenario: "soak"}, "--scenario"},
		{"negative rate", Config{Rate: -1}, "--rate"},
		{"paced waiters", Config{Scenario: Wait, Rate: 10}, "--rate"},
		{"half-max expiry", Config{Scenario: Expiry, HalfMax: true}, "--half-max"},
		{"mcp with fewer calls than passes", Config{Scenario: MCP, Count: 3}, "--count must be at least 4 for mcp"},
		{"half-max and a rate", Config{Scenario: Create, HalfMax: true, Rate: 10}, "--half-max"},
		{"HTTP baseline of claims", Config{Scenario: Claim, HTTPBaseline: true}, "--http-baseline"},
		{"HTTP baseline of paced consumes", Config{Scenario: Consume, HTTPBaseline: true, HalfMax: true}, "--http-baseline"},
		{"replicas on SQLite", Config{Replicas: 3}, "PostgreSQL"},
		{"existing SQLite file", Config{DB: existing}, "already exists"},
		{"webhooks with creates", Config{Scenario: Create, Webhooks: 1}, "--webhooks"},
		{"explain on SQLite", Config{ExplainStore: true}, "postgres://"},
		{"explain of creates", Config{Scenario: Create, ExplainStore: true, DB: "postgres://postgres@127.0.0.1:5432/test"}, "--scenario lifecycle"},
		{"too many webhooks", Config{Webhooks: MaxWebhooks + 1}, "--webhooks"},
		{"webhooks to a remote server", Config{URLs: []string{"http://127.0.0.1:1"}, Token: "x", Webhooks: 1}, "--webhooks"},
		{"too large a backlog", Config{Webhooks: 1, Backlog: MaxBacklog + 1}, "--backlog"},
		{"server PID without a URL", Config{ServerPID: os.Getpid()}, "--server-pid"},
		{"server PID of no process", Config{URLs: []string{"http://127.0.0.1:1"}, Token: "x", ServerPID: 1 << 30}, "--server-pid 1073741824: cannot read its CPU time"},
		{"negative server PID", Config{URLs: []string{"http://127.0.0.1:1"}, Token: "x", ServerPID: -4}, "--server-pid must be a process ID"},
		{"server PID with waiters", Config{Scenario: Wait, URLs: []string{"http://127.0.0.1:1"}, Token: "x", ServerPID: os.Getpid()}, "--server-pid"},
	} {
		err := tt.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate = %v, want an error naming %s", tt.name, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error shows the password: %v", tt.name, err)
		}
		if _, err := Run(t.Context(), tt.cfg); err == nil {
			t.Errorf("%s: Run ran", tt.name)
		}
	}
	if b, _ := os.ReadFile(existing); string(b) != "precious" {
		t.Errorf("the existing file was touched: %q", b)
	}
	for _, cfg := range []Config{
		{URLs: []string{"http://192.0.2.1:8080"}, Token: "x", AllowRemote: true},
		{URLs: []string{"http://localhost:8080", "http://127.0.0.1:8081", "http://[::1]:8082"}, Token: "x"},
		{DB: "postgres://postgres@127.0.0.1:5432/test"},
		{DB: "postgres:///test?host=/var/run/postgresql"},
	} {
		if err := cfg.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want it accepted", cfg, err)
		}
	}
}

// TestWebhooks runs --webhooks small: the lifecycle without, with one and
// with two endpoints, the lag phase with every delivery of it received,
// and a drain of 300 deliveries.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	rep := run(t, Config{Scenario: Lifecycle, Clients: 2, Count: 15, Duration: 20 * time.Second, Webhooks: 2, Backlog: 300})
	x := rep.Webhooks
	if x == nil {
		t.Fatal("no webhooks in the report")
	}
	checkResult(t, "without", x.Without, 15)
	checkResult(t, "one endpoint", x.One, 15)
	if x.All == nil {
		t.Fatal("no run with both endpoints")
	}
	checkResult(t, "two endpoints", *x.All, 15)
	checkResult(t, "paced", x.Lag, 15)
	if x.OneToWithout <= 0 || x.AllToWithout <= 0 {
		t.Errorf("ratios %v, %v", x.OneToWithout, x.AllToWithout)
	}
	// Two events per lifecycle, to each of two endpoints.
	if want := 4 * x.Lag.Ops; x.Delivered != want || x.Undelivered != 0 {
		t.Errorf("lag over %d deliveries (%d undelivered), want %d", x.Delivered, x.Undelivered, want)
	}
	if l := x.LagMS; !(0 < l.P50 && l.P50 <= l.P99 && l.P99 <= l.Max) {
		t.Errorf("lag out of order: %+v", l)
	}
	if d := x.Drain; d == nil || d.Deliveries != 300 || d.Attempts < 300 || d.PerS <= 0 {
		t.Errorf("drain %+v, want 300 deliveries", d)
	} else if b := d.Bare; b == nil || b.Deliveries != 300 || b.PerS <= 0 || b.CPUPerDeliveryUS <= 0 || d.CPURatio <= 0 {
		t.Errorf("bare deliveries %+v, ratio %v: want 300 measured", b, d.CPURatio)
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	for _, want := range []string{"one endpoint", "delivery lag from commit", "backlog drain: 300 deliveries", "bare signed POST + row update: 300"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

// TestGrant runs the grant scenario on SQLite and on PostgreSQL: every
// create approved by the run's grant (the server counted one use per
// operation) and claimed. Then twice with creates the grant does not
// approve, which must be reported as errors, never measured: a grant of
// another tool (every create left pending: the run fails, saying why),
// and a grant of fewer uses than the run's operations.
func TestGrant(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Scenario: Grant, Duration: 20 * time.Second, Count: 12}
			if store == "postgres" {
				cfg.DB = testkit.PostgresURL(t)
			}
			rep := run(t, cfg)
			checkResult(t, "grant", rep.Result, cfg.Count)
			if rep.Clients != 1 || rep.Store != store || rep.Ops != int64(cfg.Count) {
				t.Errorf("%d ops at %d clients on %s, want %d at 1 on %s", rep.Ops, rep.Clients, rep.Store, cfg.Count, store)
			}
			if g := rep.Grant; g == nil || g.Grants != 1 || g.UsesCounted == nil || *g.UsesCounted != rep.Ops {
				t.Errorf("grant report %+v, want 1 grant with %d uses counted", g, rep.Ops)
			}
			var table bytes.Buffer
			rep.WriteTable(&table)
			for _, want := range []string{"airlock grant", "uses the server counted on them: 12"} {
				if !strings.Contains(table.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, table.String())
				}
			}
		})
	}
	t.Run("another tool", func(t *testing.T) {
		t.Parallel()
		cfg := Config{Scenario: Grant, Duration: 20 * time.Second, Count: 12, grantTool: "payments.charge", Progress: &bytes.Buffer{}}
		rep, err := Run(t.Context(), cfg)
		if err == nil || !strings.Contains(err.Error(), "not approved by the grant") || !strings.Contains(err.Error(), "is pending") {
			t.Errorf("run whose grant covers another tool = %+v, %v; want it failed, every create pending and not approved by the grant", rep, err)
		}
	})
	t.Run("too few uses", func(t *testing.T) {
		t.Parallel()
		rep := run(t, Config{Scenario: Grant, Duration: 20 * time.Second, Count: 12, grantUses: 5})
		if rep.Ops != 5 || rep.Errors != 7 || rep.ErrorKinds["not approved by the grant"] != 7 {
			t.Errorf("a grant of 5 uses over 12 operations: %d ops, %d errors %v; want 5 and 7 not approved by the grant", rep.Ops, rep.Errors, rep.ErrorKinds)
		}
		if g := rep.Grant; g == nil || g.Grants != 1 || g.UsesCounted == nil || *g.UsesCounted != 5 {
			t.Errorf("grant report %+v, want 1 grant with 5 uses counted", g)
		}
		var table bytes.Buffer
		rep.WriteTable(&table)
		if !strings.Contains(table.String(), "errors: not approved by the grant ×7") {
			t.Errorf("table does not report the unapproved creates:\n%s", table.String())
		}
	})
}

// TestExplainStore counts what lifecycles ask of PostgreSQL: the figures
// that depend on nothing else running (rows written in the run's own
// schema) are exact.
func TestExplainStore(t *testing.T) {
	t.Parallel()
	cfg := Config{Scenario: Lifecycle, Duration: 30 * time.Second, Count: 40, Clients: 2, Baseline: true,
		ExplainStore: true, DB: testkit.PostgresURL(t)}
	rep := run(t, cfg)
	checkResult(t, "lifecycle", rep.Result, cfg.Count)
	sc := rep.StoreCost
	if sc == nil || sc.Airlock == nil || sc.Raw == nil {
		t.Fatalf("store cost %+v, want Airlock's and the raw baseline's", sc)
	}
	if r := sc.Raw; r.Lifecycles != int64(cfg.Count) || r.RowsInserted != 1 || r.RowsUpdated != 1 || r.IndexEntries < 2 || r.WALRecords <= 0 {
		t.Errorf("raw baseline's cost %+v, want %d lifecycles of 1 insert and 1 update each, at least 2 index entries and some WAL", r, cfg.Count)
	}
	a := sc.Airlock
	var requests *TableCost
	for i := range a.Tables {
		if a.Tables[i].Table == "requests" {
			requests = &a.Tables[i]
		}
	}
	if a.Lifecycles != int64(cfg.Count) || requests == nil || requests.Inserted != 1 || requests.Updated < 1 || requests.Indexes < 2 {
		t.Errorf("Airlock's cost %+v (requests %+v), want %d lifecycles each inserting one request and updating it", a, requests, cfg.Count)
	}
	if a.RowsInserted <= 1 || a.IndexEntries <= a.RowsInserted {
		t.Errorf("Airlock writes %.2f rows and %.2f index entries a lifecycle; its events and the request alone are more", a.RowsInserted, a.IndexEntries)
	}
	// With pg_stat_statements, the statements' time and WAL are counted,
	// and listed by time.
	if a.Statements > 0 {
		if a.ExecMicros <= 0 || a.StatementWALRecords <= 0 || len(a.TopStatements) == 0 ||
			!slices.IsSortedFunc(a.TopStatements, func(x, y StatementCost) int { return cmp.Compare(y.ExecMicros, x.ExecMicros) }) {
			t.Errorf("Airlock's statements %.2f a lifecycle, %.1f µs, %.2f WAL records, top %+v; want their time and WAL, listed by time",
				a.Statements, a.ExecMicros, a.StatementWALRecords, a.TopStatements)
		}
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	for _, want := range []string{"What one lifecycle asks of PostgreSQL", "index entries, at most", "requests"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

// TestConsume runs the consume scenario briefly, with its baseline over
// HTTP: every op a consume of a token no one consumed before, each
// answered with its use, by Airlock and then by the minimal server.
func TestConsume(t *testing.T) {
	t.Parallel()
	rep := run(t, Config{Scenario: Consume, Clients: 4, Duration: 20 * time.Second, Count: 24, HTTPBaseline: true})
	checkResult(t, "consume", rep.Result, 24)
	if rep.Ops != 24 || rep.Errors != 0 {
		t.Errorf("%d consumes, %d errors %v; want 24 and none", rep.Ops, rep.Errors, rep.ErrorKinds)
	}
	rh := rep.RawHTTP
	if rh == nil {
		t.Fatal("no raw consume over HTTP in a consume report with HTTPBaseline")
	}
	checkResult(t, "raw consume over HTTP", rh.Result, 24)
	if rh.Ops != 24 || rh.Transport != "http" || rh.Clients != 4 {
		t.Errorf("raw consume over HTTP: %d ops over %q by %d clients; want 24 over http by 4", rh.Ops, rh.Transport, rh.Clients)
	}
	if want := round(rep.OpsPerS/rh.OpsPerS, 3); rep.RatioToRawHTTP != want || rep.RawHTTPToRaw != 0 {
		t.Errorf("ratio_to_raw_http %v (want %v), raw_http_to_raw %v (want none: consume has no direct baseline)", rep.RatioToRawHTTP, want, rep.RawHTTPToRaw)
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	for _, want := range []string{"airlock consume", "raw consume over HTTP (1 conn, 4 clients)", "airlock ÷ raw over HTTP"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if strings.Contains(table.String(), "raw over HTTP ÷ raw") {
		t.Errorf("table shows a ratio to a direct baseline consume does not run:\n%s", table.String())
	}
}

// TestStatementShare: the statements are told apart by their text, as
// pg_stat_statements keeps it.
func TestStatementShare(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ query, want string }{
		{"SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", "notify"},
		{"INSERT INTO audit_leaves (idx, event_id, leaf, leaf_hash) SELECT * FROM unnest($1::bigint[])", "sequencer"},
		{"SELECT pg_advisory_xact_lock($1, $2)", "settle"},
		{"SET LOCAL lock_timeout = 500", "settle"},
		{"SELECT coalesce(max(id), $1) FROM events", "settle"},
		{"WITH gate AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared($1, $2)) INSERT INTO events", ""},
		{"SELECT airlock_check_token($1, $2, $3, $4, $5)", ""},
	} {
		if got := statementShare(tc.query); got != tc.want {
			t.Errorf("statementShare(%q) = %q; want %q", tc.query, got, tc.want)
		}
	}
}
