package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresURLEnv names the variable that points the tests at a PostgreSQL
// database. Every test works in a fresh schema of its own, dropped when it
// ends, so any database the user may create schemas in will do; without
// it the tests use DefaultPostgresURL, the database these machines run.
const (
	PostgresURLEnv     = "AIRLOCK_TEST_POSTGRES"
	DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

var reach struct {
	once sync.Once
	url  string
	err  error
}

// PostgresURL returns the test database's URL once it is known to answer.
// When it does not, t is Unavailable: skipped, naming the variable to set,
// or under CI failed.
func PostgresURL(t testing.TB) string {
	t.Helper()
	reach.once.Do(func() {
		reach.url = os.Getenv(PostgresURLEnv)
		if reach.url == "" {
			reach.url = DefaultPostgresURL
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, reach.url)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		reach.err = err
	})
	if reach.err != nil {
		Unavailable(t, fmt.Sprintf("PostgreSQL at %s does not answer: %v; set %s to the URL of a database these tests may create schemas in",
			Redact(reach.url), reach.err, PostgresURLEnv))
	}
	return reach.url
}

// Redact hides a URL's password, for messages.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unreadable URL)"
	}
	return u.Redacted()
}

// ExecSQL runs one statement on a connection of its own to dbURL.
func ExecSQL(dbURL, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// SchemaName names a new schema (prefix and random hex) without creating
// it, for a store that creates its own; the schema is dropped with
// everything in it when t ends, after whatever was opened on it later is
// closed (cleanups run last first).
func SchemaName(t testing.TB, prefix string) string {
	t.Helper()
	base := PostgresURL(t)
	var b [6]byte
	rand.Read(b[:])
	name := prefix + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		if err := ExecSQL(base, "DROP SCHEMA IF EXISTS "+name+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// CreateSchema is SchemaName for schemas that must exist before Airlock
// starts, as an operator's would: it creates the schema too.
func CreateSchema(t testing.TB, prefix string) string {
	t.Helper()
	name := SchemaName(t, prefix)
	if err := ExecSQL(PostgresURL(t), "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("create schema %s: %v", name, err)
	}
	return name
}

// SchemaURL returns the test database's URL that puts Airlock in schema,
// as an operator writes it for --db (search_path), with extra URL
// parameters (name, value pairs) set.
func SchemaURL(t testing.TB, schema string, params ...string) string {
	t.Helper()
	u, err := url.Parse(PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}
