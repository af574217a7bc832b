package storetest

import (
	"context"
	"testing"

	"github.com/airlockhq/airlock"
)

// EventLister is the part of a store AllEvents reads.
type EventLister interface {
	ListEvents(ctx context.Context, after int64, limit int) ([]airlock.Event, error)
}

// AllEvents reads the whole audit log of s, however long, failing t when
// a page cannot be read. It runs in cleanups too: its reads outlive t's
// context.
func AllEvents(t testing.TB, s EventLister) []airlock.Event {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	var all []airlock.Event
	for {
		after := int64(0)
		if len(all) > 0 {
			after = all[len(all)-1].ID
		}
		page, err := s.ListEvents(ctx, after, 1000)
		if err != nil {
			t.Fatalf("ListEvents after %d: %v", after, err)
		}
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
	}
}
