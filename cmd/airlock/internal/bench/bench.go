// Package bench is the load generator behind `airlock bench`: it drives an
// Airlock server (a running one, or one it starts on a temporary store, in
// a child process so that the server's CPU is measured apart from the
// clients') with a scenario's operations from concurrent clients, and
// measures throughput, latency, CPU and errors — and, for lifecycles, the
// same durable work done with direct SQL on the same kind of store (the
// raw baseline), so that every report says how close Airlock comes to the
// storage engine's own ceiling.
//
// Every run is bounded in count and in time, and refuses targets beyond
// this machine unless told otherwise: a load generator pointed at the
// wrong server is an outage.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Scenarios.
const (
	// Lifecycle is create → decide (approve) → read, per client in a loop.
	Lifecycle = "lifecycle"
	// Create is creates only, each with a unique idempotency key.
	Create = "create"
	// Wait is many idle long-poll waiters (memory, idle CPU, one broadcast
	// answering all), then decision → waiter latency round by round.
	Wait = "wait"
	// Expiry is many pending requests reaching their deadline at once.
	Expiry = "expiry"
	// MCP is approval_request tool calls through the /mcp endpoint, with
	// clients at MCP revisions 2026-07-28 and 2025-11-25 in interleaved
	// passes (mcp.go).
	MCP = "mcp"
	// Grant is a create a reviewer's grant approves at once, then the
	// execution claim, per client in a loop (docs/policy.md, "Grants").
	Grant = "grant"
	// Claim is create → approve → execution claim, per client in a loop,
	// with approval tokens on and off in interleaved passes (claim.go).
	Claim = "claim"
	// Consume is a tool server consuming approval tokens
	// (docs/tokens.md, "Single use"): each op one POST
	// /v1/approval-tokens/consume of a fresh token, made (granted and
	// claimed) before the clock starts.
	Consume = "consume"
	// Audit is the lifecycle with the audit log's sequencer on and off in
	// interleaved passes (audit.go).
	Audit = "audit"
	// Push is Web Push's two measures (push.go): the lifecycle with the
	// delivery engine running and stopped, no subscription (push_ratio),
	// then creates pushed to a push service on this machine, at the
	// maximum and at half of it (push lag).
	Push = "push"
	// Scale is a large backlog of pending requests on PostgreSQL, seeded
	// through the store, and the reads a reviewer and an agent make while
	// it stands (scale.go).
	Scale = "scale"
	// Raw is the raw baseline alone: a lifecycle's durable work in direct SQL.
	Raw = "raw"
)

// Scenarios lists the scenarios, in the order help shows them.
var Scenarios = []string{Lifecycle, Create, Wait, Expiry, MCP, Grant, Claim, Consume, Audit, Push, Scale}

// Bounds of a run: no flag can make it unbounded.
const (
	MaxDuration = time.Hour
	// MaxOps bounds the operations of lifecycle, create, mcp, grant and
	// raw runs.
	MaxOps = 10_000_000
	// MaxWaiters bounds the wait scenario's waiters.
	MaxWaiters = 100_000
	// MaxPending bounds the expiry and scale scenarios' pending requests.
	MaxPending = 1_000_000
	// MaxClients bounds concurrent clients.
	MaxClients = 4096
	// MaxReplicas bounds in-process replicas.
	MaxReplicas = 16
)

// Defaults of Config.
const (
	DefaultClients  = 8
	DefaultDuration = 10 * time.Second
	// DefaultOps is the count bound of lifecycle, create, mcp, grant and
	// raw runs.
	DefaultOps = 1_000_000
	// DefaultWaiters is the wait scenario's waiters when Clients is unset.
	DefaultWaiters = 100
	// DefaultRounds is the wait scenario's decision → waiter rounds.
	DefaultRounds = 200
	// DefaultPending is the expiry scenario's pending requests.
	DefaultPending = 10_000
	// DefaultConsumes is the consume scenario's tokens, each consumed
	// once; MaxConsumes bounds them (each is made before the clock
	// starts).
	DefaultConsumes = 5_000
	MaxConsumes     = 200_000
)

// Config selects one run. Zero fields take the documented defaults.
type Config struct {
	// Scenario is one of Scenarios, or Raw for the raw baseline alone.
	// Default Lifecycle.
	Scenario string
	// URLs are running servers to drive (clients take them in turn); empty
	// starts Replicas servers on a temporary store, in child processes or
	// in this one (serversApart).
	URLs []string
	// Token is an admin token of the servers at URLs: the run mints an
	// agent and a reviewer token with it and revokes them afterwards.
	Token string
	// DB is the store of the in-process server and of the raw baseline: a
	// SQLite file path that must not exist yet (the run creates and then
	// removes it; default a temporary directory) or a PostgreSQL URL (the
	// run works in a fresh schema and drops it afterwards).
	DB string
	// Replicas is how many in-process servers share the store (PostgreSQL
	// only). Default 1.
	Replicas int
	// Clients is how many clients run at once (default 8; 1 for the grant
	// scenario, whose target is at one client); for the wait scenario, how
	// many long-poll waiters (default 100).
	Clients int
	// Duration bounds the measured part of the run (default 10s, at most
	// MaxDuration). Setting up (creating the requests the wait and expiry
	// scenarios need) has its own bound, proportional to Count.
	Duration time.Duration
	// Count bounds the operations: lifecycle, create, mcp, grant and raw
	// stop at Count operations or Duration, whichever comes first
	// (default DefaultOps); wait runs Count decision rounds (default
	// DefaultRounds); expiry creates Count pending requests (default
	// DefaultPending).
	Count int
	// Rate, when positive, paces lifecycle, create, mcp, grant and consume
	// operations at Rate per second in all (open loop), to measure latency
	// at a given load — at half the maximum throughput, say — instead of
	// at the maximum. Latency then runs from when each operation was due.
	Rate float64
	// HalfMax runs lifecycle, create, mcp, grant or consume twice: as fast as the
	// clients go, to find the maximum, then paced at half of that maximum
	// (the load of the latency target), so that both come from one run on
	// one machine in one state. The report's Result is the paced run; Max is
	// the first.
	HalfMax bool
	// Baseline runs the raw baseline after a lifecycle run, in the same
	// process, and reports ratio_to_raw. `airlock bench` sets it by
	// default.
	Baseline bool
	// HTTPBaseline, with Baseline or the raw scenario, also runs the raw
	// baseline over HTTP (its statements behind a minimal handler, driven
	// by the same HTTP client as the lifecycle) and reports raw_http,
	// raw_http_to_raw and (after a lifecycle) ratio_to_raw_http. After
	// consume, it runs the consume's baseline instead: a minimal handler
	// that verifies each approval token and records its use
	// (runRawHTTPConsume), and reports raw_http and ratio_to_raw_http.
	HTTPBaseline bool
	// AllowRemote permits targets (servers, databases) beyond this machine.
	AllowRemote bool
	// Policy, when set, is a policy file (docs/policy.md) the in-process
	// servers load, to measure what its rules cost each create.
	Policy string
	// Groups, with the scale scenario, adds its routing phase: that many
	// reviewer groups of scaleGroupSize reviewers each in a policy file
	// the replicas load, one rule routing a tool to each, and creates
	// routed to them timed (routing.go; at most MaxGroups).
	Groups int
	// Webhooks, with the lifecycle scenario, adds that many local webhook
	// receivers (one endpoint each, subscribed to everything) and reports
	// the lifecycle without, with one and with all of them, the delivery
	// lag from commit at half the maximum, and the backlog drain
	// (Report.Webhooks). In-process servers only.
	Webhooks int
	// Backlog is the drain's backlog with Webhooks: deliveries queued to
	// one endpoint, then drained (default DefaultBacklog; at most
	// MaxBacklog).
	Backlog int
	// ServerPID, with URLs, is the process ID of the server there (on this
	// machine): the run reads its CPU time from /proc, as it does an
	// in-process run's server's, and reports the server's CPU per
	// operation apart from the clients'. Linux only.
	ServerPID int
	// ExplainStore, with the lifecycle scenario on PostgreSQL, counts what
	// a lifecycle asks of the database — transactions, statements, rows
	// and index entries written, WAL — beside the raw baseline's
	// (Report.StoreCost; explain.go).
	ExplainStore bool
	// CPUProfile, when set, is where each Airlock server the run starts in
	// a process of its own writes its CPU profile (runtime/pprof), from
	// its start to its stop, setup included: the first replica's to this
	// path, replica i's (from 1) to the path with ".i" before its
	// extension. The file must not exist yet. Consume profiles its
	// servers over the measured consumes only (windowProfiled), its
	// setup would dwarf them. Expiry and scale run their servers in the
	// bench's own process: they profile that process over their measured
	// phases instead (phaseProfile).
	CPUProfile string
	// Progress, when set, receives a line per phase.
	Progress io.Writer

	// explain takes ExplainStore's snapshots; Run sets it.
	explain *explainer

	// grantTool and grantUses, set by tests only, make the grant
	// scenario's grants cover another tool than the one its creates call,
	// or fewer uses than the run needs, so that creates go unapproved.
	grantTool string
	grantUses int
	// mcpPin, set by tests only, is the revision the mcp scenario's
	// clients are pinned to for a pass meant to be at revision, so that a
	// pass can speak the wrong one.
	mcpPin func(revision string) string
	// onChild, set by tests only, hears the process ID of every server
	// the run starts in a child process.
	onChild func(pid int)
}

// serversApart reports whether the run's own servers (no URLs) go in
// child processes: for the scenarios that only drive them over HTTP, so
// that their CPU is measured apart from the clients'. The wait, expiry and
// webhook runs look inside their servers (waiter counts, sweeps, the
// delivery backlog), and keep them in this process.
func (c Config) serversApart() bool {
	switch c.Scenario {
	case Lifecycle, Create, MCP, Grant, Claim, Consume, Audit, Push:
		return len(c.URLs) == 0 && c.Webhooks == 0
	}
	return false
}

// phasesProfiled says whether --cpuprofile profiles the bench's own
// process over the run's measured phases (phaseProfile): the scenarios
// whose servers run in-process.
func (c Config) phasesProfiled() bool {
	return (c.Scenario == Expiry || c.Scenario == Scale) && len(c.URLs) == 0
}

// windowProfiled says whether --cpuprofile profiles the run's server
// processes over the measured window only, not from their start: the
// consume scenario, whose setup (a create, a grant's decision and a claim
// per token) costs its servers several times what its measured consumes do.
func (c Config) windowProfiled() bool {
	return c.Scenario == Consume && c.serversApart()
}

// phaseProfile starts profiling this process's CPU, servers and clients
// alike, into CPUProfile with suffix before its extension ("" for the
// path itself), when the run profiles its phases; stop ends it. Profiling
// only the measured phase leaves out the seeding, which would dwarf it.
func (c Config) phaseProfile(suffix string) (stop func(), err error) {
	if c.CPUProfile == "" || !c.phasesProfiled() {
		return func() {}, nil
	}
	stop, err = startCPUProfile(withSuffix(c.CPUProfile, suffix))
	if err != nil {
		return nil, err
	}
	return sync.OnceFunc(stop), nil
}

// withDefaults fills in the zero fields.
func (c Config) withDefaults() Config {
	if c.Scenario == "" {
		c.Scenario = Lifecycle
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Clients == 0 {
		switch c.Scenario {
		case Wait:
			c.Clients = DefaultWaiters
		case Grant:
			c.Clients = 1
		default:
			c.Clients = DefaultClients
		}
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Count == 0 {
		switch c.Scenario {
		case Wait:
			c.Count = DefaultRounds
		case Expiry:
			c.Count = DefaultPending
		case Scale:
			c.Count = DefaultScalePending
		case Consume:
			c.Count = DefaultConsumes
		default:
			c.Count = DefaultOps
		}
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Webhooks > 0 && c.Backlog == 0 {
		c.Backlog = DefaultBacklog
	}
	return c
}

// Validate checks c, with its defaults filled in, without running
// anything; its errors name the flag to fix. Run checks the same.
func (c Config) Validate() error { return c.withDefaults().validate() }

// profileOf is replica i's CPU profile file under CPUProfile, or "".
func (c Config) profileOf(i int) string {
	if c.CPUProfile == "" || i == 0 {
		return c.CPUProfile
	}
	ext := filepath.Ext(c.CPUProfile)
	return fmt.Sprintf("%s.%d%s", strings.TrimSuffix(c.CPUProfile, ext), i, ext)
}

// childProfile is the CPU profile replica i's process writes from its
// start to its stop, or "" where the run profiles windows instead.
func (c Config) childProfile(i int) string {
	if c.windowProfiled() {
		return ""
	}
	return c.profileOf(i)
}

// withSuffix is path with suffix before its extension, or path itself
// for "".
func withSuffix(path, suffix string) string {
	if path == "" || suffix == "" {
		return path
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "." + suffix + ext
}

// validate checks a configuration that went through withDefaults.
func (c Config) validate() error {
	switch c.Scenario {
	case Lifecycle, Create, Wait, Expiry, MCP, Grant, Claim, Consume, Audit, Push, Scale, Raw:
	default:
		return fmt.Errorf("--scenario %q is not one of %s", c.Scenario, strings.Join(Scenarios, ", "))
	}
	if c.CPUProfile != "" && !c.serversApart() && !c.phasesProfiled() {
		return fmt.Errorf("--cpuprofile profiles the servers a run starts: lifecycle, create, mcp, grant, claim, consume, audit or push (each server in a process of its own), expiry or scale (the bench's own process over the measured phases), without --url or --webhooks")
	}
	if c.Duration < 0 || c.Duration > MaxDuration {
		return fmt.Errorf("--duration must be between 1ms and %s, not %s: every run is bounded", MaxDuration, c.Duration)
	}
	maxCount := MaxOps
	switch c.Scenario {
	case Expiry, Scale:
		maxCount = MaxPending
	case Consume:
		maxCount = MaxConsumes
	case Wait:
		maxCount = MaxOps
	}
	if c.Count < 0 || c.Count > maxCount {
		return fmt.Errorf("--count must be between 1 and %d for %s, not %d", maxCount, c.Scenario, c.Count)
	}
	if c.Webhooks != 0 {
		switch {
		case c.Webhooks < 0 || c.Webhooks > MaxWebhooks:
			return fmt.Errorf("--webhooks must be between 1 and %d, not %d", MaxWebhooks, c.Webhooks)
		case c.Scenario != Lifecycle:
			return fmt.Errorf("--webhooks goes with --scenario lifecycle, not %s", c.Scenario)
		case len(c.URLs) > 0:
			return errWebhooksRemote
		case c.Backlog < 0 || c.Backlog > MaxBacklog:
			return fmt.Errorf("--backlog must be between 1 and %d, not %d", MaxBacklog, c.Backlog)
		}
	}
	maxClients := MaxClients
	if c.Scenario == Wait {
		maxClients = MaxWaiters
	}
	if c.Clients < 0 || c.Clients > maxClients {
		return fmt.Errorf("--clients must be between 1 and %d for %s, not %d", maxClients, c.Scenario, c.Clients)
	}
	if c.Rate < 0 || c.Rate > 1e6 {
		return fmt.Errorf("--rate must be between 0 (as fast as the clients go) and 1000000 operations per second, not %g", c.Rate)
	}
	if c.Rate > 0 && (c.Scenario == Wait || c.Scenario == Expiry || c.Scenario == Raw || c.Scenario == Claim || c.Scenario == Audit || c.Scenario == Push || c.Scenario == Scale) {
		return fmt.Errorf("--rate paces lifecycle, create, mcp, grant and consume; %s has its own pace", c.Scenario)
	}
	if c.HalfMax && (c.Scenario == Wait || c.Scenario == Expiry || c.Scenario == Raw || c.Scenario == Claim || c.Scenario == Audit || c.Scenario == Push || c.Scenario == Scale) {
		return fmt.Errorf("--half-max paces lifecycle, create, mcp, grant and consume; %s has its own pace", c.Scenario)
	}
	if c.HTTPBaseline && c.Scenario != Lifecycle && c.Scenario != Raw && c.Scenario != Consume {
		return fmt.Errorf("--http-baseline runs a raw server beside lifecycle, raw and consume; %s has none", c.Scenario)
	}
	if c.HTTPBaseline && c.Scenario == Consume && (c.HalfMax || c.Rate > 0) {
		return errors.New("--http-baseline compares consumes as fast as the clients go; drop --half-max and --rate")
	}
	if c.HalfMax && c.Rate > 0 {
		return fmt.Errorf("--half-max sets the rate itself (half the maximum it measures first); drop --rate %g", c.Rate)
	}
	if c.Replicas < 1 || c.Replicas > MaxReplicas {
		return fmt.Errorf("--replicas must be between 1 and %d, not %d", MaxReplicas, c.Replicas)
	}
	if len(c.URLs) > 0 {
		if c.Token == "" && c.Scenario != Raw {
			return errors.New("--token is required with --url: an admin token of that server (the run mints an agent and a reviewer token with it, and revokes them after)")
		}
		if c.Replicas > 1 {
			return errors.New("--replicas starts in-process servers; with --url, list every replica's URL instead (--url http://a,http://b)")
		}
		if c.Policy != "" {
			return errors.New("--policy is loaded by in-process servers; a server at --url loads its own (airlock serve --policy)")
		}
		for _, u := range c.URLs {
			if err := checkTarget("--url", u, c.AllowRemote); err != nil {
				return err
			}
		}
	}
	if c.ExplainStore {
		switch {
		case c.Scenario != Lifecycle:
			return fmt.Errorf("--explain-store counts what a lifecycle asks of the store; use it with --scenario lifecycle, not %s", c.Scenario)
		case !isPostgres(c.DB):
			return errors.New("--explain-store reads PostgreSQL's statistics: give --db postgres://…")
		case len(c.URLs) > 0:
			return errors.New("--explain-store measures the run's own servers on a fresh schema; leave out --url")
		case c.Webhooks > 0:
			return errors.New("--explain-store measures the lifecycle alone; leave out --webhooks")
		}
	}
	if err := c.validateClaim(); err != nil {
		return err
	}
	if err := c.validateAudit(); err != nil {
		return err
	}
	if err := c.validateMCP(); err != nil {
		return err
	}
	if err := c.validatePush(); err != nil {
		return err
	}
	if err := c.validateScale(); err != nil {
		return err
	}
	if c.ServerPID != 0 {
		if err := c.validateServerPID(); err != nil {
			return err
		}
	}
	if c.Replicas > 1 && !isPostgres(c.DB) {
		return errors.New("--replicas needs a shared PostgreSQL store: give --db postgres://…")
	}
	if isPostgres(c.DB) {
		if err := checkTarget("--db", c.DB, c.AllowRemote); err != nil {
			return err
		}
	} else if c.DB != "" {
		if _, err := os.Stat(c.DB); err == nil {
			return fmt.Errorf("--db %s already exists: the run creates a fresh SQLite file there and removes it after, so name a path that does not exist (or leave --db unset for a temporary one)", c.DB)
		}
	}
	return nil
}

// validateServerPID checks --server-pid: a process on this machine whose
// CPU time can be read, serving the --url the run drives.
func (c Config) validateServerPID() error {
	switch {
	case len(c.URLs) == 0:
		return fmt.Errorf("--server-pid %d goes with --url: a run without --url starts its own server and measures its CPU itself", c.ServerPID)
	case c.ServerPID < 0:
		return fmt.Errorf("--server-pid must be a process ID, not %d", c.ServerPID)
	case c.Scenario != Lifecycle && c.Scenario != Create && c.Scenario != MCP && c.Scenario != Grant && c.Scenario != Claim && c.Scenario != Consume && c.Scenario != Audit:
		return fmt.Errorf("--server-pid measures the server's CPU per operation of lifecycle, create, mcp, grant, claim, consume and audit, not of %s", c.Scenario)
	case !procCPUAvailable():
		return fmt.Errorf("--server-pid reads the server's CPU time from /proc, which %s does not have: leave it out", runtime.GOOS)
	}
	for _, u := range c.URLs {
		if err := checkTarget("--url", u, false); err != nil {
			return fmt.Errorf("--server-pid reads a process on this machine, but %w", err)
		}
	}
	if _, err := procCPU(c.ServerPID); err != nil {
		return fmt.Errorf("--server-pid %d: cannot read its CPU time (%v); give the process ID of the server at --url, running on this machine (pgrep -f 'airlock serve')", c.ServerPID, err)
	}
	return nil
}

// isPostgres reports whether db names a PostgreSQL database.
func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// checkTarget refuses a URL whose host is not this machine, unless remote
// targets are allowed. A host name counts as local only when every address
// it resolves to is a loopback address.
func checkTarget(flag, raw string, allowRemote bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s is not a URL: %v", flag, redact(err.Error()))
	}
	if !isPostgres(raw) && u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%s %s: want an http:// or https:// URL of an Airlock server", flag, redact(raw))
	}
	if allowRemote {
		return nil
	}
	host := u.Hostname()
	if isPostgres(raw) {
		if h := u.Query().Get("host"); h != "" {
			host = h
		}
		if host == "" || strings.HasPrefix(host, "/") {
			return nil // a Unix socket: this machine
		}
	}
	if loopback(host) {
		return nil
	}
	return fmt.Errorf("%s %s is not on this machine: a load test aimed at the wrong server is an outage; pass --allow-remote if you mean it", flag, redact(raw))
}

func loopback(host string) bool {
	if host == "" {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	addrs, err := net.LookupHost(host)
	if err != nil || len(addrs) == 0 {
		return false
	}
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
			return false
		}
	}
	return true
}

// redact hides a password in a URL shown in an error.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// Run runs one benchmark and returns its report. It cleans up what it
// created (in-process servers, temporary stores, minted tokens) before
// returning, also when ctx ends early.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// Child servers write their warnings to progress while the run does.
	cfg.Progress = &lockedWriter{w: cfg.Progress}
	rep := &Report{
		Scenario: cfg.Scenario, Clients: cfg.Clients, Machine: machine(),
		Bounds: Bounds{DurationS: cfg.Duration.Seconds(), Count: cfg.Count, Rate: cfg.Rate},
	}
	if cfg.Scenario == Raw {
		raw, err := runRaw(ctx, cfg)
		if err != nil {
			return nil, err
		}
		rep.Target, rep.Store = "direct SQL", raw.Store
		rep.Result = raw.Result
		rep.Connections, rep.Clients = raw.Connections, raw.Clients
		if err := runHTTPBaseline(ctx, cfg, rep, raw); err != nil {
			return nil, err
		}
		rep.Machine.LoadAfter = loadAvg()
		return rep, nil
	}

	if cfg.ExplainStore {
		cfg.explain = newExplainer(cfg.DB)
	}
	if cfg.Groups > 0 {
		path, remove, err := writeGroupsPolicy(cfg.Groups)
		if err != nil {
			return nil, fmt.Errorf("write the groups' policy file: %w", err)
		}
		defer remove()
		cfg.Policy = path
	}
	tgt, err := openTarget(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer tgt.close(context.WithoutCancel(ctx))
	if cfg.explain != nil {
		if err := cfg.explain.start(ctx); err != nil {
			return nil, err
		}
	}
	rep.Target, rep.Store, rep.Replicas = tgt.describe(), tgt.store, len(tgt.urls)

	switch cfg.Scenario {
	case MCP:
		if cfg.HalfMax {
			err = runLoadScenario(ctx, cfg, tgt, rep)
		} else {
			err = runMCP(ctx, cfg, tgt, rep)
		}
	case Lifecycle, Create, Grant, Consume:
		err = runLoadScenario(ctx, cfg, tgt, rep)
	case Claim:
		err = runClaim(ctx, cfg, tgt, rep)
	case Audit:
		err = runAudit(ctx, cfg, tgt, rep)
	case Push:
		err = runPush(ctx, cfg, tgt, rep)
	case Wait:
		err = runWait(ctx, cfg, tgt, rep)
	case Expiry:
		err = runExpiry(ctx, cfg, tgt, rep)
	case Scale:
		err = runScale(ctx, cfg, tgt, rep)
	}
	if err != nil {
		return nil, err
	}
	if rep.Commits, err = tgt.writeStats(); err != nil {
		return nil, err
	}
	if cfg.explain != nil {
		// The servers stop, and their connections report their counters,
		// before the raw baseline starts: each phase counts alone.
		cfg.explain.setOps("airlock", rep.Ops)
		tgt.close(context.WithoutCancel(ctx))
	}
	if cfg.Scenario == Lifecycle && cfg.Baseline {
		fmt.Fprintf(cfg.Progress, "raw baseline: the same durable work in direct SQL, %s\n", cfg.Duration)
		raw, err := runRaw(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("raw baseline: %w", err)
		}
		rep.Raw = raw
		if raw.OpsPerS > 0 {
			rep.RatioToRaw = round(rep.OpsPerS/raw.OpsPerS, 3)
		}
		if err := runHTTPBaseline(ctx, cfg, rep, raw); err != nil {
			return nil, err
		}
	}
	if cfg.Scenario == Consume && cfg.HTTPBaseline {
		fmt.Fprintf(cfg.Progress, "raw consume over HTTP: a consume's work behind a minimal HTTP handler, %s\n", cfg.Duration)
		rh, err := runRawHTTPConsume(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("raw consume over HTTP: %w", err)
		}
		rep.setRawHTTP(rh)
	}
	if cfg.explain != nil {
		rep.StoreCost = cfg.explain.report()
	}
	rep.Machine.LoadAfter = loadAvg()
	return rep, nil
}

// runHTTPBaseline runs the raw baseline over HTTP when cfg asks for it,
// and reports it beside raw, the direct one of the same run.
func runHTTPBaseline(ctx context.Context, cfg Config, rep *Report, raw *RawReport) error {
	if !cfg.HTTPBaseline {
		return nil
	}
	fmt.Fprintf(cfg.Progress, "raw baseline over HTTP: the same statements behind a minimal HTTP handler, %s\n", cfg.Duration)
	rh, err := runRawHTTP(ctx, cfg)
	if err != nil {
		return fmt.Errorf("raw baseline over HTTP: %w", err)
	}
	if raw.OpsPerS > 0 {
		rep.RawHTTPToRaw = round(rh.OpsPerS/raw.OpsPerS, 3)
	}
	rep.setRawHTTP(rh)
	return nil
}

// setRawHTTP reports rh, the raw baseline over HTTP, and, after a run of
// Airlock's, the ratios of the two.
func (r *Report) setRawHTTP(rh *RawReport) {
	r.RawHTTP = rh
	if r.Scenario == Raw {
		return
	}
	if rh.OpsPerS > 0 {
		r.RatioToRawHTTP = round(r.OpsPerS/rh.OpsPerS, 3)
	}
	if r.ServerCPUPerOpUS > 0 && rh.ServerCPUPerOpUS > 0 {
		r.ServerCPURatioToRawHTTP = round(r.ServerCPUPerOpUS/rh.ServerCPUPerOpUS, 3)
	}
}

// machine describes where the run happened, load included: on a shared
// machine, a number without the load beside it cannot be judged.
func machine() Machine {
	host, _ := os.Hostname()
	return Machine{
		CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
		GoVersion: runtime.Version(), Host: host, LoadBefore: loadAvg(),
	}
}

// loadAvg returns the 1-minute load average, or -1 where it is unknown.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	var l float64
	if _, err := fmt.Sscan(string(b), &l); err != nil {
		return -1
	}
	return l
}
