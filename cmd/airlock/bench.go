package main

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/airlockhq/airlock/cmd/airlock/internal/bench"
	"github.com/airlockhq/airlock/internal/heapfloor"
)

// runBench is `airlock bench`: a load generator in the spirit of pgbench.
// Without --url it starts a server in-process on a temporary store (a
// SQLite file, or a fresh schema of the PostgreSQL database --db names)
// and removes it afterwards. Progress goes to stderr; the report (a table,
// or --json) to stdout.
func runBench(ctx context.Context, a *App, args []string) error {
	fs := a.newFlagSet("bench")
	scenario := fs.String("scenario", bench.Lifecycle, "lifecycle (create → approve → read), create, wait (long-poll waiters), expiry (requests due together), mcp (approval_request over /mcp with the Go SDK client at MCP revisions 2026-07-28 and 2025-11-25 in interleaved passes: revision_ratio, and the server CPU per call at each, revision_cpu_ratio; with --half-max at 2026-07-28 only), grant (a create a reviewer's grant approves → claim), claim (create → approve → claim, with approval tokens and without in interleaved passes: tokens_ratio) consume (a tool server's consume of a fresh approval token, held to its call) audit (lifecycles with the audit log's sequencer on and off in interleaved passes: log_ratio) or push (lifecycles with the delivery engine on and off and no push subscription: push_ratio; then creates pushed to a local push service that decrypts them, at the maximum and at half of it: push lag) or scale (on --db postgres://…: --count pending requests seeded through the store, then the reviewer's first page and an instance's pending count read across --replicas)")
	urls := fs.String("url", "", "drive running servers at these URLs (comma-separated replicas) instead of one started in-process")
	token := fs.String("token", "", "an admin token of the --url server: the run mints an agent and a reviewer token with it and revokes them after")
	db := fs.String("db", "", "store of the in-process server and of the raw baseline: a SQLite file path that does not exist yet (default a temporary file), or a postgres:// URL (the run uses a fresh schema and drops it)")
	replicas := fs.Int("replicas", 1, "in-process servers sharing the store (PostgreSQL only); clients take them in turn")
	clients := fs.Int("clients", 0, "concurrent clients (default 8; grant: 1); for wait, the number of idle long-poll waiters (default 100)")
	var duration time.Duration
	durationVar(fs, &duration, "duration", bench.DefaultDuration, "bound on the measured time of the run (push: half for its lifecycle passes, a quarter each for its creates at the maximum and at half of it)")
	count := fs.Int("count", 0, "bound on operations (lifecycle, create, mcp, grant, claim, audit, push: default 1000000; claim and audit share it out among their passes, push half among its lifecycle passes and half among its creates; consume: the tokens made before the clock starts, default 5000); wait: decision rounds (default 200); expiry: requests due together (default 10000); scale: pending requests seeded (default 100000, at most 1000000)")
	rate := fs.Float64("rate", 0, "pace lifecycle, create, mcp, grant or consume at this many operations per second in all (0: as fast as the clients go), e.g. half the maximum to read latency at that load")
	halfMax := fs.Bool("half-max", false, "lifecycle, create, mcp, grant or consume: run as fast as the clients go to find the maximum, then paced at half of it (the latency target's load), and report both")
	raw := fs.Bool("raw", false, "run only the raw baseline: a lifecycle's durable work in direct SQL on --db's kind of store")
	baseline := fs.Bool("baseline", true, "with lifecycle, also run the raw baseline in the same process and report ratio_to_raw")
	httpBaseline := fs.Bool("http-baseline", false, "with the raw baseline, also run it over HTTP (its statements behind a minimal handler in a process of its own, driven by the same HTTP client) and report raw_http_to_raw (what HTTP costs), ratio_to_raw_http (what Airlock adds) and server_cpu_ratio_to_raw_http (the two servers' CPU per lifecycle); with consume, run a minimal handler that verifies each approval token and records its use in one insert, and report the same two ratios")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	allowRemote := fs.Bool("allow-remote", false, "allow --url and --db targets that are not on this machine")
	webhooks := fs.Int("webhooks", 0, "with lifecycle: add this many local webhook receivers, and report the lifecycle without, with one and with all of them, the delivery lag from commit at half the maximum, and a backlog drain measured against bare signed POSTs")
	backlog := fs.Int("backlog", 0, "with --webhooks: deliveries to queue to one endpoint for the drain (default 100000)")
	serverPID := fs.Int("server-pid", 0, "with --url: the process ID of that server, on this machine; the run reads its CPU time (Linux /proc) and reports server_cpu_us_per_op apart from the clients' (a run without --url measures its own server so)")
	policyFile := fs.String("policy", "", "a policy file the in-process servers load (docs/policy.md), to measure what its rules cost; run once with and once without it")
	groups := fs.Int("groups", 0, "with scale: also seed this many reviewer groups of 20 reviewers each, routed to by a policy rule each, and time creates routed to them (at most 1000)")
	explain := fs.Bool("explain-store", false, "with lifecycle on --db postgres://…: count what a lifecycle asks of PostgreSQL (transactions, statements, their execution time and WAL with pg_stat_statements, rows and index entries written, WAL) beside the raw baseline's")
	cpuProfile := fs.String("cpuprofile", "", "write the CPU profile (go tool pprof) of each server the run starts in a process of its own to this new file, from its start to its stop, setup included; replica i's to the name with .i before its extension; consume profiles its server over the measured consumes only (with --half-max, the maximum's to the name with .max before its extension); expiry and scale, whose servers run in the bench's process, profile that process over their measured phases (scale's expiry to the name with .expiry before its extension)")
	if err := a.parseFlags(fs, args); err != nil {
		return err
	}
	cfg := bench.Config{
		Scenario: *scenario, Token: *token, DB: *db, Replicas: *replicas, Clients: *clients,
		Duration: duration, Count: *count, Rate: *rate, HalfMax: *halfMax, Baseline: *baseline, HTTPBaseline: *httpBaseline, AllowRemote: *allowRemote, Policy: *policyFile, Progress: a.Stderr,
		Webhooks: *webhooks, Backlog: *backlog, ServerPID: *serverPID, ExplainStore: *explain, CPUProfile: *cpuProfile, Groups: *groups,
	}
	if *raw {
		cfg.Scenario = bench.Raw
	}
	for u := range strings.SplitSeq(*urls, ",") {
		if u = strings.TrimSpace(u); u != "" {
			cfg.URLs = append(cfg.URLs, u)
		}
	}
	if err := cfg.Validate(); err != nil {
		return &usageError{msg: err.Error()}
	}
	// The load generator's collections would add to the latencies it
	// measures; its in-process servers and baselines are tuned as serve is.
	defer heapfloor.Start(heapfloor.DefaultFloor)()
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(a.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.WriteTable(a.Stdout)
	return nil
}
