package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what one run measured; `airlock bench --json` prints it.
type Report struct {
	Scenario string `json:"scenario"`
	// Target is "in-process" or the URLs driven; Store is sqlite or
	// postgres (unknown for a remote server).
	Target   string `json:"target"`
	Store    string `json:"store"`
	Replicas int    `json:"replicas,omitempty"`
	Clients  int    `json:"clients"`
	// Connections is the raw baseline's database connections.
	Connections int    `json:"connections,omitempty"`
	Bounds      Bounds `json:"bounds"`
	Result
	// Max is the unpaced run of --half-max, whose ops/s set the pace of
	// the run reported in Result (Bounds.Rate, half of it).
	Max *Result `json:"max,omitempty"`
	// Raw is the raw baseline run after a lifecycle run, and RatioToRaw
	// its ops/s over the baseline's.
	Raw        *RawReport `json:"raw,omitempty"`
	RatioToRaw float64    `json:"ratio_to_raw,omitempty"`
	// RawHTTP is the raw baseline over HTTP (Config.HTTPBaseline):
	// RawHTTPToRaw is its ops/s over the raw baseline's (what HTTP itself
	// costs), RatioToRawHTTP this run's ops/s over its (what Airlock adds
	// to HTTP).
	RawHTTP        *RawReport `json:"raw_http,omitempty"`
	RawHTTPToRaw   float64    `json:"raw_http_to_raw,omitempty"`
	RatioToRawHTTP float64    `json:"ratio_to_raw_http,omitempty"`
	// StoreCost is what a lifecycle asked of PostgreSQL, beside the raw
	// baseline's (Config.ExplainStore).
	StoreCost *StoreCosts `json:"store_cost,omitempty"`
	// ServerCPURatioToRawHTTP is this run's server CPU per operation over
	// the raw baseline over HTTP's server's: what Airlock's server spends
	// on a lifecycle against the least an HTTP server can, for the same
	// durable work.
	ServerCPURatioToRawHTTP float64 `json:"server_cpu_ratio_to_raw_http,omitempty"`
	// Commits counts the in-process SQLite store's write transactions:
	// ops per commit is how well group commit shared them.
	Commits *Commits      `json:"commits,omitempty"`
	Wait    *WaitReport   `json:"wait,omitempty"`
	Expiry  *ExpiryReport `json:"expiry,omitempty"`
	// Scale is what the scale scenario measured (scale.go).
	Scale *ScaleReport `json:"scale,omitempty"`
	// Webhooks is what Config.Webhooks measured.
	Webhooks *WebhookReport `json:"webhooks,omitempty"`
	// Grant is what the grant scenario's grants counted.
	Grant *GrantReport `json:"grant,omitempty"`
	// Claim is what the claim scenario measured: with approval tokens and
	// without, and tokens_ratio (claim.go). Result is its tokens-on part.
	Claim *ClaimReport `json:"claim,omitempty"`
	// Audit is the audit log's timing over the measured part (the paced
	// part of a --half-max run): each event's wait for its leaf, and the
	// tree's for a checkpoint (auditlag.go).
	Audit *AuditTiming `json:"audit,omitempty"`
	// AuditCompare is what the audit scenario measured: the lifecycle with
	// the audit log's sequencer on and off (audit.go).
	AuditCompare *AuditReport `json:"audit_compare,omitempty"`
	// MCP is what the mcp scenario measured: its calls at MCP revisions
	// 2026-07-28 and 2025-11-25, revision_ratio and revision_cpu_ratio
	// (mcp.go). Result is its 2026-07-28 part.
	MCP *MCPReport `json:"mcp,omitempty"`
	// Push is what the push scenario measured: push_ratio and push lag
	// (push.go). Result is its paced creates, Max its unpaced ones.
	Push    *PushReport `json:"push,omitempty"`
	Machine Machine     `json:"machine"`
}

// Bounds are the limits the run was given.
type Bounds struct {
	DurationS float64 `json:"duration_s"`
	Count     int     `json:"count"`
	// Rate is the paced rate (operations per second), 0 for as fast as
	// the clients go.
	Rate float64 `json:"rate,omitempty"`
}

// Result is a measured stream of operations.
type Result struct {
	Ops        int64            `json:"ops"`
	Errors     int64            `json:"errors"`
	ErrorKinds map[string]int64 `json:"error_kinds,omitempty"`
	ElapsedS   float64          `json:"elapsed_s"`
	OpsPerS    float64          `json:"ops_per_s"`
	LatencyMS  Latency          `json:"latency_ms"`
	// CPUPerOpUS is this process's CPU time (user and system) during the
	// run, per successful operation, in microseconds: the clients', and
	// with a server in this process (the wait, expiry and webhook runs,
	// and the direct raw baseline) also the server's and (SQLite) the
	// database engine's; never a server's in another process or
	// PostgreSQL's. 0 where the platform cannot tell.
	CPUPerOpUS float64 `json:"process_cpu_us_per_op,omitempty"`
	// ServerCPUPerOpUS is the CPU time (user and system) of the server in
	// another process, per successful operation, in microseconds: the
	// child process a run starts for its own server (all replicas'
	// together), or --server-pid's; on SQLite the database engine's with
	// it, never PostgreSQL's. Read from /proc before and after the run, to
	// one clock tick (10 ms in all). 0 where not measured.
	ServerCPUPerOpUS float64 `json:"server_cpu_us_per_op,omitempty"`
	// ClientCPUPerOpUS is, when ServerCPUPerOpUS is measured, this
	// process's CPU per operation (CPUPerOpUS): the load generator's
	// alone. It is left out where the server shares this process.
	ClientCPUPerOpUS float64 `json:"client_cpu_us_per_op,omitempty"`
	// StartLagMS, in a paced run, is how late operations started after
	// they were due: waiting for a free client. Latency counts it (it is
	// what a caller arriving then would see of a server that fell behind),
	// but when it is most of the latency the run had too few --clients to
	// keep to its pace, and the client pool, not the server, set the tail.
	StartLagMS *Latency `json:"start_lag_ms,omitempty"`
	// lat are the successful operations' latencies, sorted, so that the
	// claim scenario can sum passes (mergeResults).
	lat samples
}

// Latency is a distribution's percentiles, in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// RawReport is the raw baseline's result.
type RawReport struct {
	Store string `json:"store"`
	// Transport is "http" for the raw baseline over HTTP, empty for
	// direct SQL.
	Transport   string `json:"transport,omitempty"`
	Connections int    `json:"connections"`
	Clients     int    `json:"clients"`
	Result
}

// Commits are an in-process SQLite store's write counters.
type Commits struct {
	Ops          int64   `json:"ops"`
	Commits      int64   `json:"commits"`
	OpsPerCommit float64 `json:"ops_per_commit"`
	MaxBatch     int64   `json:"max_batch"`
}

// WaitReport is what the wait scenario measured.
type WaitReport struct {
	Waiters int `json:"waiters"`
	// Transport is how the waiters reach the server: tcp, or an in-memory
	// pipe when the process has too few file descriptors for two per
	// waiter (an in-process server holds both ends).
	Transport string `json:"transport"`
	// FDLimit is the run's limit on open files, raised to two per waiter
	// (and some) where the process may: an in-process server holds both
	// ends of every connection.
	FDLimit int `json:"fd_limit"`
	// PerServer are the long-polls each in-process server held once all
	// waited.
	PerServer []int `json:"per_server,omitempty"`
	// ServerBytesPerWaiter is the server's Go memory (live heap and
	// goroutine stacks, after a GC) per waiting long-poll: the growth with
	// every waiter in place, less what the same clients cost against a
	// listener that never answers. Measured in-process only; over --url it
	// is read from the server's /metrics without a GC, so it is rougher.
	ServerBytesPerWaiter float64 `json:"server_bytes_per_waiter"`
	// GrossBytesPerWaiter is the growth before subtracting the clients.
	GrossBytesPerWaiter float64 `json:"gross_bytes_per_waiter"`
	// GrossRSSPerWaiter is the process's resident memory (servers and
	// clients, Go and not) grown per waiter, in process only; the kernel's
	// socket buffers are not in it.
	GrossRSSPerWaiter float64 `json:"gross_rss_per_waiter,omitempty"`
	MemorySource      string  `json:"memory_source"`
	// IdleCPUPercent is the process's CPU (percent of one core) while
	// every waiter waits.
	IdleCPUPercent float64 `json:"idle_cpu_percent"`
	IdleWindowS    float64 `json:"idle_window_s"`
	// BroadcastMS is from the start of the first change that answers every
	// waiter (deleting the instance holding their requests) until the
	// last waiter has its answer; BroadcastCallMS is the calls' own time.
	BroadcastMS     float64 `json:"broadcast_ms"`
	BroadcastCallMS float64 `json:"broadcast_call_ms"`
	// Changes are the calls that answer every waiter: one a
	// waitPerInstance waiters, each deleting the instance that holds their
	// requests, made one after another from the first's start.
	Changes int `json:"changes"`
	// WokenMS is, for each waiter answered, from the start of the first
	// change until it had its answer.
	WokenMS  Latency `json:"woken_ms"`
	Answered int     `json:"answered"`
	// Rounds of one decision and one waiter: DecisionMS is the decision
	// call (its commit included), WaiterMS from the decision call's start
	// until the waiter has its answer, WaiterAfterDecisionMS from the
	// decision's response until the waiter's (negative: the waiter heard
	// first).
	Rounds                int     `json:"rounds"`
	DecisionMS            Latency `json:"decision_ms"`
	WaiterMS              Latency `json:"waiter_ms"`
	WaiterAfterDecisionMS Latency `json:"waiter_after_decision_ms"`
}

// ExpiryReport is what the expiry scenario measured.
type ExpiryReport struct {
	Pending int `json:"pending"`
	// DeadlineSpreadMS is from the first deadline to the last (they are
	// aimed at one instant; creation latency spreads them).
	DeadlineSpreadMS float64 `json:"deadline_spread_ms"`
	// LastExpiredAfterDeadlineMS is from the last deadline until the last
	// request was expired (committed).
	LastExpiredAfterDeadlineMS float64 `json:"last_expired_after_deadline_ms"`
	// ExpiredPerS is Pending over the time from the first deadline to the
	// last expiry.
	ExpiredPerS float64 `json:"expired_per_s"`
	// Sweeps are the store's ExpireDue calls that expired something
	// (in-process only): how many, the most rows one expired, and how long
	// the calls took, waiting for the writer included.
	Sweeps       int     `json:"sweeps,omitempty"`
	MaxSweepRows int     `json:"max_sweep_rows,omitempty"`
	MaxSweepMS   float64 `json:"max_sweep_ms,omitempty"`
	SweepP50MS   float64 `json:"sweep_p50_ms,omitempty"`
	SweepP99MS   float64 `json:"sweep_p99_ms,omitempty"`
	// SweepsOver60MS counts the sweep calls over the target for a sweep on
	// PostgreSQL, 60 ms (docs/performance.md, "Expiry of a large backlog").
	SweepsOver60MS int `json:"sweeps_over_60ms"`
	// LongestSweepAt is which of the sweep calls took longest (1 is the
	// first), as LongestHoldAt is for the writer's holds.
	LongestSweepAt int `json:"longest_sweep_at,omitempty"`
	// Transactions are the in-process SQLite store's write transactions
	// while requests expired, and MaxHoldMS the longest time one held the
	// writer (from asking for its lock to its durable commit);
	// HoldsOverBound how many held it longer than the target for a sweep
	// on SQLite, 25 ms.
	Transactions   int     `json:"transactions,omitempty"`
	MaxHoldMS      float64 `json:"max_hold_ms,omitempty"`
	HoldP50MS      float64 `json:"hold_p50_ms,omitempty"`
	HoldP99MS      float64 `json:"hold_p99_ms,omitempty"`
	HoldsOverBound int     `json:"holds_over_25ms"`
	// LongestHoldCommitMS is how much of the longest hold was its COMMIT
	// (the WAL's writes and sync); the rest ran the statements.
	LongestHoldCommitMS float64 `json:"longest_hold_commit_ms,omitempty"`
	// LongestHoldAt is which of the transactions held it longest (1 is
	// the first): a first one is a cold start, a later one the disk.
	LongestHoldAt int `json:"longest_hold_at,omitempty"`
	// Waiters long-polled sample requests; WokenAfterDeadlineMS is when
	// they heard, after their deadline.
	Waiters              int     `json:"waiters"`
	WokenAfterDeadlineMS Latency `json:"woken_after_deadline_ms"`
	Source               string  `json:"source"`
}

// Machine is where the run happened. LoadBefore and LoadAfter are the
// 1-minute load average: other work on the machine shows there.
type Machine struct {
	CPUs       int     `json:"cpus"`
	GOMAXPROCS int     `json:"gomaxprocs"`
	GOOS       string  `json:"goos"`
	GOARCH     string  `json:"goarch"`
	GoVersion  string  `json:"go_version"`
	Host       string  `json:"host"`
	LoadBefore float64 `json:"load_before"`
	LoadAfter  float64 `json:"load_after"`
}

// samples collects latencies.
type samples []time.Duration

// latency returns the percentiles of s (sorting it).
func (s samples) latency() Latency {
	if len(s) == 0 {
		return Latency{}
	}
	slices.Sort(s)
	at := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return ms(s[max(0, min(i, len(s)-1))])
	}
	return Latency{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: ms(s[len(s)-1])}
}

func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// WriteTable prints the report for people.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "airlock bench %s — %s, store %s, %d clients", r.Scenario, r.Target, r.Store, r.Clients)
	if r.Replicas > 1 {
		fmt.Fprintf(w, ", %d replicas", r.Replicas)
	}
	fmt.Fprintf(w, "; bounds %gs / %d", r.Bounds.DurationS, r.Bounds.Count)
	if r.Bounds.Rate > 0 {
		fmt.Fprintf(w, "; paced at %g/s", r.Bounds.Rate)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "machine: %d CPUs (GOMAXPROCS %d), %s/%s, %s, load %.2f → %.2f\n\n",
		r.Machine.CPUs, r.Machine.GOMAXPROCS, r.Machine.GOOS, r.Machine.GOARCH, r.Machine.GoVersion, r.Machine.LoadBefore, r.Machine.LoadAfter)

	if r.Scenario != Wait && r.Scenario != Expiry && r.Scenario != Scale {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "\tops\tops/s\tp50 ms\tp90 ms\tp99 ms\tmax ms\terrors\tCPU µs/op\tserver µs/op\t")
		row := func(name string, res Result) {
			l := res.LatencyMS
			server := "-"
			if res.ServerCPUPerOpUS > 0 {
				server = fmt.Sprintf("%.0f", res.ServerCPUPerOpUS)
			}
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t%.0f\t%s\t\n", name, res.Ops, res.OpsPerS, l.P50, l.P90, l.P99, l.Max, res.Errors, res.CPUPerOpUS, server)
		}
		name := "airlock " + r.Scenario
		if r.Scenario == Raw {
			name = fmt.Sprintf("raw (%d conn)", r.Connections)
		}
		if r.Claim != nil {
			name = "airlock claim, tokens on"
		}
		if r.AuditCompare != nil {
			name = "airlock lifecycle, audit log on"
		}
		if r.MCP != nil && r.MCP.Compared {
			name = "airlock mcp, at " + mcpRevision(true)
		}
		if r.Max != nil {
			maxName := "maximum, unpaced"
			name = fmt.Sprintf("at half: %.0f/s", r.Bounds.Rate)
			if r.Push != nil {
				maxName, name = "creates pushed, unpaced", fmt.Sprintf("creates pushed, at half: %.0f/s", r.Bounds.Rate)
			}
			row(maxName, *r.Max)
		}
		row(name, r.Result)
		if r.Push != nil {
			r.Push.writeRows(row)
		}
		if r.Claim != nil {
			r.Claim.writeRows(row)
		}
		if r.AuditCompare != nil {
			r.AuditCompare.writeRows(row)
		}
		if r.MCP != nil {
			r.MCP.writeRows(row)
		}
		if r.Raw != nil {
			row(fmt.Sprintf("raw (%d conn)", r.Raw.Connections), r.Raw.Result)
		}
		if r.RawHTTP != nil {
			name := "raw over HTTP"
			if r.Scenario == Consume {
				name = "raw consume over HTTP"
			}
			row(fmt.Sprintf("%s (%d conn, %d clients)", name, r.RawHTTP.Connections, r.RawHTTP.Clients), r.RawHTTP.Result)
		}
		tw.Flush()
		writeErrors(w, r.ErrorKinds)
		if g := r.Grant; g != nil {
			fmt.Fprintf(w, "\ngrants: %d (one per client's instance); each operation: a create the grant approves, then the execution claim", g.Grants)
			if g.UsesCounted != nil {
				fmt.Fprintf(w, "; uses the server counted on them: %d", *g.UsesCounted)
			}
			fmt.Fprintln(w)
		}
		if r.Claim != nil {
			r.Claim.writeSummary(w)
		}
		if r.AuditCompare != nil {
			r.AuditCompare.writeSummary(w)
		}
		if r.MCP != nil {
			r.MCP.writeSummary(w)
		}
		if r.Push != nil {
			r.Push.writeSummary(w)
		}
		if a := r.Audit; a != nil {
			fmt.Fprintf(w, "\naudit log: %d leaves, commit → leaf p50 ≤ %s, p99 ≤ %s (target p99 ≤ 1 s at half the maximum load); %d checkpoints covered new leaves, the longest wait for one ≤ %s (target ≤ 2 × --checkpoint-interval)\n",
				a.Leaves, msOrBeyond(a.LagP50MS), msOrBeyond(a.LagP99MS), a.Checkpoints, sOrBeyond(a.CheckpointMaxS))
		}
		if r.Raw != nil {
			fmt.Fprintf(w, "\nratio to raw: %.2f (airlock %s ops/s ÷ direct SQL on %s)\n", r.RatioToRaw, r.Scenario, r.Raw.Store)
		}
		if r.RawHTTP != nil {
			var ratios []string
			if r.RawHTTPToRaw > 0 {
				ratios = append(ratios, fmt.Sprintf("raw over HTTP ÷ raw: %.2f (what HTTP itself costs)", r.RawHTTPToRaw))
			}
			if r.Scenario != Raw {
				ratios = append(ratios, fmt.Sprintf("airlock ÷ raw over HTTP: %.2f (what Airlock adds)", r.RatioToRawHTTP))
			}
			fmt.Fprintln(w, strings.Join(ratios, "; "))
			if r.ServerCPURatioToRawHTTP > 0 {
				fmt.Fprintf(w, "server CPU per op, airlock ÷ raw over HTTP: %.2f (%.0f µs ÷ %.0f µs)\n", r.ServerCPURatioToRawHTTP, r.ServerCPUPerOpUS, r.RawHTTP.ServerCPUPerOpUS)
			}
		}
		if l := r.StartLagMS; l != nil {
			fmt.Fprintf(w, "paced: operations started %.2f ms (p50), %.2f ms (p99), %.2f ms (max) after they were due, waiting for a free client; when that is most of the latency, raise --clients\n", l.P50, l.P99, l.Max)
		}
		fmt.Fprintln(w, "CPU µs/op: this process's CPU per operation: the clients', and a server's in this process (the direct raw baseline's) with SQLite's")
		fmt.Fprintln(w, "server µs/op: the server process's CPU per operation (a child of this run, or --server-pid), with SQLite's; never PostgreSQL's")
	}
	if c := r.Commits; c != nil {
		fmt.Fprintf(w, "\nSQLite write transactions: %d ops in %d commits (%.2f per commit, largest batch %d)\n", c.Ops, c.Commits, c.OpsPerCommit, c.MaxBatch)
	}
	writeStoreCosts(w, r.StoreCost)
	if x := r.Wait; x != nil {
		fmt.Fprintf(w, "%d idle long-poll waiters (%s):\n", x.Waiters, x.Transport)
		fmt.Fprintf(w, "  server memory per waiter  %.0f bytes (%.1f KiB; gross with clients %.1f KiB; %s)\n",
			x.ServerBytesPerWaiter, x.ServerBytesPerWaiter/1024, x.GrossBytesPerWaiter/1024, x.MemorySource)
		fmt.Fprintf(w, "  CPU while idle            %.2f%% of one core over %.1fs\n", x.IdleCPUPercent, x.IdleWindowS)
		if x.GrossRSSPerWaiter != 0 {
			fmt.Fprintf(w, "  process RSS per waiter    %.1f KiB (servers and clients; limit on open files %d)\n", x.GrossRSSPerWaiter/1024, x.FDLimit)
		}
		fmt.Fprintf(w, "  %d changes answer all %d in %.1f ms (the calls themselves %.1f ms; each waiter p50 %.1f ms, p99 %.1f ms)\n", x.Changes, x.Answered, x.BroadcastMS, x.BroadcastCallMS, x.WokenMS.P50, x.WokenMS.P99)
		fmt.Fprintf(w, "decision → waiter, %d rounds (ms):\n", x.Rounds)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "\tp50\tp90\tp99\tmax\t")
		for _, row := range []struct {
			name string
			l    Latency
		}{{"decision call", x.DecisionMS}, {"waiter answered", x.WaiterMS}, {"waiter after decision", x.WaiterAfterDecisionMS}} {
			fmt.Fprintf(tw, "  %s\t%.2f\t%.2f\t%.2f\t%.2f\t\n", row.name, row.l.P50, row.l.P90, row.l.P99, row.l.Max)
		}
		tw.Flush()
		writeErrors(w, r.ErrorKinds)
	}
	if x := r.Webhooks; x != nil {
		fmt.Fprintf(w, "\nwebhooks, %d local receivers subscribed to everything (lifecycle ops/s, one phase after another):\n", x.Endpoints)
		fmt.Fprintf(w, "  no endpoint   %8.0f ops/s\n", x.Without.OpsPerS)
		fmt.Fprintf(w, "  one endpoint  %8.0f ops/s  (%.2f× without)\n", x.One.OpsPerS, x.OneToWithout)
		if x.All != nil {
			fmt.Fprintf(w, "  %2d endpoints  %8.0f ops/s  (%.2f× without)\n", x.Endpoints, x.All.OpsPerS, x.AllToWithout)
		}
		fmt.Fprintf(w, "  delivery lag from commit at %g ops/s (half the fastest): p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms over %d deliveries",
			x.Lag.OpsPerS, x.LagMS.P50, x.LagMS.P90, x.LagMS.P99, x.LagMS.Max, x.Delivered)
		if x.Undelivered > 0 {
			fmt.Fprintf(w, "; %d not delivered within %s", x.Undelivered, settleBound)
		}
		fmt.Fprintln(w)
		if d := x.Drain; d != nil {
			fmt.Fprintf(w, "  backlog drain: %d deliveries to one endpoint in %.2f s, %.0f deliveries/s (%d attempts received); process CPU %.0f µs per delivery\n",
				d.Deliveries, d.ElapsedS, d.PerS, d.Attempts, d.CPUPerDeliveryUS)
			if b := d.Bare; b != nil {
				fmt.Fprintf(w, "  bare signed POST + row update: %d in %.0f/s; process CPU %.0f µs each; a delivery costs %.2f× that\n",
					b.Deliveries, b.PerS, b.CPUPerDeliveryUS, d.CPURatio)
			}
		}
	}
	if r.Scale != nil {
		r.Scale.write(w)
	}
	if x := r.Expiry; x != nil {
		fmt.Fprintf(w, "%d pending requests due together (deadlines within %.1f ms):\n", x.Pending, x.DeadlineSpreadMS)
		fmt.Fprintf(w, "  last expired %.1f ms after the last deadline; %.0f expired/s\n", x.LastExpiredAfterDeadlineMS, x.ExpiredPerS)
		if x.Sweeps > 0 {
			fmt.Fprintf(w, "  %d sweeps of up to %d rows; a sweep call took %.2f ms at p50, %.2f ms at p99, %.2f ms at most (number %d; waiting for the writer included); %d took over 60 ms\n",
				x.Sweeps, x.MaxSweepRows, x.SweepP50MS, x.SweepP99MS, x.MaxSweepMS, x.LongestSweepAt, x.SweepsOver60MS)
		}
		if x.Transactions > 0 {
			fmt.Fprintf(w, "  %d write transactions meanwhile: the longest (number %d) held the writer %.2f ms (%.2f ms of it committing; p50 %.2f ms, p99 %.2f ms); %d held it over 25 ms\n",
				x.Transactions, x.LongestHoldAt, x.MaxHoldMS, x.LongestHoldCommitMS, x.HoldP50MS, x.HoldP99MS, x.HoldsOverBound)
		}
		fmt.Fprintf(w, "  %d waiters woken after their deadline: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
			x.Waiters, x.WokenAfterDeadlineMS.P50, x.WokenAfterDeadlineMS.P99, x.WokenAfterDeadlineMS.Max)
		fmt.Fprintf(w, "  (%s)\n", x.Source)
		writeErrors(w, r.ErrorKinds)
	}
}

func (x *ScaleReport) write(w io.Writer) {
	fmt.Fprintf(w, "%d pending requests over %d instances (at most %d each), seeded in %.1f s, %.0f/s (%s)\n",
		x.Pending, x.Instances, x.PerInstance, x.SeedS, x.SeededPerS, x.Seeding)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\treads\treads/s\tp50 ms\tp90 ms\tp99 ms\tmax ms\terrors\t")
	rows := []struct {
		name string
		ScaleRead
	}{{fmt.Sprintf("first page of %d", x.PageSize), x.FirstPage}, {"instance + pending count", x.InstanceRead}}
	if g := x.Routing; g != nil {
		rows = append(rows, struct {
			name string
			ScaleRead
		}{fmt.Sprintf("create routed to 1 of %d groups", g.Groups), g.Create})
	}
	for _, r := range rows {
		l := r.LatencyMS
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t\n", r.name, r.Reads, r.PerS, l.P50, l.P90, l.P99, l.Max, r.Errors)
	}
	tw.Flush()
	for _, name := range []string{"first_page", "pending_count"} {
		fmt.Fprintf(w, "  %s reads %s\n", name, strings.Join(x.Indexes[name], ", "))
	}
	if g := x.Routing; g != nil {
		fmt.Fprintf(w, "routing: %d reviewers in %d groups (seeded in %.1f s), one rule a group; a reviewer in no group refused: %t; a member decided: %t\n",
			g.Reviewers, g.Groups, g.SeedS, g.OutsiderRefused, g.MemberDecided)
	}
	if e := x.Expiry; e != nil {
		fmt.Fprintf(w, "%d more due together over the backlog of %d: the last expired %.1f ms after the deadline, %.0f expired/s; %d sweeps of up to %d rows, p50 %.2f ms, p99 %.2f ms, max %.2f ms; %d over 60 ms; %d still pending when the run stopped waiting\n",
			e.Due, e.Backlog, e.LastExpiredAfterDeadlineMS, e.ExpiredPerS, e.Sweeps, e.MaxSweepRows, e.SweepMS.P50, e.SweepMS.P99, e.SweepMS.Max, e.SweepsOver60MS, e.StillPending)
	}
	writeErrors(w, x.FirstPage.ErrorKind)
	writeErrors(w, x.InstanceRead.ErrorKind)
	if g := x.Routing; g != nil {
		writeErrors(w, g.Create.ErrorKind)
	}
}

func writeErrors(w io.Writer, kinds map[string]int64) {
	if len(kinds) == 0 {
		return
	}
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, kinds[k]))
	}
	fmt.Fprintf(w, "errors: %s\n", strings.Join(parts, ", "))
}

// msOrBeyond and sOrBeyond print a bound of AuditTiming.
func msOrBeyond(ms float64) string {
	if ms < 0 {
		return "beyond the histogram (32.8 s)"
	}
	return fmt.Sprintf("%g ms", ms)
}

func sOrBeyond(s float64) string {
	if s < 0 {
		return "beyond the histogram (819 s)"
	}
	return fmt.Sprintf("%g s", s)
}
