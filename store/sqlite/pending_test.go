package sqlite_test

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlite"
	"github.com/airlockhq/airlock/store/storetest"
)

// TestPendingCount checks an instance's pending count since migration
// 0034, which counts it when read instead of keeping it by triggers (the
// suite follows it through every way a request enters or leaves pending:
// Instances/"pending count"): on a database that kept it by triggers,
// the count is the same after the migration, the triggers and the column
// are gone, and deleting the instance leaves none pending.
func TestPendingCount(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "airlock.db")
	clock := storetest.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := open(t, path, sqlite.WithClock(clock))
	in, err := s.CreateInstance(ctx, airlock.Instance{OwnerID: "tok_a", Name: "x"}, "tok_a")
	if err != nil {
		t.Fatal(err)
	}
	create := func(window time.Duration, initial *airlock.InitialDecision) airlock.Request {
		t.Helper()
		key := airlock.NewID("key_")
		r, _, err := s.CreateRequest(ctx, store.NewRequestParams{
			Request: airlock.Request{InstanceID: in.ID, OwnerID: "tok_a", Tool: "t", Arguments: json.RawMessage(`{}`),
				IdempotencyKey: key, Fingerprint: key},
			Window: window, Actor: "tok_a", Initial: initial,
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	want := func(n int, after string) {
		t.Helper()
		got, err := s.GetInstance(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.PendingCount != n {
			t.Fatalf("after %s: PendingCount %d, want %d", after, got.PendingCount, n)
		}
	}

	// Requests in every state: four pending.
	var rs []airlock.Request
	for range 6 {
		rs = append(rs, create(time.Hour, nil))
	}
	create(time.Hour, &airlock.InitialDecision{Status: airlock.StateDenied})
	if _, err := s.Decide(ctx, store.DecideParams{ID: rs[0].ID, Status: airlock.StateApproved, Validity: time.Minute, Actor: "tok_r"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, rs[1].ID, "tok_a"); err != nil {
		t.Fatal(err)
	}
	due := create(time.Second, nil)
	clock.Advance(2 * time.Second)
	if got, err := s.ExpireDue(ctx, 10); err != nil || len(got) != 1 || got[0].ID != due.ID {
		t.Fatalf("ExpireDue = %v, %v; want %s", got, err, due.ID)
	}
	want(4, "requests in every state")

	// A database from before migration 0034: the column and triggers of
	// 0003 again, and 0034 forgotten.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m0003, err := os.ReadFile("migrations/0003_pending_count.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{string(m0003), `DELETE FROM schema_migrations WHERE version = 34`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%.40s…: %v", q, err)
		}
	}
	s = open(t, path, sqlite.WithClock(clock))
	want(4, "migration 0034 on an older database")
	var leftovers, n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name IN ('requests_pending_created', 'requests_pending_ended')`).Scan(&leftovers); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('instances') WHERE name = 'pending'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if leftovers+n != 0 {
		t.Fatalf("after migration 0034: %d pending-count triggers and %d pending columns, want none", leftovers, n)
	}
	if _, err := s.DeleteInstance(ctx, in.ID, "tok_a"); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM requests WHERE instance_id = ? AND state = 'pending'`, in.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("after deleting the instance: %d pending, want 0", n)
	}
}
