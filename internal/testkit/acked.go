package testkit

import (
	"slices"
)

// LostAcknowledged checks what a kill-and-restart test needs most: every
// request whose create was acknowledged exists in states (ID to state, as
// the server lists them after the restarts), and every acknowledged
// decision holds. acked maps an ID to the state its last acknowledged
// write left it in ("pending" for a create); attempted holds the IDs a
// decision was sent for, acknowledged or not, which may have landed. It
// reports each violation to t and returns how many acknowledged writes
// were lost.
func LostAcknowledged(t Errorer, acked map[string]string, attempted map[string]bool, states map[string]string) int {
	t.Helper()
	lost := 0
	for id, want := range acked {
		got, ok := states[id]
		switch {
		case !ok:
			lost++
			t.Errorf("acknowledged request %s is gone", id)
		case want == "pending" && got != "pending" && !attempted[id]:
			t.Errorf("request %s is %s, but nobody decided it", id, got)
		case want == "pending" && !slices.Contains([]string{"pending", "approved", "denied"}, got):
			t.Errorf("request %s is %s; want pending or an unacknowledged decision", id, got)
		case want != "pending" && got != want:
			lost++
			t.Errorf("request %s was acknowledged %s but is %s", id, want, got)
		}
	}
	return lost
}

// Errorer is the part of testing.TB that LostAcknowledged reports to.
type Errorer interface {
	Helper()
	Errorf(format string, args ...any)
}

// RequestStates reads every page of a request list and returns each
// request's state by ID. list fetches one page and returns its decoded
// JSON body; it gets the query parameter that picks the page to append to
// its URL: "" for the first, "&cursor=…" for the next ones.
func RequestStates(list func(cursorParam string) map[string]any) map[string]string {
	states := map[string]string{}
	for cursor := ""; ; {
		body := list(cursor)
		items, _ := body["items"].([]any)
		for _, it := range items {
			m := it.(map[string]any)
			states[m["id"].(string)] = m["state"].(string)
		}
		next, _ := body["next_cursor"].(string)
		if next == "" {
			return states
		}
		cursor = "&cursor=" + next
	}
}
