package sqlcore

import (
	"cmp"
	"strings"

	"github.com/airlockhq/airlock"
)

// How both dialects order and encode what they store alike.

// compareDue orders deliveries as a lease returns them: by when they are
// due, then in the order they were queued.
func compareDue(a, b airlock.Delivery) int {
	if c := a.NextAttemptAt.Compare(b.NextAttemptAt); c != 0 {
		return c
	}
	return cmp.Compare(a.Seq, b.Seq)
}

// compareSweepOrder orders requests as ExpireDue takes them: the earliest
// second of deadlines first, then in creation order (Seq). Drivers sort
// what a sweep's UPDATE returned by it, since RETURNING has no order.
func compareSweepOrder(a, b airlock.Request) int {
	return cmp.Or(cmp.Compare(a.DeadlineAt.Unix(), b.DeadlineAt.Unix()), cmp.Compare(a.Seq, b.Seq))
}

// webSessionIDHash is the hash a store keeps of a web session's ID.
func webSessionIDHash(id string) []byte { return airlock.HashSecret(id) }

// joinGroups is how stores keep a list of groups in one column: joined by
// newlines, which no valid group name holds (airlock.ValidGroupName).
func joinGroups(gs []string) string { return strings.Join(gs, "\n") }

// splitGroups reads a column joinGroups wrote.
func splitGroups(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
