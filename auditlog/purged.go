package auditlog

import (
	"fmt"
	"iter"
	"slices"

	"github.com/airlockhq/airlock"
)

// PurgedLeaves returns the indexes, in order, of the leaves of entries that
// belong to requests whose payloads were purged: a request.purged leaf
// (airlock.EventRequestPurged, appended by the server's payload retention)
// names each such request, and every leaf of that request, the
// request.purged one included, is reported. The leaves themselves are
// unchanged by a purge (they hold only digests), so they verify as any
// other; this tells a verifier which of them it can no longer match
// against the server's payloads. It reads the entries once and keeps one
// index per leaf of a request; a leaf that does not parse is an error
// naming its index.
func PurgedLeaves(entries iter.Seq2[Entry, error]) ([]int64, error) {
	byRequest := map[string][]int64{}
	purged := map[string]bool{}
	for e, err := range entries {
		if err != nil {
			return nil, err
		}
		l, err := ParseLeaf(e.Leaf)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", e.Index, err)
		}
		if l.RequestID == "" {
			continue
		}
		byRequest[l.RequestID] = append(byRequest[l.RequestID], e.Index)
		if l.Type == airlock.EventRequestPurged {
			purged[l.RequestID] = true
		}
	}
	var out []int64
	for id := range purged {
		out = append(out, byRequest[id]...)
	}
	slices.Sort(out)
	return out, nil
}
