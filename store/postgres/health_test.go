package postgres_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/tcpproxy"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/store/postgres"
)

// TestDatabaseDown cuts the network between the store and PostgreSQL (a
// proxy in the test resets every connection, old and new, as a database
// restart does; the server itself is untouched) and checks that calls
// fail unavailable with the network error as their cause, that Ping says
// so, and that once the network is back the store serves again without
// being reopened, with everything acknowledged before the cut.
func TestDatabaseDown(t *testing.T) {
	t.Parallel()
	proxy, dbURL, err := tcpproxy.ForURL(testkit.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	s, err := postgres.Open(t.Context(), dbURL, postgres.WithSchema(testkit.SchemaName(t, "t_")), postgres.WithMaxConns(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	in := instance(t, s, "tok_a")
	var acked []string
	for range 3 {
		r, _, err := s.CreateRequest(ctx, params(in))
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, r.ID)
	}

	proxy.Cut()
	_, _, err = s.CreateRequest(ctx, params(in))
	e, ok := errors.AsType[*airlock.Error](err)
	if !ok || e.Code != airlock.CodeUnavailable || !strings.Contains(e.Message, "database") {
		t.Fatalf("create with the database cut off = %v, want unavailable naming the database", err)
	}
	t.Logf("create with the database cut off: %v", err)
	if _, ok := errors.AsType[net.Error](e.Err); !ok && !strings.Contains(e.Err.Error(), "connect") {
		t.Errorf("the cause %v is neither the network's error nor pgx's connect error; the log would not show what happened", e.Err)
	}
	if _, err := s.GetRequest(ctx, acked[0]); airlock.ErrorCode(err) != airlock.CodeUnavailable {
		t.Errorf("read with the database cut off = %v, want unavailable", err)
	}
	if err := s.Ping(ctx); airlock.ErrorCode(err) != airlock.CodeUnavailable {
		t.Fatalf("Ping with the database cut off = %v, want unavailable", err)
	}

	proxy.Restore()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping once the database is back = %v, want ready (without reopening the store)", err)
	}
	r, _, err := s.CreateRequest(ctx, params(in))
	if err != nil {
		t.Fatalf("create once the database is back: %v", err)
	}
	acked = append(acked, r.ID)
	for _, id := range acked {
		if _, err := s.GetRequest(ctx, id); err != nil {
			t.Errorf("acknowledged request %s: %v", id, err)
		}
	}
}
