package main

import (
	"bytes"
	"encoding/json"
	"math"
	"runtime"
	"strings"
	"testing"
)

// TestBenchJSON runs a short `airlock bench --json` in-process and checks
// the report's shape.
func TestBenchJSON(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	app := &App{Stdout: &stdout, Stderr: &stderr}
	err := app.Run(t.Context(), []string{"bench", "--duration", "30s", "--count", "6", "--clients", "2", "--json"})
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}
	var rep struct {
		Scenario   string  `json:"scenario"`
		Target     string  `json:"target"`
		Ops        int     `json:"ops"`
		Errors     int     `json:"errors"`
		OpsPerS    float64 `json:"ops_per_s"`
		RatioToRaw float64 `json:"ratio_to_raw"`
		// The server runs in a process of its own, measured apart.
		ServerCPU float64 `json:"server_cpu_us_per_op"`
		ClientCPU float64 `json:"client_cpu_us_per_op"`
		LatencyMS struct {
			P50, P90, P99, Max float64
		} `json:"latency_ms"`
		Raw *struct {
			OpsPerS     float64 `json:"ops_per_s"`
			Connections int     `json:"connections"`
		} `json:"raw"`
		Bounds struct {
			DurationS float64 `json:"duration_s"`
			Count     int     `json:"count"`
		} `json:"bounds"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout.String())
	}
	switch {
	case rep.Scenario != "lifecycle" || rep.Target != "in-process":
		t.Errorf("report of %q on %q, want lifecycle in-process", rep.Scenario, rep.Target)
	case rep.Ops != 6 || rep.Errors != 0:
		t.Errorf("%d ops, %d errors; want the count bound of 6 and none", rep.Ops, rep.Errors)
	case rep.Raw == nil || rep.Raw.OpsPerS <= 0 || rep.RatioToRaw <= 0:
		t.Errorf("no raw baseline or ratio_to_raw in the default lifecycle report:\n%s", stdout.String())
	case rep.LatencyMS.P99 <= 0 || rep.LatencyMS.Max < rep.LatencyMS.P99:
		t.Errorf("latency %+v", rep.LatencyMS)
	case rep.Bounds.DurationS != 30 || rep.Bounds.Count != 6:
		t.Errorf("bounds %+v, want 30s and 6", rep.Bounds)
	}
	// The server runs in a process of its own, whose CPU the run reads from
	// /proc/<pid>/stat in clock ticks of 10 ms (cmd/airlock/internal/bench/proc.go). Six
	// lifecycles take a server about 5 ms of CPU (docs/performance.md:
	// 0.8 to 1.2 ms each), so its figure is a whole number of ticks over
	// six, and zero as often as not: demanding more than zero would fail
	// by tick granularity, not by a fault. What holds on every run: the
	// run read the server process's CPU (client_cpu_us_per_op is reported
	// only when it did; this process's CPU, read with getrusage to the
	// microsecond, is never zero), and the server's figure is a
	// non-negative whole number of that process's ticks, not this
	// process's microseconds. The bench package's TestLifecycleWithBaseline
	// runs enough lifecycles to see the ticks themselves.
	if runtime.GOOS == "linux" {
		const tickUS = 10_000
		total := rep.ServerCPU * float64(rep.Ops) // µs, rounded to 0.1 µs per op
		ticks := math.Round(total / tickUS)
		if rep.ClientCPU <= 0 || rep.ServerCPU < 0 || math.Abs(total-ticks*tickUS) > 0.05*float64(rep.Ops)+0.001 {
			t.Errorf("server CPU %v µs/op over %d ops, client %v µs/op: want the client's measured and the server's a whole number of 10 ms ticks\n%s",
				rep.ServerCPU, rep.Ops, rep.ClientCPU, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "raw baseline") {
		t.Errorf("progress on stderr does not mention the raw baseline:\n%s", stderr.String())
	}
}

// TestBenchTable runs a short create benchmark and checks the table.
func TestBenchTable(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	app := &App{Stdout: &stdout, Stderr: &stderr}
	if err := app.Run(t.Context(), []string{"bench", "--scenario", "create", "--count", "4", "--clients", "2"}); err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"airlock bench create", "airlock create", "ops/s", "p99 ms"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
	if strings.Contains(stdout.String(), "ratio to raw") {
		t.Errorf("create ran the raw baseline:\n%s", stdout.String())
	}
}

// TestBenchRefusals checks invocations `airlock bench` refuses before
// generating any load: they exit 2 and say what to change.
func TestBenchRefusals(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--url", "http://192.0.2.1:8080", "--token", "secret-admin-token"}, nil, "--allow-remote"},
		{nil, map[string]string{"AIRLOCK_URL": "http://example.com", "AIRLOCK_TOKEN": "x"}, "--allow-remote"},
		{[]string{"--db", "postgres://u:pw@192.0.2.1:5432/db"}, nil, "--allow-remote"},
		{[]string{"--duration", "2h"}, nil, "--duration"},
		{[]string{"--count", "20000000"}, nil, "--count"},
		{[]string{"--scenario", "soak"}, nil, "--scenario"},
		{[]string{"--url", "http://127.0.0.1:1"}, nil, "--token"},
		{[]string{"--url", "http://127.0.0.1:1", "--token", "x", "--server-pid", "1073741824"}, nil, "--server-pid 1073741824: cannot read its CPU time"},
		{[]string{"--server-pid", "1"}, nil, "--server-pid 1 goes with --url"},
	} {
		var stderr bytes.Buffer
		app := &App{Stdout: &bytes.Buffer{}, Stderr: &stderr, LookupEnv: mapEnv(tt.env)}
		err := app.Run(t.Context(), append([]string{"bench"}, tt.args...))
		if code := exitCode(app, err); code != exitUsage || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("bench %q (env %v): exit %d, stderr %q; want exit 2 naming %s", tt.args, tt.env, code, stderr.String(), tt.want)
		}
		if strings.Contains(stderr.String(), ":pw@") {
			t.Errorf("bench %q printed the database password: %s", tt.args, stderr.String())
		}
	}
}

// TestBenchHelp checks that `airlock help bench` lists its flags.
func TestBenchHelp(t *testing.T) {
	t.Parallel()
	var stdout bytes.Buffer
	app := &App{Stdout: &stdout, Stderr: &bytes.Buffer{}}
	if err := app.Run(t.Context(), []string{"help", "bench"}); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--scenario", "--url", "--token", "--db", "--clients", "--duration", "--count", "--rate", "--raw", "--json", "--allow-remote", "--server-pid", "AIRLOCK_DURATION", "tokens_ratio"} {
		if !strings.Contains(stdout.String(), flag) {
			t.Errorf("help bench does not mention %s:\n%s", flag, stdout.String())
		}
	}
}
