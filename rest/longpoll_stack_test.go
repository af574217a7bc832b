//go:build !race

// The race detector deepens every frame and doubles the stack guard, so
// stack sizes are only meaningful without it.

package rest

import (
	"fmt"
	"net"
	"testing"

	"github.com/airlockhq/airlock/internal/testkit"
)

// TestIdleLongPollStacks checks what an idle long-poll costs in goroutine
// stacks: the connection's goroutine parks shallow enough for the garbage
// collector to shrink its stack to 8 KiB (it grows to 16 KiB in the store's
// reads; parked deeper than about 3.2 KiB it would stay there), and its
// background reader takes at most 4 KiB. Not parallel: it counts the whole
// process's stacks, and the parallel tests wait until it is done.
func TestIdleLongPollStacks(t *testing.T) {
	const batch = 150
	b := setup(t, func(o *options) { o.validate = false })
	_, id := b.pending(t, "1h")
	waiters := b.svc.Waiters()
	// Raw connections: no client goroutine adds a stack of its own.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	park := func() uint64 {
		t.Helper()
		for range batch {
			c, err := net.Dial("tcp", b.srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			if _, err := fmt.Fprintf(c, "GET /v1/approval-requests/%s?wait=60s HTTP/1.1\r\nHost: airlock\r\nAuthorization: Bearer %s\r\n\r\n", id, b.agentA); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "every long-poll to wait", func() bool { return b.svc.Waiters() == waiters+len(conns) })
		m := testkit.SettledMemStats()
		return m.StackInuse
	}
	// Two batches, and the difference between them: what the runtime keeps
	// whatever the number of waiters (stacks of goroutines that ended, kept
	// for reuse; per-processor caches) is in both.
	first := park()
	second := park()
	per := (int64(second) - int64(first)) / batch
	t.Logf("goroutine stacks per idle long-poll: %d bytes", per)
	// About 12 KiB: 8 for the connection's goroutine, up to 4 for the
	// background read, and what the runtime's caches add. Were the
	// connection's goroutine parked too deep to shrink, it alone would
	// hold 16 KiB (the measure was 20 KiB per long-poll then).
	if per > 16<<10 {
		t.Errorf("an idle long-poll holds %d bytes of goroutine stacks; want about 12 KiB (8 KiB for its connection's goroutine, up to 4 KiB for the background read): does it park deeper than about 3.2 KiB, so its stack cannot shrink from 16 KiB to 8?", per)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	waitFor(t, "the long-polls to end with their connections", func() bool { return b.svc.Waiters() == waiters })
}
