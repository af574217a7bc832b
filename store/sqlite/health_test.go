package sqlite

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// TestDiskFull fills the database as a full disk would and checks what
// callers and readiness see, and that the store recovers by itself. The
// write connection's max_page_count makes SQLite refuse to grow the file:
// SQLITE_FULL, the code a full disk returns, through the same code path
// (the real binary under a file size limit is TestDiskFullAnswers503 in
// cmd/airlock).
func TestDiskFull(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	ctx := t.Context()
	in, err := s.CreateInstance(ctx, airlock.Instance{ID: airlock.NewID(airlock.PrefixInstance), OwnerID: "tok_a", Name: "x"}, "tok_a")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	create := func() (airlock.Request, error) {
		n++
		key := fmt.Sprintf("key_%d", n)
		r, _, err := s.CreateRequest(ctx, store.NewRequestParams{
			Request: airlock.Request{
				ID: airlock.NewID(airlock.PrefixRequest), InstanceID: in.ID, OwnerID: "tok_a", Kind: airlock.KindToolCall,
				Tool: "t", Arguments: json.RawMessage(`{"pad":"` + strings.Repeat("x", 3000) + `"}`), Timeout: "10m",
				IdempotencyKey: key, Fingerprint: "fp_" + key,
			},
			Window: 10 * time.Minute, Actor: "tok_a",
		})
		return r, err
	}
	var acked []string
	for range 5 {
		r, err := create()
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, r.ID)
	}

	var pages int
	if err := s.write.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.write.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages)); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping before any write failed = %v; readiness follows what writes see", err)
	}
	var full error
	for range 100 {
		r, err := create()
		if err != nil {
			full = err
			break
		}
		acked = append(acked, r.ID) // rows that still fitted in free space
	}
	if full == nil {
		t.Fatal("100 creates fitted in a database that may not grow")
	}
	e, ok := errors.AsType[*airlock.Error](full)
	if !ok || e.Code != airlock.CodeUnavailable || !strings.Contains(e.Message, "disk is full") {
		t.Fatalf("create on a full disk = %#v, want unavailable saying the disk is full", full)
	}
	if se, ok := errors.AsType[*msqlite.Error](full); !ok || se.Code()&0xff != sqlite3.SQLITE_FULL {
		t.Errorf("the cause %v is not SQLite's SQLITE_FULL; the log would not show it", e.Err)
	}
	if err := s.Ping(ctx); airlock.ErrorCode(err) != airlock.CodeUnavailable {
		t.Fatalf("Ping after a write failed for a full disk = %v, want unavailable", err)
	}
	if err := s.Ping(ctx); airlock.ErrorCode(err) != airlock.CodeUnavailable {
		t.Fatalf("Ping again, the disk still full = %v, want unavailable", err)
	}

	// Space is freed: the probe commits, and writes work, without reopening.
	if _, err := s.write.ExecContext(ctx, `PRAGMA max_page_count = 1073741823`); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping once space is freed = %v, want ready", err)
	}
	r, err := create()
	if err != nil {
		t.Fatalf("create once space is freed: %v", err)
	}
	acked = append(acked, r.ID)
	for _, id := range acked {
		if _, err := s.GetRequest(ctx, id); err != nil {
			t.Errorf("acknowledged request %s: %v", id, err)
		}
	}
	var probes int
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM write_probe`).Scan(&probes); err != nil || probes != 0 {
		t.Errorf("write_probe holds %d rows (%v); the probe must leave nothing", probes, err)
	}
}

// TestRecoveredByAWrite checks that a caller's write that commits clears
// the failure as the probe does: readiness answers a plain read again.
func TestRecoveredByAWrite(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	ctx := t.Context()
	s.writesFailing.Store(true)
	if _, err := s.CreateInstance(ctx, airlock.Instance{ID: airlock.NewID(airlock.PrefixInstance), OwnerID: "tok_a", Name: "x"}, "tok_a"); err != nil {
		t.Fatal(err)
	}
	if s.writesFailing.Load() {
		t.Fatal("a committed write left the store marked as failing")
	}
}

// TestNotRecoveredByAWriteOfNothing checks that a write that commits
// having changed no row (a sweep with nothing to delete) leaves the store
// marked as failing: such a commit writes nothing to the disk, and
// succeeds on a full one.
func TestNotRecoveredByAWriteOfNothing(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	s.writesFailing.Store(true)
	if n, err := s.SweepTasks(t.Context(), time.Hour, 10); err != nil || n != 0 {
		t.Fatalf("SweepTasks = %d, %v; want nothing swept", n, err)
	}
	if !s.writesFailing.Load() {
		t.Fatal("a commit that changed nothing cleared the failure")
	}
}

// TestUnavailableCodes checks which SQLite failures mean that the store
// cannot serve now: another process holding the file past the busy
// timeout, a read-only connection's write and a closed store; a violated
// constraint stays internal.
func TestUnavailableCodes(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	ctx := t.Context()

	_, err := s.read.ExecContext(ctx, `INSERT INTO write_probe (id, pad) VALUES (1, x'00')`)
	if e := translate(err, "database", "test"); airlock.ErrorCode(e) != airlock.CodeUnavailable || !strings.Contains(e.Error(), "read-only") {
		t.Errorf("a write on a read-only connection = %v, want unavailable saying read-only", e)
	}

	other, err := Open(ctx, s.path, WithBusyTimeout(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := s.write.DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	_, err = other.CreateInstance(ctx, airlock.Instance{ID: airlock.NewID(airlock.PrefixInstance), OwnerID: "tok_a", Name: "x"}, "tok_a")
	conn.ExecContext(ctx, `ROLLBACK`)
	conn.Close()
	if airlock.ErrorCode(err) != airlock.CodeUnavailable || !strings.Contains(err.Error(), "locked by another process") {
		t.Errorf("a write while another process holds the lock = %v, want unavailable saying so", err)
	}

	_, err = s.write.ExecContext(ctx, `INSERT INTO write_probe (id, pad) VALUES (NULL, NULL)`)
	if e := translate(err, "database", "test"); airlock.ErrorCode(e) != airlock.CodeInternal {
		t.Errorf("a violated constraint = %v, want internal", e)
	}

	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = other.CreateInstance(ctx, airlock.Instance{ID: airlock.NewID(airlock.PrefixInstance), OwnerID: "tok_a", Name: "y"}, "tok_a")
	if airlock.ErrorCode(err) != airlock.CodeUnavailable {
		t.Errorf("a write on a closed store = %v, want unavailable", err)
	}
}

// TestOpenBesideBusyWriter: a file whose schema is current opens in a
// second process while the first holds the write lock (docs/operations.md:
// a second process on the same file works): opening only reads.
func TestOpenBesideBusyWriter(t *testing.T) {
	t.Parallel()
	s := openInternal(t)
	ctx := t.Context()
	conn, err := s.write.DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, `ROLLBACK`)
	other, err := Open(ctx, s.path, WithBusyTimeout(10*time.Millisecond))
	if err != nil {
		t.Fatalf("open beside a held write lock: %v", err)
	}
	defer other.Close()
	if _, err := other.ListEvents(ctx, 0, 10); err != nil {
		t.Fatalf("read beside a held write lock: %v", err)
	}
}
