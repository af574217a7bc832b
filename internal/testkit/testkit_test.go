package testkit

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

func TestOutputWait(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`listening on (\S+) `)

	t.Run("a line written later is found", func(t *testing.T) {
		t.Parallel()
		o := NewOutput()
		go fmt.Fprint(o, "starting\nlistening on 127.0.0.1:1 now\n")
		m, err := o.Wait(re, nil, time.Minute)
		if err != nil || m[1] != "127.0.0.1:1" {
			t.Fatalf("Wait = %q, %v", m, err)
		}
	})
	t.Run("an exit first is an error naming the output", func(t *testing.T) {
		t.Parallel()
		o := NewOutput()
		fmt.Fprint(o, "bind: address in use\n")
		exited := make(chan struct{})
		close(exited)
		if _, err := o.Wait(re, exited, time.Minute); err == nil || !strings.Contains(err.Error(), "address in use") {
			t.Fatalf("Wait after exit: %v", err)
		}
	})
	t.Run("silence is an error after the limit", func(t *testing.T) {
		t.Parallel()
		if _, err := NewOutput().Wait(re, nil, time.Millisecond); err == nil {
			t.Fatal("Wait on silent output returned no error")
		}
	})
}

func TestListeningRE(t *testing.T) {
	t.Parallel()
	m := ListeningRE.FindStringSubmatch("Airlock listening on http://127.0.0.1:4242 (database x)")
	if m == nil || m[1] != "http://127.0.0.1:4242" || m[2] != "127.0.0.1:4242" {
		t.Fatalf("ListeningRE matched %q", m)
	}
}

func TestRequestStates(t *testing.T) {
	t.Parallel()
	pages := map[string]map[string]any{
		"":           {"items": []any{map[string]any{"id": "a", "state": "pending"}}, "next_cursor": "c1"},
		"&cursor=c1": {"items": []any{map[string]any{"id": "b", "state": "approved"}}, "next_cursor": ""},
	}
	var asked []string
	got := RequestStates(func(cursor string) map[string]any {
		asked = append(asked, cursor)
		return pages[cursor]
	})
	if len(got) != 2 || got["a"] != "pending" || got["b"] != "approved" || len(asked) != 2 {
		t.Fatalf("RequestStates = %v after asking %q", got, asked)
	}
}

// errors records what LostAcknowledged reports.
type reports []string

func (e *reports) Helper() {}
func (e *reports) Errorf(format string, args ...any) {
	*e = append(*e, fmt.Sprintf(format, args...))
}

func TestLostAcknowledged(t *testing.T) {
	t.Parallel()
	acked := map[string]string{
		"kept":     "pending",
		"decided":  "pending", // a decision was sent, unacknowledged, and landed
		"approved": "approved",
		"gone":     "pending",
		"undone":   "denied",
		"moved":    "pending", // nobody decided it, yet it changed
	}
	attempted := map[string]bool{"decided": true}
	states := map[string]string{"kept": "pending", "decided": "approved", "approved": "approved", "undone": "pending", "moved": "expired"}
	var got reports
	if lost := LostAcknowledged(&got, acked, attempted, states); lost != 2 {
		t.Errorf("lost = %d, want 2 (gone, undone)", lost)
	}
	if len(got) != 3 {
		t.Errorf("reported %d problems, want 3 (gone, undone, moved): %q", len(got), got)
	}
}

func TestEventually(t *testing.T) {
	t.Parallel()
	n := 0
	Eventually(t, time.Minute, "the third poll", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("polled %d times, want 3", n)
	}
}

func TestGo(t *testing.T) {
	t.Parallel()
	var returned atomic.Bool
	t.Run("the loop runs until the test ends", func(t *testing.T) {
		Go(t, func(ctx context.Context) error {
			<-ctx.Done()
			returned.Store(true)
			return ctx.Err()
		})
	})
	if !returned.Load() {
		t.Fatal("the test ended before the loop returned")
	}
}
