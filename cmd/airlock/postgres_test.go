package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/jackc/pgx/v5"
)

// pgSchemaURL creates a fresh schema, dropped with everything in it when t
// ends (after the servers using it have stopped: cleanups run last first),
// and returns the database URL with search_path naming it, as an operator
// would write it for `airlock serve --db`.
func pgSchemaURL(t *testing.T) string {
	t.Helper()
	return testkit.SchemaURL(t, testkit.CreateSchema(t, "t_cmd_"), "pool_max_conns", "4")
}

func TestRedactDB(t *testing.T) {
	t.Parallel()
	tests := []struct{ db, want string }{
		{"airlock.db", "airlock.db"},
		{"/var/lib/airlock/airlock.db", "/var/lib/airlock/airlock.db"},
		{"postgres://airlock@db:5432/airlock?sslmode=verify-full", "postgres://airlock@db:5432/airlock?sslmode=verify-full"},
		{"postgres://airlock:hunter2@db:5432/airlock", "postgres://airlock:xxxxx@db:5432/airlock"},
		{"postgresql://airlock:hunter2@db/airlock?sslmode=require", "postgresql://airlock:xxxxx@db/airlock?sslmode=require"},
		{"postgres://airlock@db/airlock?password=hunter2&sslmode=require", "postgres://airlock@db/airlock?password=xxxxx&sslmode=require"},
		{"postgres://airlock:hunter2@db:54x32/airlock", "postgres://(unreadable URL)"},
		{"host=db.internal dbname=airlock user=airlock password=hunter2 sslmode=require", "host=db.internal dbname=airlock user=airlock password=xxxxx sslmode=require"},
		{"host=db password = 'hunter2 \\' x' dbname=airlock", "host=db password = xxxxx dbname=airlock"},
		{"password=hunter2", "password=xxxxx"},
	}
	for _, tt := range tests {
		got := redactDB(tt.db)
		if got != tt.want {
			t.Errorf("redactDB(%q) = %q, want %q", tt.db, got, tt.want)
		}
		if strings.Contains(got, "hunter2") {
			t.Errorf("redactDB(%q) = %q shows the password", tt.db, got)
		}
	}
}

// TestServeUnreachablePostgres checks that a database that does not answer
// stops the start with an error that names it, without its password.
func TestServeUnreachablePostgres(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	app := &App{Stderr: &stderr}
	err := app.Run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0",
		"--db", "postgres://airlock:hunter2@127.0.0.1:1/airlock?sslmode=disable&connect_timeout=5"})
	if code := exitCode(app, err); code != exitFailure {
		t.Fatalf("exit code %d (err %v), want %d", code, err, exitFailure)
	}
	out := stderr.String()
	if !strings.Contains(out, "open database postgres://airlock:xxxxx@127.0.0.1:1/airlock") || strings.Contains(out, "hunter2") {
		t.Errorf("want an error naming the database without its password; got %q", out)
	}
}

// TestServeOnPostgres runs a request's life over HTTP against the
// in-process server on PostgreSQL: --db takes the URL (its search_path
// picks the schema), the notice and the logs never show the password,
// readiness reflects the database, and the scheduler expires requests.
func TestServeOnPostgres(t *testing.T) {
	t.Parallel()
	db := pgSchemaURL(t)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	// Trust authentication ignores a password, so give one when the URL
	// has none, to check that it is never shown.
	password, ok := u.User.Password()
	if !ok {
		password = "tracer-" + hex.EncodeToString([]byte(t.Name()))[:12]
		u.User = url.UserPassword(u.User.Username(), password)
		db = u.String()
	}
	srv := startApp(t, map[string]string{"AIRLOCK_DB": db}, "--addr", "127.0.0.1:0", "--admin-token", testAdmin,
		"--min-timeout", "10ms", "--log-level", "debug")
	c := newAPI(t, srv.url)
	c.call("GET", "/readyz", "", "").want(t, 200, "readyz")
	agent := c.mintToken(testAdmin, "pg agent", "agent")
	reviewer := c.mintToken(testAdmin, "pg reviewer", "reviewer")
	inst := c.call("POST", "/v1/instances", agent, `{"name":"pg"}`).want(t, 201, "instance").Str("id")
	path := "/v1/instances/" + inst + "/approval-requests"
	id := c.call("POST", path, agent, `{"tool":"t","arguments":{"n":1}}`, "Idempotency-Key", "k1").want(t, 201, "create").Str("id")
	if r := c.call("POST", path, agent, `{"tool":"t","arguments":{"n":1}}`, "Idempotency-Key", "k1").want(t, 200, "replay"); r.Str("id") != id {
		t.Fatalf("replay answered another request: %s", r.Raw)
	}
	c.call("POST", "/v1/approval-requests/"+id+"/decision", reviewer, `{"status":"approved"}`).want(t, 200, "approve")
	c.call("POST", "/v1/approval-requests/"+id+"/execution", agent, "").want(t, 200, "claim")
	if r := c.call("POST", "/v1/approval-requests/"+id+"/execution", agent, ""); r.Str("code") != "already_executed" {
		t.Fatalf("second claim: %d %s", r.Status, r.Raw)
	}

	checkSchedulerExpires(t, c, srv.url, path, agent, reviewer)
	metrics := c.call("GET", "/metrics", "", "").want(t, 200, "metrics")
	if !strings.Contains(metrics.Raw, "\nairlock_requests_pending 0\n") {
		t.Errorf("/metrics lacks airlock_requests_pending 0, counted in the database")
	}

	if _, err := srv.stop(t); err != nil {
		t.Fatalf("serve returned %v", err)
	}
	out := srv.out.String()
	if strings.Contains(out, password) {
		t.Errorf("the server's output shows the database password:\n%s", out)
	}
	if !strings.Contains(out, "database "+redactDB(db)+")") || !strings.Contains(out, ":xxxxx@") {
		t.Errorf("the listening notice does not name the database with its password hidden:\n%s", out)
	}
}

// TestReplicaExpiresAStoppedReplicasRequests checks that replicas sharing a
// database expire each other's requests: a request is created on replica
// A, A stops before its deadline, and replica B's scheduler, which never
// saw the request created, expires it within 2 s of the deadline.
func TestReplicaExpiresAStoppedReplicasRequests(t *testing.T) {
	t.Parallel()
	const window = time.Second
	db := pgSchemaURL(t)
	args := []string{"--addr", "127.0.0.1:0", "--db", db, "--admin-token", testAdmin, "--min-timeout", "10ms"}
	a := startApp(t, nil, args...)
	b := startApp(t, nil, args...)
	c := newAPI(t, a.url)
	agent := c.mintToken(testAdmin, "agent", "agent")
	reviewer := c.mintToken(testAdmin, "reviewer", "reviewer")
	inst := c.call("POST", "/v1/instances", agent, `{"name":"x"}`).want(t, 201, "instance").Str("id")

	expired := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go watchEvents(ctx, t, b.url, reviewer, "request.expired", expired)
	// B's scheduler has read the next deadline (none) by the time B serves
	// its event stream; give it a pending request with a far deadline too,
	// so it sleeps a long time unless something wakes it.
	c.call("POST", "/v1/instances/"+inst+"/approval-requests", agent, `{"tool":"t","arguments":{},"timeout":"1h"}`,
		"Idempotency-Key", "far").want(t, 201, "create a far request")
	r := c.call("POST", "/v1/instances/"+inst+"/approval-requests", agent,
		fmt.Sprintf(`{"tool":"t","arguments":{},"timeout":"%s"}`, window), "Idempotency-Key", "near").want(t, 201, "create on A")
	deadline, err := time.Parse(time.RFC3339Nano, r.Str("deadline_at"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	if time.Now().After(deadline) {
		t.Skip("replica A took longer than the window to stop; nothing to prove this time")
	}
	select {
	case data := <-expired:
		if !strings.Contains(data, r.Str("id")) || !strings.Contains(data, `"decided_by":"system:expiry"`) {
			t.Fatalf("expiry event %s is not for %s by a scheduler", data, r.Str("id"))
		}
		if late := time.Since(deadline); late > 2*time.Second {
			t.Errorf("replica B expired A's request %s after its deadline; want within 2s", late)
		}
	case <-time.After(time.Until(deadline.Add(2 * time.Second))):
		t.Fatalf("replica B did not expire, within 2s of its deadline, a request created on replica A, which stopped; B's output:\n%s", b.out)
	}
}

// TestServeOnPostgresKeywordString checks that --db also takes a libpq
// keyword string (as psql does), schema and all, and hides its password.
func TestServeOnPostgresKeywordString(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgSchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	password, ok := u.User.Password()
	if !ok {
		password = "tracer-keyword-secret" // ignored by trust authentication
	}
	dsn := fmt.Sprintf("host=%s port=%s user=%s password='%s' dbname=%s sslmode=%s search_path=%s",
		u.Hostname(), cmp.Or(u.Port(), "5432"), u.User.Username(), password, strings.TrimPrefix(u.Path, "/"),
		cmp.Or(u.Query().Get("sslmode"), "prefer"), u.Query().Get("search_path"))
	srv := startApp(t, nil, "--addr", "127.0.0.1:0", "--db", dsn, "--admin-token", testAdmin)
	c := newAPI(t, srv.url)
	c.call("GET", "/readyz", "", "").want(t, 200, "readyz")
	c.mintToken(testAdmin, "agent", "agent")
	if _, err := srv.stop(t); err != nil {
		t.Fatalf("serve returned %v", err)
	}
	if out := srv.out.String(); strings.Contains(out, password) || !strings.Contains(out, "password=xxxxx") {
		t.Errorf("the output shows the password, or not the keyword string with it hidden:\n%s", out)
	}
}

// ownDatabase creates a database of the test's own beside the one base
// names, dropped when the test ends, and returns its URL: a bench run there
// is alone, whatever other tests' runs make and drop in theirs meanwhile.
func ownDatabase(t *testing.T, base string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	name := "airlock_test_" + strings.ToLower(airlock.NewID(""))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(base)
	if err != nil || cfg.Database == "" {
		t.Fatalf("the test database's URL %s: %v", testkit.Redact(base), err)
	}
	u.Path = "/" + name
	return u.String()
}

// TestBenchOnPostgresDropsItsSchemas runs a short lifecycle bench and its raw
// baselines (direct and over HTTP) on PostgreSQL, with the pool's parameters in the URL as an
// operator may write it, and checks that the run drops the schemas it made.
// (pgx.Connect passed pool_min_conns to the server as a setting: the raw
// baseline could not connect and the run's schema was left behind.)
func TestBenchOnPostgresDropsItsSchemas(t *testing.T) {
	base := ownDatabase(t, testkit.PostgresURL(t))
	benchSchemas := func() map[string]bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'airlock\_bench\_%'`)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		set := map[string]bool{}
		for _, n := range names {
			set[n] = true
		}
		return set
	}
	before := benchSchemas()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "4")
	q.Set("pool_min_conns", "2")
	u.RawQuery = q.Encode()

	var stdout, stderr bytes.Buffer
	app := &App{Stdout: &stdout, Stderr: &stderr}
	if err := app.Run(t.Context(), []string{"bench", "--db", u.String(), "--duration", "30s", "--count", "6", "--clients", "2", "--http-baseline"}); err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"ratio to raw", "raw over HTTP (2 conn, 2 clients)", "what Airlock adds"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("no %q in the report (raw baselines direct and over HTTP):\n%s", want, stdout.String())
		}
	}
	for name := range benchSchemas() {
		if !before[name] {
			t.Errorf("the run left its schema %s behind\nprogress:\n%s", name, stderr.String())
		}
	}
}
