// Package webhooktest has what the end-to-end webhook tests share: real
// HTTP receivers that verify every webhook with the reference rules
// (notify.Verify) and misbehave on purpose, and the check of what they got
// against the committed audit log (docs/reliability.md, webhook delivery
// under faults).
package webhooktest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/notify"
)

// Behavior is how a receiver answers.
type Behavior int

// Behaviors.
const (
	// OK answers 204 at once.
	OK Behavior = iota
	// Fail500First answers 500 to the first attempt of each webhook-id.
	Fail500First
	// DropFirst closes the connection without an answer on the first
	// attempt of each webhook-id, as a receiver that went down would.
	DropFirst
	// Slow answers 204 after SlowBy.
	Slow
	// Hang never answers until Close: every attempt times out.
	Hang
)

// SlowBy is how long a Slow receiver takes to answer.
const SlowBy = 20 * time.Millisecond

// Receiver is a real HTTP server receiving one endpoint's webhooks.
type Receiver struct {
	Name     string
	Behavior Behavior
	srv      *httptest.Server
	stop     chan struct{}
	stopOnce sync.Once

	mu     sync.Mutex
	secret string
	got    map[string][][]byte // webhook-id → bodies received, in order
	bad    []string            // webhooks that failed verification
	seen   map[string]int      // attempts per webhook-id, accepted or not
}

// NewReceiver starts a receiver; Close it when done.
func NewReceiver(name string, b Behavior) *Receiver {
	rc := &Receiver{Name: name, Behavior: b, stop: make(chan struct{}), got: map[string][][]byte{}, seen: map[string]int{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	return rc
}

// URL is where the receiver listens.
func (rc *Receiver) URL() string { return rc.srv.URL + "/hook/" + rc.Name }

// SetSecret gives the receiver the endpoint's signing secret.
func (rc *Receiver) SetSecret(s string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.secret = s
}

// Close releases hung requests and stops the server.
func (rc *Receiver) Close() {
	rc.stopOnce.Do(func() { close(rc.stop) })
	rc.srv.Close()
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	id := r.Header.Get(notify.HeaderID)
	rc.mu.Lock()
	rc.seen[id]++
	attempt, secret := rc.seen[id], rc.secret
	rc.mu.Unlock()
	switch {
	case rc.Behavior == Hang:
		select {
		case <-rc.stop:
		case <-r.Context().Done():
		}
		return
	case rc.Behavior == Fail500First && attempt == 1:
		w.WriteHeader(http.StatusInternalServerError)
		return
	case rc.Behavior == DropFirst && attempt == 1:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				if tc, ok := conn.(*net.TCPConn); ok {
					tc.SetLinger(0) // a reset, as from a process that died
				}
				conn.Close()
			}
		}
		return
	case rc.Behavior == Slow:
		select {
		case <-time.After(SlowBy):
		case <-rc.stop:
		}
	}
	if err := notify.Verify(secret, r.Header, body, time.Now(), notify.DefaultTolerance); err != nil {
		rc.mu.Lock()
		rc.bad = append(rc.bad, fmt.Sprintf("%s: %v", id, err))
		rc.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	rc.mu.Lock()
	rc.got[id] = append(rc.got[id], body)
	rc.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// Received returns how many webhooks the receiver accepted.
func (rc *Receiver) Received() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, bs := range rc.got {
		n += len(bs)
	}
	return n
}

// Attempts returns how many requests reached the receiver.
func (rc *Receiver) Attempts() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, c := range rc.seen {
		n += c
	}
	return n
}

// Expected is what one committed event must produce at every endpoint
// subscribed to everything.
type Expected struct {
	Type      airlock.NotifyType
	RequestID string
}

// ExpectedFrom lists, by webhook-id, the webhooks the committed events
// after afterEvent must produce.
func ExpectedFrom(evs []airlock.Event, afterEvent int64) map[string]Expected {
	out := map[string]Expected{}
	for _, ev := range evs {
		typ, ok := airlock.NotifyTypeOf(ev.Type)
		if ok && ev.ID > afterEvent {
			out[airlock.MessageIDFor(ev)] = Expected{typ, ev.RequestID}
		}
	}
	return out
}

// Report is how a receiver's webhooks compare with the log.
type Report struct {
	Missing    []string // expected webhook-ids never accepted
	Unexpected []string // accepted webhook-ids no committed event gives
	Wrong      []string // bodies whose type or request is not the event's
	Changed    []string // webhook-ids received with different bodies
	Bad        []string // webhooks that failed verification
	Duplicates int      // extra receptions of a webhook-id (allowed)
}

// OK reports whether the receiver got every expected webhook and nothing
// else, every one verified.
func (r Report) OK() bool {
	return len(r.Missing)+len(r.Unexpected)+len(r.Wrong)+len(r.Changed)+len(r.Bad) == 0
}

func (r Report) String() string {
	clip := func(s []string) []string {
		sort.Strings(s)
		if len(s) > 5 {
			return append(s[:5:5], fmt.Sprintf("… %d in all", len(s)))
		}
		return s
	}
	return fmt.Sprintf("missing %v, unexpected %v, wrong %v, changed %v, unverified %v, %d duplicates",
		clip(r.Missing), clip(r.Unexpected), clip(r.Wrong), clip(r.Changed), clip(r.Bad), r.Duplicates)
}

// Check compares what rc accepted with want.
func (rc *Receiver) Check(want map[string]Expected) Report {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var r Report
	r.Bad = slices.Clone(rc.bad)
	for id := range want {
		if len(rc.got[id]) == 0 {
			r.Missing = append(r.Missing, id)
		}
	}
	for id, bodies := range rc.got {
		exp, ok := want[id]
		if !ok {
			r.Unexpected = append(r.Unexpected, id)
			continue
		}
		r.Duplicates += len(bodies) - 1
		for _, b := range bodies[1:] {
			if string(b) != string(bodies[0]) {
				r.Changed = append(r.Changed, id)
				break
			}
		}
		var body struct {
			Type string `json:"type"`
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if err := json.Unmarshal(bodies[0], &body); err != nil || body.Type != string(exp.Type) || body.Data.ID != exp.RequestID {
			r.Wrong = append(r.Wrong, fmt.Sprintf("%s: %s", id, bodies[0]))
		}
	}
	return r
}

// TypesByRequest returns, by request ID, the sorted types rc accepted:
// one pass over what it got, however many requests are asked about.
func (rc *Receiver) TypesByRequest() map[string][]string {
	out := rc.byRequest(func(_ string, typ string) string { return typ })
	for _, ts := range out {
		sort.Strings(ts)
	}
	return out
}

// IDsByRequest returns, by request ID, the webhook-ids rc accepted.
func (rc *Receiver) IDsByRequest() map[string][]string {
	return rc.byRequest(func(id, _ string) string { return id })
}

// byRequest returns, by request ID, what pick makes of each webhook-id
// rc accepted and the type of its first body.
func (rc *Receiver) byRequest(pick func(id, typ string) string) map[string][]string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := map[string][]string{}
	for id, bodies := range rc.got {
		var body struct {
			Type string `json:"type"`
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if json.Unmarshal(bodies[0], &body) == nil {
			out[body.Data.ID] = append(out[body.Data.ID], pick(id, body.Type))
		}
	}
	return out
}

// AttemptsOf returns how many requests with webhook-id id reached rc,
// accepted or not.
func (rc *Receiver) AttemptsOf(id string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.seen[id]
}

// CheckAll waits until every receiver but a hung one has accepted every
// expected webhook, and reports to t what is missing, wrong or unexpected
// otherwise, with what more says of a receiver's report (the servers'
// output, say) when more is not nil. It polls: the deliveries are retried
// by another process.
func CheckAll(t testing.TB, rcs []*Receiver, want map[string]Expected, within time.Duration, more func(*Receiver, Report) string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, rc := range rcs {
		if rc.Behavior == Hang {
			continue
		}
		for {
			rep := rc.Check(want)
			if rep.OK() {
				t.Logf("%s: %d webhooks, %d duplicates (same webhook-id and body)", rc.Name, len(want), rep.Duplicates)
				break
			}
			if time.Now().After(deadline) || len(rep.Unexpected)+len(rep.Wrong)+len(rep.Changed)+len(rep.Bad) > 0 {
				if more != nil {
					t.Errorf("%s: %s\n%s", rc.Name, rep, more(rc, rep))
				} else {
					t.Errorf("%s: %s", rc.Name, rep)
				}
				break
			}
			time.Sleep(50 * time.Millisecond) // waiting on another process's retries
		}
	}
}

// CheckRolledBack checks that every receiver but a hung one got only
// approval_request.created for each request in rolledBack: requests whose
// one decision was refused and rolled back, so nothing else was committed.
func CheckRolledBack(t testing.TB, rcs []*Receiver, rolledBack []string) {
	t.Helper()
	for _, rc := range rcs {
		if rc.Behavior == Hang {
			continue
		}
		types := rc.TypesByRequest()
		for _, id := range rolledBack {
			if got := types[id]; !slices.Equal(got, []string{"approval_request.created"}) {
				t.Errorf("%s got %v for %s, whose only decision was refused and rolled back", rc.Name, got, id)
			}
		}
	}
}

// TypesOf returns the types rc accepted for request id.
func (rc *Receiver) TypesOf(id string) []string { return rc.TypesByRequest()[id] }
