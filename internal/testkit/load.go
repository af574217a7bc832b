package testkit

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// Load is the bookkeeping of a kill-and-restart test: workers create and
// decide requests while servers are killed, and Load records what the
// servers acknowledged, so that after the restarts LostAcknowledged can
// check nothing acknowledged was lost. Safe for concurrent use.
type Load struct {
	mu        sync.Mutex
	acked     map[string]string // request ID → last acknowledged state
	attempted map[string]bool   // requests a decision was sent for
	decidable chan string       // created requests waiting for a decision

	Creates   atomic.Int64 // acknowledged creates
	Decisions atomic.Int64 // acknowledged decisions
}

// NewLoad returns a Load that queues up to pending created requests for a
// decision.
func NewLoad(pending int) *Load {
	return &Load{acked: map[string]string{}, attempted: map[string]bool{}, decidable: make(chan string, pending)}
}

// Caller makes one call of the REST API, on whichever server the test
// picks: method, path, bearer token, JSON body and header pairs.
type Caller func(method, path, token, body string, header ...string) (Reply, error)

// Step does one operation of the load with call: when decide is set and a
// request created earlier waits for a decision, reviewer approves or
// denies it (rng picks); otherwise agent creates request n on the
// instance, with idempotency key key. It reports whether the server
// acknowledged the operation; a decision acknowledged with another state
// is reported to t.
func (l *Load) Step(t Errorer, call Caller, rng *rand.Rand, decide bool, instance, agent, reviewer, key string, n int) bool {
	var id string
	if decide {
		select {
		case id = <-l.decidable:
		default:
		}
	}
	if id == "" {
		r, err := call("POST", "/v1/instances/"+instance+"/approval-requests", agent,
			fmt.Sprintf(`{"tool":"load","arguments":{"n":%d}}`, n), "Idempotency-Key", key)
		if err != nil || r.Status != 201 {
			return false // not acknowledged: the server is gone or going
		}
		l.mu.Lock()
		l.acked[r.Str("id")] = "pending"
		l.mu.Unlock()
		l.Creates.Add(1)
		select {
		case l.decidable <- r.Str("id"):
		default: // enough queued already
		}
		return true
	}
	status := []string{"approved", "denied"}[rng.IntN(2)]
	l.mu.Lock()
	l.attempted[id] = true
	l.mu.Unlock()
	r, err := call("POST", "/v1/approval-requests/"+id+"/decision", reviewer, `{"status":"`+status+`"}`)
	if err != nil || r.Status != 200 {
		return false
	}
	if r.Str("state") != status {
		t.Errorf("decision %s on %s answered state %q", status, id, r.Str("state"))
	}
	l.mu.Lock()
	l.acked[id] = status
	l.mu.Unlock()
	l.Decisions.Add(1)
	return true
}

// Lost checks states (ID to state, as the servers list them after the
// restarts) against what was acknowledged, reporting each violation to t,
// and returns how many acknowledged writes were lost.
func (l *Load) Lost(t Errorer, states map[string]string) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	return LostAcknowledged(t, l.acked, l.attempted, states)
}
