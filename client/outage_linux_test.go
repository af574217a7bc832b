package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"golang.org/x/sys/unix"
)

// recoveringTransport counts the calls it sends by "METHOD last-segment"
// and, after an answer 503, lets the store recover (recover), as if the
// outage ended while the client waited.
type recoveringTransport struct {
	next    http.RoundTripper
	recover func()

	mu    sync.Mutex
	calls map[string]int
}

func (rt *recoveringTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := rt.next.RoundTrip(req)
	rt.mu.Lock()
	rt.calls[req.Method+" "+req.URL.Path[strings.LastIndexByte(req.URL.Path, '/')+1:]]++
	rt.mu.Unlock()
	if err == nil && res.StatusCode == http.StatusServiceUnavailable {
		rt.recover()
	}
	return res, err
}

func (rt *recoveringTransport) sent(call string) int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.calls[call]
}

// TestUnavailableRetried runs the client and the gate against the real
// server whose disk fills (its file size limit lowered to 0, so every
// write to its SQLite files fails) and empties again right after the
// first 503 unavailable. A create is sent again after Retry-After and
// lands once; a decision, which may have been recorded, is not sent
// again; and the gate takes an unavailable claim as no answer — it reads
// the request back and claims again — never as a refusal, so the approved
// call runs once.
func TestUnavailableRetried(t *testing.T) {
	t.Parallel()
	b := setupBinary(t)
	ctx := context.Background()
	limit := func(cur uint64) {
		t.Helper()
		if err := unix.Prlimit(b.pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: cur, Max: unix.RLIM_INFINITY}, nil); err != nil {
			t.Fatalf("set the server's file size limit: %v", err)
		}
	}
	full := func() { limit(0) }
	rt := &recoveringTransport{next: b.hc.Transport, recover: func() { limit(unix.RLIM_INFINITY) }, calls: map[string]int{}}
	hc := &http.Client{Transport: rt}
	retry := client.WithRetry(client.Retry{Attempts: 3, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	agent := b.client(t, b.agentSecret, client.WithHTTPClient(hc), retry)
	reviewer := b.client(t, b.mint(t, "outage reviewer", airlock.RoleReviewer, "dora").Secret, client.WithHTTPClient(hc), retry)

	full()
	start := time.Now()
	r, created, err := agent.CreateRequest(ctx, b.instance, "outage-1", client.CreateRequestInput{Tool: "t", Arguments: []byte(`{}`)})
	if err != nil || !created {
		t.Fatalf("create through an outage: created %v, %v; want it retried and created", created, err)
	}
	if n := rt.sent("POST approval-requests"); n != 2 {
		t.Errorf("the create was sent %d times, want 2: once into the outage, once after it", n)
	}
	if waited := time.Since(start); waited < airlock.UnavailableRetryAfter {
		t.Errorf("the create was sent again after %s, before Retry-After (%s)", waited, airlock.UnavailableRetryAfter)
	}

	full()
	_, err = reviewer.Approve(ctx, r.ID, "")
	var ae *client.Error
	if !client.IsCode(err, airlock.CodeUnavailable) || !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
		t.Fatalf("a decision in an outage = %v, want 503 unavailable", err)
	}
	if n := rt.sent("POST decision"); n != 1 {
		t.Errorf("the decision was sent %d times, want once: it is not safe to repeat", n)
	}

	g, err := client.NewGate(client.GateConfig{Client: agent, InstanceID: b.instance, JournalDir: t.TempDir(), PollWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ran := 0
	out, err := g.Run(ctx, client.Call{Tool: "deploy", Arguments: []byte(`{"env":"prod"}`), OnPending: func(p *client.ApprovalRequest) {
		if p.State != airlock.StatePending {
			return
		}
		if _, err := b.reviewer.Approve(ctx, p.ID, ""); err != nil && !client.IsCode(err, airlock.CodeNotPending) {
			t.Errorf("approve %s: %v", p.ID, err)
		}
		full() // the claim that follows meets the outage
	}}, func(context.Context) error { ran++; return nil })
	if err != nil || ran != 1 || out.Status != airlock.ExecSucceeded {
		t.Fatalf("the gate through an outage at its claim: ran %d, %v, %v; want it run once", ran, out, err)
	}
	if n := rt.sent("POST execution"); n != 2 {
		t.Errorf("the claim was sent %d times, want 2: into the outage, then again once the request was read back unclaimed", n)
	}
}
