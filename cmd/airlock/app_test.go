package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/provider"
	"github.com/airlockhq/airlock/store/sqlite"
)

func TestCommands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		exit     int
		stdout   string // a substring of stdout
		stderr   string // a substring of stderr
		noStdout bool
		without  string // not a substring of stdout or stderr
	}{
		{name: "help lists every command", args: []string{"help"}, stdout: "  serve    Run the Airlock provider"},
		{name: "help serve shows each flag with its environment twin and default", args: []string{"help", "serve"},
			stdout: "--max-timeout  [$AIRLOCK_MAX_TIMEOUT]\n    \tlongest decision window; longer requests are shortened to it (default 168h0m0s)"},
		{name: "--help is help", args: []string{"--help"}, stdout: "Commands:"},
		{name: "help describes itself", args: []string{"help", "help"}, stdout: "Usage: airlock help [command [subcommand]]"},
		{name: "version names the build", args: []string{"version"}, stdout: "airlock dev\n"},
		{name: "serve -h prints usage and succeeds", args: []string{"serve", "-h"}, stdout: "Usage: airlock serve"},
		{name: "an unknown flag's usage goes to stderr", args: []string{"serve", "--nope"}, exit: exitUsage, stderr: "Usage: airlock serve", noStdout: true},
		{name: "help names a subcommand", args: []string{"help", "requests", "approve"}, stdout: "Usage: airlock requests approve <id>"},
		{name: "help of an unknown subcommand is a usage error", args: []string{"help", "requests", "nope"}, exit: exitUsage, stderr: `requests has no subcommand "nope"`},
		{name: "no command is a usage error", args: nil, exit: exitUsage, stderr: "no command given"},
		{name: "an unknown command is a usage error", args: []string{"frobnicate"}, exit: exitUsage, stderr: `unknown command "frobnicate"`},
		{name: "help of an unknown command is a usage error", args: []string{"help", "frobnicate"}, exit: exitUsage, stderr: `unknown command "frobnicate"`},
		{name: "an unknown flag is a usage error", args: []string{"serve", "--nope"}, exit: exitUsage, stderr: "flag provided but not defined: -nope"},
		{name: "serve takes no arguments", args: []string{"serve", "extra"}, exit: exitUsage, stderr: `serve takes no arguments, got ["extra"]`},
		{name: "an invalid configuration is a usage error", args: []string{"serve", "--db", "postgres://airlock:hunter2@db:54x32/airlock"}, exit: exitUsage,
			stderr: "--db is not a valid PostgreSQL URL"},
		{name: "help serve says --db takes a PostgreSQL URL", args: []string{"help", "serve"},
			stdout: "or a postgres:// URL (or host=… dbname=… string) of a PostgreSQL database that several replicas may share"},
		{name: "help hook prints the hook's usage", args: []string{"help", "hook"}, stdout: "Usage: airlock hook claude-code|codex|gemini [flags]"},
		{name: "hook without an agent blocks the call", args: []string{"hook", "--wait", "1s"}, exit: exitUsage,
			stderr: "hook: name the agent: airlock hook claude-code|codex|gemini [flags]; blocking this call"},
		{name: "help bench leaves out zero defaults its flags explain", args: []string{"help", "bench"},
			stdout: "concurrent clients (default 8; grant: 1); for wait, the number of idle long-poll waiters (default 100)\n", without: "(default 0)"},
		{name: "help bench leaves out false defaults", args: []string{"help", "bench"},
			stdout: "in-process servers sharing the store (PostgreSQL only); clients take them in turn (default 1)\n", without: "(default false)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			app := &App{Stdout: &stdout, Stderr: &stderr}
			err := app.Run(context.Background(), tt.args)
			if got := exitCode(app, err); got != tt.exit {
				t.Errorf("exit code %d, want %d (err %v)", got, tt.exit, err)
			}
			if !strings.Contains(stdout.String(), tt.stdout) {
				t.Errorf("stdout does not contain %q:\n%s", tt.stdout, stdout.String())
			}
			if !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr does not contain %q:\n%s", tt.stderr, stderr.String())
			}
			if tt.without != "" && strings.Contains(stdout.String()+stderr.String(), tt.without) {
				t.Errorf("output contains %q:\n%s%s", tt.without, stdout.String(), stderr.String())
			}
			if tt.noStdout && stdout.Len() > 0 {
				t.Errorf("stdout should be empty:\n%s", stdout.String())
			}
		})
	}
}

func TestServeConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		check   func(Config) bool
		wantErr string
	}{
		{name: "no flags means the documented defaults", check: func(c Config) bool {
			d := DefaultConfig()
			d.LogFormat = "json" // stderr is no terminal (TestLogFormatDefault)
			return c == d
		}},
		{name: "an environment twin sets a field", env: map[string]string{"AIRLOCK_ADDR": "127.0.0.1:9999"},
			check: func(c Config) bool { return c.Addr == "127.0.0.1:9999" }},
		{name: "a flag wins over its environment twin", env: map[string]string{"AIRLOCK_MAX_TIMEOUT": "2h"}, args: []string{"--max-timeout", "3h"},
			check: func(c Config) bool { return c.MaxTimeout == 3*time.Hour }},
		{name: "the environment fills what flags leave", env: map[string]string{"AIRLOCK_APPROVAL_VALIDITY": "2m", "AIRLOCK_LOG_LEVEL": "debug"},
			args: []string{"--max-timeout", "3h"},
			check: func(c Config) bool {
				return c.ApprovalValidity == 2*time.Minute && c.LogLevel == "debug" && c.MaxTimeout == 3*time.Hour
			}},
		{name: "an empty environment variable means the default", env: map[string]string{"AIRLOCK_DB": ""},
			check: func(c Config) bool { return c.DB == "airlock.db" }},
		{name: "durations may be ISO 8601", args: []string{"--default-timeout", "PT30M"},
			check: func(c Config) bool { return c.DefaultTimeout == 30*time.Minute }},
		{name: "the session stale time from the environment", env: map[string]string{"AIRLOCK_SESSION_STALE_AFTER": "90s"},
			check: func(c Config) bool { return c.SessionStaleAfter == 90*time.Second }},
		{name: "the session stale time defaults to 5m", args: []string{},
			check: func(c Config) bool { return c.SessionStaleAfter == 5*time.Minute }},
		{name: "an admin token from the environment", env: map[string]string{"AIRLOCK_ADMIN_TOKEN": "ci-admin-token-0123456789"},
			check: func(c Config) bool { return c.AdminToken == "ci-admin-token-0123456789" }},

		{name: "default-timeout below min-timeout names both flags", args: []string{"--min-timeout", "2h"},
			wantErr: "--default-timeout (15m0s) must lie between min-timeout (2h0m0s) and max-timeout (168h0m0s)"},
		{name: "max-timeout below min-timeout", args: []string{"--min-timeout", "10s", "--max-timeout", "5s", "--default-timeout", "10s"},
			wantErr: "--max-timeout (5s) must be at least min-timeout (10s)"},
		{name: "max-approval-validity below approval-validity", args: []string{"--max-approval-validity", "1m"},
			wantErr: "--max-approval-validity (1m0s) must be at least approval-validity (5m0s)"},
		{name: "a zero duration is refused by name", args: []string{"--min-timeout", "0s"},
			wantErr: `invalid value "0s" for flag -min-timeout`},
		{name: "a bad duration in the environment names the variable", env: map[string]string{"AIRLOCK_MIN_TIMEOUT": "soon"},
			wantErr: "environment variable AIRLOCK_MIN_TIMEOUT: "},
		{name: "a postgres:// URL selects PostgreSQL", args: []string{"--db", "postgres://airlock@localhost/airlock?sslmode=disable"},
			check: func(c Config) bool {
				return c.DB == "postgres://airlock@localhost/airlock?sslmode=disable" && isPostgres(c.DB)
			}},
		{name: "a postgresql:// URL from the environment too", env: map[string]string{"AIRLOCK_DB": "postgresql://localhost/airlock"},
			check: func(c Config) bool { return c.DB == "postgresql://localhost/airlock" && isPostgres(c.DB) }},
		{name: "a SQLite path is not a PostgreSQL URL", args: []string{"--db", "data/postgres.db"},
			check: func(c Config) bool { return !isPostgres(c.DB) }},
		{name: "a PostgreSQL keyword string selects PostgreSQL too", args: []string{"--db", "host=db.internal dbname=airlock user=airlock"},
			check: func(c Config) bool { return isPostgres(c.DB) }},
		{name: "an unreadable PostgreSQL URL is refused without its password", args: []string{"--db", "postgres://airlock:hunter2@db:54x32/airlock"},
			wantErr: "--db is not a valid PostgreSQL URL (postgres://(unreadable URL))"},
		{name: "a short admin token", args: []string{"--admin-token", "short"},
			wantErr: "--admin-token must be at least 16 characters"},
		{name: "an address without a port", args: []string{"--addr", "localhost"},
			wantErr: `--addr "localhost" is not host:port`},
		{name: "an unknown log level", args: []string{"--log-level", "loud"},
			wantErr: `--log-level must be debug, info, warn or error, not "loud"`},
		{name: "an unknown log format", args: []string{"--log-format", "xml"},
			wantErr: `--log-format must be text or json, not "xml"`},
		{name: "a negative rate limit", args: []string{"--rate-limit", "-1"},
			wantErr: "--rate-limit must be positive"},
		{name: "a negative failed-authentication limit", args: []string{"--auth-failure-limit", "-1"},
			wantErr: "--auth-failure-limit must be positive"},
		{name: "a trusted proxy that is not an address", args: []string{"--trusted-proxies", "10.0.0.0/8,proxy.internal"},
			wantErr: `--trusted-proxies: "proxy.internal" is neither an IP address nor a CIDR prefix`},
		{name: "trusted proxies from the environment", env: map[string]string{"AIRLOCK_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.7"},
			check: func(c Config) bool {
				g := c.AuthGuard()
				return len(g.TrustedProxies) == 2 && g.TrustedProxies[1].String() == "192.0.2.7/32" && g.AddressBurst == 20
			}},
		{name: "a failed-authentication limit", args: []string{"--auth-failure-limit", "6"},
			check: func(c Config) bool { g := c.AuthGuard(); return g.AddressBurst == 6 && g.AddressRate == 0.1 }},
		{name: "negative heavy-read bounds", args: []string{"--max-heavy-reads", "-1"},
			wantErr: "--max-heavy-reads must be positive"},
		{name: "negative heavy-read bounds per token", env: map[string]string{"AIRLOCK_MAX_HEAVY_READS_PER_TOKEN": "-2"},
			wantErr: "--max-heavy-reads-per-token must be positive"},
		{name: "heavy-read bounds from flags and the environment", args: []string{"--max-heavy-reads", "16"},
			env:   map[string]string{"AIRLOCK_MAX_HEAVY_READS_PER_TOKEN": "4"},
			check: func(c Config) bool { return c.MaxHeavyReads == 16 && c.MaxHeavyReadsPerToken == 4 }},
		{name: "heavy-read bounds default", check: func(c Config) bool { return c.MaxHeavyReads == 8 && c.MaxHeavyReadsPerToken == 2 }},
		{name: "payloads kept for ever by default", check: func(c Config) bool { return c.RetainPayloads == 0 }},
		{name: "a retention in days", args: []string{"--retain-payloads", "90d"},
			check: func(c Config) bool { return c.RetainPayloads == 90*24*time.Hour }},
		{name: "a retention as a Go duration from the environment", env: map[string]string{"AIRLOCK_RETAIN_PAYLOADS": "36h"},
			check: func(c Config) bool { return c.RetainPayloads == 36*time.Hour }},
		{name: "a retention in ISO 8601", args: []string{"--retain-payloads", "P30D"},
			check: func(c Config) bool { return c.RetainPayloads == 30*24*time.Hour }},
		{name: "a retention of 0 keeps for ever", args: []string{"--retain-payloads", "0"},
			check: func(c Config) bool { return c.RetainPayloads == 0 }},
		{name: "a retention shorter than an hour", args: []string{"--retain-payloads", "59m"},
			wantErr: "--retain-payloads must be between 1h and 36500d"},
		{name: "a retention longer than a century", args: []string{"--retain-payloads", "36501d"},
			wantErr: "more than 36500 days"},
		{name: "a retention in weeks", args: []string{"--retain-payloads", "2w"},
			wantErr: "or in days like 90d"},
		{name: "a negative retention", args: []string{"--retain-payloads", "-1d"},
			wantErr: `"-1d" is not a duration`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			app := &App{Stderr: &stderr, LookupEnv: mapEnv(tt.env)}
			cfg, err := app.serveConfig(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error()+stderr.String(), tt.wantErr) {
					t.Fatalf("error %v (stderr %q), want one containing %q", err, stderr.String(), tt.wantErr)
				}
				if code := exitCode(&App{Stderr: &bytes.Buffer{}}, err); code != exitUsage {
					t.Errorf("exit code %d, want %d", code, exitUsage)
				}
				return
			}
			if err != nil {
				t.Fatalf("serveConfig: %v", err)
			}
			if !tt.check(cfg) {
				t.Errorf("unexpected config %+v", cfg)
			}
		})
	}
}

// TestLogFormatDefault: serve's logs are text on a terminal and JSON
// otherwise (a service manager, a container, a pipe), unless
// --log-format or AIRLOCK_LOG_FORMAT says.
func TestLogFormatDefault(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		terminal bool
		env      map[string]string
		args     []string
		want     string
	}{
		{"on a terminal, text", true, nil, nil, "text"},
		{"elsewhere, JSON", false, nil, nil, "json"},
		{"the flag wins on a terminal", true, nil, []string{"--log-format", "json"}, "json"},
		{"the variable wins elsewhere", false, map[string]string{"AIRLOCK_LOG_FORMAT": "text"}, nil, "text"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var asked any
			app := &App{Stderr: &bytes.Buffer{}, LookupEnv: mapEnv(c.env), IsTerminal: func(w any) bool { asked = w; return c.terminal }}
			cfg, err := app.serveConfig(c.args)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.LogFormat != c.want {
				t.Errorf("LogFormat = %q, want %q", cfg.LogFormat, c.want)
			}
			if c.args == nil && c.env == nil && asked != app.Stderr {
				t.Errorf("IsTerminal asked of %v, want of the logs' stream, stderr", asked)
			}
		})
	}
}

func TestConfigWithDefaults(t *testing.T) {
	t.Parallel()
	if got := (Config{}).WithDefaults(); got != DefaultConfig() {
		t.Errorf("Config{}.WithDefaults() = %+v, want DefaultConfig() %+v", got, DefaultConfig())
	}
	set := Config{Addr: "127.0.0.1:0", MaxTimeout: time.Hour, RateLimit: 5}.WithDefaults()
	if set.Addr != "127.0.0.1:0" || set.MaxTimeout != time.Hour || set.RateLimit != 5 || set.MinTimeout != time.Second {
		t.Errorf("WithDefaults changed set fields or missed zero ones: %+v", set)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
	if err := (Config{}).Validate(); err == nil {
		t.Error("a zero Config validated; Validate must run after WithDefaults")
	}
}

// TestOIDCFlags: the --oidc-* flags are checked at start, naming the
// flag to fix; token sign-in can be turned off only with OIDC.
func TestOIDCFlags(t *testing.T) {
	t.Parallel()
	ok := Config{OIDCIssuer: "https://id.example.com", OIDCClientID: "airlock", OIDCRedirectURL: "https://airlock.example.com/signin/oidc/callback"}
	with := func(f func(*Config)) Config { c := ok; f(&c); return c }
	for _, c := range []struct {
		name string
		cfg  Config
		want string // "" when valid
	}{
		{"complete", ok, ""},
		{"OIDC only", with(func(c *Config) { c.NoInboxTokenSignIn = true; c.OIDCAllowedDomains = "example.com, example.org" }), ""},
		{"token sign-in off without OIDC", Config{NoInboxTokenSignIn: true}, "--inbox-token-signin=false"},
		{"a client without an issuer", Config{OIDCClientID: "airlock"}, "--oidc-issuer"},
		{"an http issuer", with(func(c *Config) { c.OIDCIssuer = "http://id.example.com" }), "--oidc-issuer"},
		{"no client", with(func(c *Config) { c.OIDCClientID = "" }), "--oidc-client-id"},
		{"a redirect elsewhere", with(func(c *Config) { c.OIDCRedirectURL = "https://airlock.example.com/callback" }), "--oidc-redirect-url"},
		{"no redirect", with(func(c *Config) { c.OIDCRedirectURL = "" }), "--oidc-redirect-url"},
		{"an address for a domain", with(func(c *Config) { c.OIDCAllowedDomains = "ada@example.com" }), "--oidc-allowed-domains"},
	} {
		err := c.cfg.WithDefaults().Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	o := with(func(c *Config) {
		c.OIDCAllowedDomains = " example.com,,example.org "
		c.OIDCScopes = "openid email, profile groups"
	}).OIDC()
	if strings.Join(o.AllowedDomains, "|") != "example.com|example.org" || strings.Join(o.Scopes, "|") != "email|profile|groups" {
		t.Errorf("OIDC() = %+v", o)
	}
}

const testAdmin = "test-admin-token-0123456789"

// TestServeLifecycle runs a request's whole life over HTTP against the
// in-process server, and checks that its expiry scheduler runs.
func TestServeLifecycle(t *testing.T) {
	t.Parallel()
	srv, c := serveNew(t, "--min-timeout", "10ms")

	c.call("GET", "/healthz", "", "").want(t, 200, "healthz")
	c.call("GET", "/readyz", "", "").want(t, 200, "readyz")
	agent := c.mintToken(testAdmin, "lifecycle agent", "agent")
	reviewer := c.mintToken(testAdmin, "lifecycle reviewer", "reviewer")
	inst := c.call("POST", "/v1/instances", agent, `{"name":"laptop"}`).want(t, 201, "register instance").Str("id")

	create := `{"tool":"issue_refund","arguments":{"payment_id":"payment_123","amount":4900},"timeout":"30m","agent_reasoning":"charged twice"}`
	path := "/v1/instances/" + inst + "/approval-requests"
	req := c.call("POST", path, agent, create, "Idempotency-Key", "refund-1").want(t, 201, "create")
	id := req.Str("id")
	if req.Str("state") != "pending" || !strings.HasPrefix(id, "apr_") {
		t.Fatalf("create returned %s", req.Raw)
	}
	if replay := c.call("POST", path, agent, create, "Idempotency-Key", "refund-1").want(t, 200, "replay"); replay.Str("id") != id {
		t.Fatalf("replay returned another request: %s", replay.Raw)
	}

	list := c.call("GET", "/v1/approval-requests?state=pending", reviewer, "").want(t, 200, "list pending")
	if !strings.Contains(list.Raw, `"id":"`+id+`"`) {
		t.Fatalf("pending list lacks %s: %s", id, list.Raw)
	}
	c.call("POST", "/v1/approval-requests/"+id+"/decision", agent, `{"status":"approved"}`).want(t, 403, "agent deciding")
	dec := c.call("POST", "/v1/approval-requests/"+id+"/decision", reviewer, `{"status":"approved","note":"duplicate confirmed"}`).want(t, 200, "approve")
	if dec.Str("state") != "approved" || dec.Str("decision.status") != "approved" || dec.Str("decision.expires_at") == "" {
		t.Fatalf("approval returned %s", dec.Raw)
	}
	claim := c.call("POST", "/v1/approval-requests/"+id+"/execution", agent, "").want(t, 200, "claim")
	if claim.Str("execution.status") != "claimed" {
		t.Fatalf("claim returned %s", claim.Raw)
	}
	again := c.call("POST", "/v1/approval-requests/"+id+"/execution", agent, "")
	if again.Status/100 == 2 || again.Str("code") != "already_executed" {
		t.Fatalf("second claim: %d %s", again.Status, again.Raw)
	}
	done := c.call("PUT", "/v1/approval-requests/"+id+"/execution", agent, `{"status":"succeeded"}`).want(t, 200, "report")
	if done.Str("execution.status") != "succeeded" || done.Str("state") != "approved" {
		t.Fatalf("report returned %s", done.Raw)
	}

	// The scheduler, not a read, expires a request nobody decides: the
	// event stream shows request.expired without anyone reading it.
	checkSchedulerExpires(t, c, srv.url, path, agent, reviewer)

	metrics := c.call("GET", "/metrics", "", "").want(t, 200, "metrics")
	for _, m := range []string{`airlock_requests_total{state="approved"} 1`, "go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(metrics.Raw, m) {
			t.Errorf("/metrics lacks %q", m)
		}
	}
	if _, err := srv.stop(t); err != nil {
		t.Fatalf("serve returned %v", err)
	}
}

// watchEvents reads the event stream and sends the data of the first event
// of type want.
func watchEvents(ctx context.Context, t *testing.T, url, token, want string, found chan<- string) {
	testkit.Events(ctx, url, token, func(typ, data string) bool {
		if typ != want {
			return true
		}
		found <- data
		return false
	})
}

// checkSchedulerExpires creates a request with a 50ms deadline at path
// and checks that the scheduler, not a read, expires it: the event stream
// shows request.expired without anyone reading the request.
func checkSchedulerExpires(t *testing.T, c *api, url, path, agent, reviewer string) {
	t.Helper()
	expired := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go watchEvents(ctx, t, url, reviewer, "request.expired", expired)
	short := c.call("POST", path, agent, `{"tool":"noop","arguments":{},"timeout":"50ms"}`, "Idempotency-Key", "short-1").want(t, 201, "create short").Str("id")
	select {
	case data := <-expired:
		if !strings.Contains(data, short) || !strings.Contains(data, `"decided_by":"system:expiry"`) {
			t.Fatalf("expiry event %s is not for %s by the scheduler", data, short)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no request.expired event within 10s of a 50ms deadline: is the scheduler running?")
	}
}

// TestListenFailureKeepsFirstRun checks that a first start that cannot
// listen stores no token nobody saw: the next start still generates one.
func TestListenFailureKeepsFirstRun(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "airlock.db")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var stderr bytes.Buffer
	app := &App{Stderr: &stderr}
	err = app.Run(context.Background(), []string{"serve", "--addr", busy.Addr().String(), "--db", db})
	if code := exitCode(app, err); code != exitFailure || !strings.Contains(stderr.String(), "listen on "+busy.Addr().String()) {
		t.Fatalf("exit %d, stderr %q; want exit 1 and the address named", code, stderr.String())
	}
	store, err := sqlite.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.GetToken(context.Background(), provider.BootstrapTokenID)
	store.Close()
	if err == nil {
		t.Fatal("a start that could not listen stored a bootstrap token it never showed")
	}
	file := filepath.Join(t.TempDir(), "admin-token")
	ok := startApp(t, nil, "--addr", "127.0.0.1:0", "--db", db, "--admin-token-file", file)
	newAPI(t, ok.url).call("GET", "/v1/tokens", readTokenFile(t, file), "").want(t, 200, "list tokens with the token written")
}

// TestShutdownIsPrompt checks that stopping the server is not held up by a
// long-poll (which answers with the state as it is) or an event stream.
func TestShutdownIsPrompt(t *testing.T) {
	t.Parallel()
	srv, c := serveNew(t)
	agent := c.mintToken(testAdmin, "agent", "agent")
	reviewer := c.mintToken(testAdmin, "reviewer", "reviewer")
	inst := c.call("POST", "/v1/instances", agent, `{"name":"x"}`).want(t, 201, "instance").Str("id")
	id := c.call("POST", "/v1/instances/"+inst+"/approval-requests", agent, `{"tool":"t","arguments":{}}`,
		"Idempotency-Key", "k").want(t, 201, "create").Str("id")

	// An event stream, open until the server ends it.
	streamEnded := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		defer close(streamEnded)
		watchEvents(ctx, t, srv.url, reviewer, "never.sent", nil)
	}()
	// A long-poll, waiting on the server when it stops.
	polled := make(chan resp, 1)
	go func() {
		r, err := c.try("GET", "/v1/approval-requests/"+id+"?wait=60s", agent, "")
		if err != nil {
			r.Raw = err.Error()
		}
		polled <- r
	}()
	// Only the server knows when the long-poll has reached it: poll its
	// gauge, with a deadline.
	testkit.Eventually(t, 10*time.Second, "the long-poll to reach the server", func() bool {
		return strings.Contains(c.call("GET", "/metrics", "", "").Raw, "\nairlock_long_polls_waiting 1\n")
	})

	took, err := srv.stop(t)
	if err != nil {
		t.Fatalf("serve returned %v", err)
	}
	if took > 5*time.Second {
		t.Errorf("shutdown took %s with a 60s long-poll and an event stream open; want well under the 10s grace", took)
	}
	if r := <-polled; r.Status != 200 || r.Str("state") != "pending" {
		t.Errorf("the long-poll got %d %s; want 200 with the request still pending", r.Status, r.Raw)
	}
	<-streamEnded
}

// TestUncleanPathsAnswerProblems: a path with a doubled slash or a dot
// segment is a 404 problem naming the clean path, on the API, /mcp and the
// inbox alike, never a redirect (which a client may follow as a GET).
func TestUncleanPathsAnswerProblems(t *testing.T) {
	t.Parallel()
	srv, _ := serveNew(t)
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(hc.CloseIdleConnections)
	for path, clean := range map[string]string{
		"//v1/tokens":         "/v1/tokens",
		"/v1//tokens":         "/v1/tokens",
		"/inbox/../v1/tokens": "/v1/tokens",
		"/./healthz":          "/healthz",
		"//mcp":               "/mcp",
		"//":                  "/",
	} {
		for _, method := range []string{"GET", "POST"} {
			req, err := http.NewRequest(method, srv.url+path, strings.NewReader(`{"name":"x","role":"agent"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+testAdmin)
			req.Header.Set("Content-Type", "application/json")
			res, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			var p map[string]any
			if res.StatusCode != http.StatusNotFound || res.Header.Get("Content-Type") != "application/problem+json" ||
				json.Unmarshal(body, &p) != nil || p["code"] != "not_found" || !strings.HasSuffix(p["detail"].(string), "use "+clean) {
				t.Errorf("%s %s: %d %s %q %s", method, path, res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Location"), body)
			}
		}
	}
	// Nothing was created by the POSTs.
	c := newAPI(t, srv.url)
	if got := c.call("GET", "/v1/tokens", testAdmin, "").want(t, 200, "list tokens").Body["items"].([]any); len(got) != 1 {
		t.Errorf("%d tokens after the refused POSTs, want the admin's only", len(got))
	}
}
