package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlite"
	"github.com/airlockhq/airlock/store/storetest"
)

// TestPendingCount checks that migration 0003 computes an instance's
// pending count, which triggers keep (the suite follows it through every
// way a request enters or leaves pending: Instances/"pending count"), for
// a database made before it, and that deleting the instance then leaves
// none.
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

	// A database from before migration 0003: no column, no triggers.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DROP TRIGGER requests_pending_created`, `DROP TRIGGER requests_pending_ended`,
		`ALTER TABLE instances DROP COLUMN pending`, `DELETE FROM schema_migrations WHERE version = 3`,
	} {
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s = open(t, path, sqlite.WithClock(clock))
	want(4, "migration 0003 on an older database")
	if _, err := s.DeleteInstance(ctx, in.ID, "tok_a"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := func() error {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			return err
		}
		defer db.Close()
		return db.QueryRowContext(ctx, `SELECT pending FROM instances WHERE id = ?`, in.ID).Scan(&n)
	}(); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("after deleting the instance: pending %d, want 0", n)
	}
}
