package rest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/auditlog"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/store"
)

// manyLeaves is a store whose audit tree has size leaves, made as they
// are read (one leaf's bytes at every index): an export's memory can be
// measured over a million events without writing them first.
type manyLeaves struct {
	store.Store
	leaf []byte
	// size and pages are atomic: the test sets and reads them while the
	// server's goroutines read and count.
	size, pages atomic.Int64
}

func (m *manyLeaves) TreeSize(context.Context) (int64, error) { return m.size.Load(), nil }

func (m *manyLeaves) AuditLeaves(_ context.Context, start int64, limit int) ([]store.AuditLeaf, error) {
	m.pages.Add(1)
	n := max(0, min(int64(limit), m.size.Load()-start))
	out := make([]store.AuditLeaf, n)
	for i := range out {
		out[i] = store.AuditLeaf{Index: start + int64(i), EventID: start + int64(i) + 1, Leaf: m.leaf}
	}
	return out, nil
}

// heapWatch is a writer that discards an export and samples the heap
// every sampleEvery bytes: the most it held above base.
type heapWatch struct {
	base, peak  uint64
	n, next     int64
	sampleEvery int64
}

func (h *heapWatch) Write(p []byte) (int, error) {
	h.n += int64(len(p))
	if h.n >= h.next {
		h.next = h.n + h.sampleEvery
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		h.peak = max(h.peak, ms.HeapAlloc)
	}
	return len(p), nil
}

// TestAuditExportStreams: an export of a million events in JSON lines
// (200,000 in CSV and OCSF, which take longer to write; a tenth of each
// with -short, a fiftieth under the race detector) holds a page, not the export: the
// process's heap grows by at most 64 MiB while it is read to the end, and
// the store is read a page (1,000 leaves) at a time.
func TestAuditExportStreams(t *testing.T) {
	t.Parallel()
	sizes := map[string]int64{"jsonl": 1_000_000, "csv": 200_000, "ocsf": 200_000}
	switch {
	case testkit.Race: // some 30 times slower
		for f := range sizes {
			sizes[f] /= 50
		}
	case testkit.Short():
		for f := range sizes {
			sizes[f] /= 10
		}
	}
	payloads, err := auditlog.RequestPayloads(airlock.Request{ID: "apr_x", Tool: "issue_refund", Arguments: []byte(`{"amount":4900}`), AgentReasoning: "=1+1"})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := auditlog.NewLeaf(airlock.Event{ID: 1, UID: "0123456789abcdef0123456789abcdef", Type: airlock.EventRequestApproved,
		At: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), Actor: "tok_reviewer", RequestID: "apr_x", InstanceID: "ins_x", State: airlock.StateApproved}, &payloads)
	if err != nil {
		t.Fatal(err)
	}
	var many *manyLeaves
	b := setup(t, func(o *options) {
		o.validate = false // the validator would hold the whole answer to check it
		o.checkpointEvery = -1
		o.wrapStore = func(s store.Store) store.Store {
			many = &manyLeaves{Store: s, leaf: leaf}
			return many
		}
	})
	for _, format := range []string{"jsonl", "csv", "ocsf"} {
		size := sizes[format]
		many.pages.Store(0)
		many.size.Store(size)
		res, err := b.client.Do(b.newRequest(context.Background(), t, req{method: "GET", path: "/v1/audit/export?format=" + format +
			"&since=2026-01-01T00:00:00Z", token: b.auditor}))
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s export: %d", format, res.StatusCode)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		w := &heapWatch{base: ms.HeapAlloc, peak: ms.HeapAlloc, sampleEvery: 8 << 20}
		start := time.Now()
		n, err := io.Copy(w, res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatalf("%s export: %v", format, err)
		}
		took := time.Since(start)
		growth := float64(w.peak-w.base) / (1 << 20)
		t.Logf("%s export of %d events: %d MiB in %s (%.0f events/s), heap +%.1f MiB at most, %d store reads",
			format, size, n>>20, took.Round(time.Millisecond), float64(size)/took.Seconds(), growth, many.pages.Load())
		if n < size*100 {
			t.Fatalf("%s export of %d events is %d bytes", format, size, n)
		}
		if growth > 64 {
			t.Errorf("%s export of %d events grew the heap by %.1f MiB; want at most 64", format, size, growth)
		}
		if want := size / 1000; many.pages.Load() < want {
			t.Errorf("%s export read the store %d times; want a page of 1,000 at a time (%d)", format, many.pages.Load(), want)
		}
	}
}

// failingLeaves is manyLeaves whose store fails once the export is past
// its first page.
type failingLeaves struct{ *manyLeaves }

func (f failingLeaves) AuditLeaves(ctx context.Context, start int64, limit int) ([]store.AuditLeaf, error) {
	if start >= 1000 {
		return nil, airlock.Errorf(airlock.CodeUnavailable, "the store went away")
	}
	return f.manyLeaves.AuditLeaves(ctx, start, limit)
}

// TestAuditExportCutShort: an export the store fails in the middle of is
// cut short, the connection closed before the end of the body, so the
// client sees an error rather than an export that looks whole; the server
// logs why.
func TestAuditExportCutShort(t *testing.T) {
	t.Parallel()
	leaf, err := auditlog.NewLeaf(airlock.Event{ID: 1, UID: "0123456789abcdef0123456789abcdef", Type: airlock.EventTokenCreated,
		At: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), Actor: "tok_admin"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, func(o *options) {
		o.validate = false
		o.checkpointEvery = -1
		o.wrapStore = func(s store.Store) store.Store {
			m := &manyLeaves{Store: s, leaf: leaf}
			m.size.Store(5000)
			return failingLeaves{m}
		}
	})
	res, err := b.client.Do(b.newRequest(context.Background(), t, req{method: "GET", path: "/v1/audit/export", token: b.auditor}))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || err == nil {
		t.Fatalf("export failing after its first page: %d, %d bytes, read error %v; want 200 and a body cut short", res.StatusCode, len(body), err)
	}
	if lines := bytes.Count(body, []byte("\n")); lines < 1 || lines > 1000 {
		t.Fatalf("the cut export has %d lines; want at most its first page", lines)
	}
	if logged := b.logs.Take(); len(logged) != 1 || !strings.Contains(logged[0], "audit export cut short") {
		t.Fatalf("logged %q; want the export cut short, once", logged)
	}
}
