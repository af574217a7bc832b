package airlock_test

import (
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// TestSessionStatus checks how a session shows: closed wins, then stale
// (no heartbeat, or no opening, for staleAfter), then waiting, then active.
func TestSessionStatus(t *testing.T) {
	t.Parallel()
	opened := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	const stale = 5 * time.Minute
	at := func(d time.Duration) *time.Time { x := opened.Add(d); return &x }
	tests := []struct {
		name string
		in   airlock.Instance
		now  time.Time
		want airlock.SessionStatus
	}{
		{"just opened", airlock.Instance{CreatedAt: opened}, opened, airlock.SessionActive},
		{"opened, no heartbeat, 1µs before stale", airlock.Instance{CreatedAt: opened}, opened.Add(stale - time.Microsecond), airlock.SessionActive},
		{"opened, no heartbeat for staleAfter", airlock.Instance{CreatedAt: opened}, opened.Add(stale), airlock.SessionStale},
		{"a recent heartbeat keeps it active", airlock.Instance{CreatedAt: opened, LastSeenAt: at(10 * time.Minute)}, opened.Add(12 * time.Minute), airlock.SessionActive},
		{"heartbeat staleAfter ago", airlock.Instance{CreatedAt: opened, LastSeenAt: at(10 * time.Minute)}, opened.Add(15 * time.Minute), airlock.SessionStale},
		{"a pending request makes it waiting", airlock.Instance{CreatedAt: opened, PendingCount: 2}, opened.Add(time.Minute), airlock.SessionWaiting},
		{"stale shows over waiting", airlock.Instance{CreatedAt: opened, PendingCount: 1}, opened.Add(stale), airlock.SessionStale},
		{"closed shows over everything", airlock.Instance{CreatedAt: opened, PendingCount: 1, ClosedAt: at(time.Minute)}, opened.Add(time.Hour), airlock.SessionClosed},
		{"staleAfter 0 never marks stale", airlock.Instance{CreatedAt: opened}, opened.Add(1000 * time.Hour), airlock.SessionActive},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			after := stale
			if tc.name == "staleAfter 0 never marks stale" {
				after = 0
			}
			if got := tc.in.SessionStatus(tc.now, after); got != tc.want {
				t.Fatalf("SessionStatus = %s, want %s", got, tc.want)
			}
		})
	}
}
