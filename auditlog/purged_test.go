package auditlog

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// TestPurgedLeaves: every leaf of a request that has a request.purged
// leaf is reported, before and after it, and none of another request or
// of no request; a leaf that does not parse is named by its index.
func TestPurgedLeaves(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	payloads := &Payloads{Tool: DigestString("deploy"), Reasoning: DigestString("why")}
	leaf := func(typ airlock.EventType, request string) []byte {
		t.Helper()
		e := airlock.Event{Type: typ, UID: airlock.NewID(""), At: at, Actor: "tok_a", RequestID: request}
		var p *Payloads
		if request != "" {
			p = payloads
		}
		b, err := NewLeaf(e, p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	leaves := [][]byte{
		leaf(airlock.EventTokenCreated, ""),
		leaf(airlock.EventRequestCreated, "apr_a"),
		leaf(airlock.EventRequestCreated, "apr_b"),
		leaf(airlock.EventRequestDenied, "apr_a"),
		leaf(airlock.EventRequestApproved, "apr_b"),
		leaf(airlock.EventRequestPurged, "apr_a"),
		leaf(airlock.EventExecutionReported, "apr_a"),
	}
	entries := make([]Entry, len(leaves))
	for i, l := range leaves {
		entries[i] = Entry{Index: int64(i), Leaf: l}
	}
	got, err := PurgedLeaves(Entries(entries))
	if err != nil || !slices.Equal(got, []int64{1, 3, 5, 6}) {
		t.Fatalf("PurgedLeaves = %v, %v; want apr_a's leaves [1 3 5 6]", got, err)
	}
	if got, err := PurgedLeaves(Entries(entries[:5])); err != nil || len(got) != 0 {
		t.Fatalf("PurgedLeaves before the purge = %v, %v; want none", got, err)
	}
	entries[2].Leaf = []byte(`{"v":1}`)
	if _, err := PurgedLeaves(Entries(entries)); err == nil || !strings.Contains(err.Error(), "entry 2") {
		t.Fatalf("PurgedLeaves over a malformed leaf = %v; want an error naming entry 2", err)
	}
}
