// Package hostile is a broken or hostile Airlock for the adapters' tests:
// an HTTP server speaking the REST API that approves every request at once
// and breaks its answers to one call on purpose (an empty 200, a page of
// HTML, a body cut short, another request, another state), and a store
// that lies the same way about claims. An adapter must run or allow a call
// only on a claimed execution of the request it asked about, so under
// every fault here it runs nothing (docs/adapters.md).
package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// Fault is how an answer is broken.
type Fault string

// The faults. Honest answers as Airlock would; tests run it too, so that
// they show the adapter does allow with an honest server.
const (
	Honest      Fault = "honest"
	Empty       Fault = "an empty 200"
	HTML        Fault = "a page of HTML"
	Truncated   Fault = "a body cut short"
	OtherID     Fault = "another request's id"
	OtherState  Fault = "another state"
	NoExecution Fault = "approved without an execution"
	OtherCall   Fault = "another call's tool and arguments"
)

// Faults are the broken answers to a call, every one of which must stop
// the call the adapter asked about. A claim's answer is believed on its
// request id, so another call's content is a fault of the create and the
// read only; only a claim has an execution to leave out.
func Faults(call Call) []Fault {
	if call == Claim {
		return []Fault{Empty, HTML, Truncated, OtherID, OtherState, NoExecution}
	}
	return []Fault{Empty, HTML, Truncated, OtherID, OtherState, OtherCall}
}

// Case is one answer to test an adapter with: a call and how its answer is
// broken (or Honest, the control that shows the adapter can allow).
type Case struct {
	Call  Call
	Fault Fault
}

// String names the case for a subtest.
func (c Case) String() string { return string(c.Call) + "/" + string(c.Fault) }

// Cases are the honest control, then every fault of each call.
func Cases(calls ...Call) []Case {
	cases := []Case{{Claim, Honest}}
	for _, call := range calls {
		for _, f := range Faults(call) {
			cases = append(cases, Case{call, f})
		}
	}
	return cases
}

// StoreFaults are the honest control, then every lie Store tells.
var StoreFaults = []Fault{Honest, Empty, OtherID, OtherState, NoExecution}

// EachStoreFault runs ask once per StoreFaults entry, each in a parallel
// subtest, with wrap making the store lie so about claims. ask sets up its
// adapter over wrap (and a grant that approves its call at once), asks,
// and returns the decision and its reason. The adapter must have claimed
// once, and answered "allow" exactly when the store was honest; otherwise
// the reason must say why.
func EachStoreFault(t *testing.T, ask func(t *testing.T, wrap func(store.Store) store.Store) (decision, reason string)) {
	t.Helper()
	for _, fault := range StoreFaults {
		t.Run(string(fault), func(t *testing.T) {
			t.Parallel()
			claims := new(atomic.Int64)
			d, reason := ask(t, func(s store.Store) store.Store { return Store{Store: s, Fault: fault, Claims: claims} })
			switch {
			case claims.Load() != 1:
				t.Fatalf("%d claims, want 1 (was the call approved at once?); answer %s %q", claims.Load(), d, reason)
			case fault == Honest && d != "allow":
				t.Fatalf("honest claim: %s %q, want allow", d, reason)
			case fault != Honest && (d == "allow" || reason == ""):
				t.Fatalf("on %s: %s %q, want no allow, saying why", fault, d, reason)
			}
		})
	}
}

// Call names the call whose answer is broken.
type Call string

// The calls an adapter makes on its way to running a call.
const (
	Create Call = "create"
	Read   Call = "read"
	Claim  Call = "claim"
)

// Server is the fake Airlock.
type Server struct {
	// URL is the server's base URL.
	URL string
	// Claims counts the claims the server recorded.
	Claims atomic.Int64

	call  Call
	fault Fault
	mu    sync.Mutex
	reqs  map[string]map[string]any
	insts []map[string]any
	n     int
}

// NewServer starts a fake Airlock whose answers to call carry fault, and
// stops it when the test ends.
func NewServer(t testing.TB, call Call, fault Fault) *Server {
	t.Helper()
	s := &Server{call: call, fault: fault, reqs: map[string]map[string]any{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/instances", s.listInstances)
	mux.HandleFunc("POST /v1/instances", s.registerInstance)
	mux.HandleFunc("DELETE /v1/instances/{id}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"cancelled": 0})
	})
	mux.HandleFunc("POST /v1/instances/{id}/approval-requests", s.create)
	mux.HandleFunc("GET /v1/approval-requests/{id}", s.read)
	mux.HandleFunc("GET /v1/approval-requests", s.list)
	mux.HandleFunc("POST /v1/approval-requests/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		s.problem(w, 409, "not_pending", "the request is approved")
	})
	mux.HandleFunc("POST /v1/approval-requests/{id}/execution", s.claim)
	mux.HandleFunc("PUT /v1/approval-requests/{id}/execution", s.report)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (s *Server) problem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": code, "status": status, "code": code, "detail": detail})
}

func (s *Server) listInstances(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	items := s.insts
	if items == nil {
		items = []map[string]any{} // a list, as the real server answers, never null
	}
	writeJSON(w, 200, map[string]any{"items": items})
}

func (s *Server) registerInstance(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Name string `json:"name"`
	}
	if json.NewDecoder(r.Body).Decode(&in) != nil {
		s.problem(w, 400, "invalid_request", "bad body")
		return
	}
	s.mu.Lock()
	s.n++
	inst := map[string]any{"id": fmt.Sprintf("ins_%d", s.n), "name": in.Name, "created_at": time.Now().UTC(), "pending_count": 0}
	s.insts = append(s.insts, inst)
	s.mu.Unlock()
	writeJSON(w, 201, inst)
}

// create records the request approved at once, as a policy or grant would.
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
		Timeout   string          `json:"timeout"`
		Context   json.RawMessage `json:"context"`
	}
	if json.NewDecoder(r.Body).Decode(&in) != nil {
		s.problem(w, 400, "invalid_request", "bad body")
		return
	}
	now := time.Now().UTC()
	s.mu.Lock()
	s.n++
	id := fmt.Sprintf("req_%d", s.n)
	req := map[string]any{
		"id": id, "instance_id": r.PathValue("id"), "state": "approved", "kind": "tool_call",
		"tool": in.Tool, "arguments": in.Arguments, "created_at": now, "deadline_at": now.Add(time.Minute),
		"decision": map[string]any{"status": "approved", "decided_at": now, "decided_by": "policy", "expires_at": now.Add(time.Hour)},
	}
	if in.Timeout != "" {
		req["timeout"] = in.Timeout
	}
	if len(in.Context) > 0 {
		req["context"] = in.Context
	}
	s.reqs[id] = req
	out := clone(req)
	s.mu.Unlock()
	s.answer(w, Create, 201, out)
}

func (s *Server) get(id string) (map[string]any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req, ok := s.reqs[id]
	return clone(req), ok
}

func (s *Server) read(w http.ResponseWriter, r *http.Request) {
	req, ok := s.get(r.PathValue("id"))
	if !ok {
		s.problem(w, 404, "not_found", "no such request")
		return
	}
	s.answer(w, Read, 200, req)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	items := []map[string]any{}
	for _, req := range s.reqs {
		items = append(items, clone(req))
	}
	s.mu.Unlock()
	writeJSON(w, 200, map[string]any{"items": items})
}

// claim records the claim, then answers it; a fault in the body (empty,
// HTML, cut short) is a claim the server made whose answer was lost, a
// fault in the content (another id or state) a claim never made.
func (s *Server) claim(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	req, ok := s.reqs[id]
	switch {
	case !ok:
		s.mu.Unlock()
		s.problem(w, 404, "not_found", "no such request")
		return
	case req["execution"] != nil:
		s.mu.Unlock()
		s.problem(w, 409, "already_executed", "the execution was claimed already")
		return
	}
	lie := s.call == Claim && (s.fault == OtherID || s.fault == OtherState || s.fault == NoExecution)
	if !lie {
		req["execution"] = map[string]any{"status": "claimed", "claimed_at": time.Now().UTC()}
		s.Claims.Add(1)
	}
	out := clone(req)
	s.mu.Unlock()
	if lie {
		out["execution"] = map[string]any{"status": "claimed", "claimed_at": time.Now().UTC()}
	}
	s.answer(w, Claim, 200, out)
}

func (s *Server) report(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Status string `json:"status"`
		Detail string `json:"detail"`
	}
	json.NewDecoder(r.Body).Decode(&in)
	s.mu.Lock()
	req, ok := s.reqs[r.PathValue("id")]
	exec, _ := req["execution"].(map[string]any)
	if !ok || exec == nil {
		s.mu.Unlock()
		s.problem(w, 409, "not_approved", "no claimed execution")
		return
	}
	exec["status"], exec["detail"], exec["finished_at"] = in.Status, in.Detail, time.Now().UTC()
	out := clone(req)
	s.mu.Unlock()
	writeJSON(w, 200, out)
}

// answer writes req, broken when the call is the one to break.
func (s *Server) answer(w http.ResponseWriter, call Call, status int, req map[string]any) {
	if call != s.call {
		writeJSON(w, status, req)
		return
	}
	switch s.fault {
	case Empty:
		w.WriteHeader(status)
		return
	case HTML:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(status)
		fmt.Fprint(w, "<!doctype html><html><body><h1>Approved</h1></body></html>")
		return
	case Truncated:
		b, _ := json.Marshal(req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(b[:len(b)/2])
		return
	}
	Lie(req, s.fault)
	writeJSON(w, status, req)
}

// Lie changes a request as fault says: another id, another state, no
// execution, another call. Other faults leave it as it is.
func Lie(req map[string]any, fault Fault) {
	switch fault {
	case OtherID:
		req["id"] = "req_someone_else"
	case OtherState:
		req["state"] = "denied"
		req["decision"] = map[string]any{"status": "denied", "decided_at": time.Now().UTC(), "decided_by": "policy"}
	case NoExecution:
		delete(req, "execution")
	case OtherCall:
		req["tool"] = "Read"
		req["arguments"] = json.RawMessage(`{"file_path":"/etc/hostname"}`)
	}
}

func clone(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	b, _ := json.Marshal(m)
	var out map[string]any
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	d.Decode(&out)
	return out
}

// Store is a store whose claims lie as Fault says: the claim is never
// recorded, and the answer is an empty request (Empty, HTML, Truncated:
// what a store has for an answer it cannot read), another request's id,
// the request denied, or approved without an execution. Everything else is
// the wrapped store's.
type Store struct {
	store.Store
	Fault Fault
	// Claims counts the claims asked for.
	Claims *atomic.Int64
}

// ClaimExecution answers a claim without making it.
func (s Store) ClaimExecution(ctx context.Context, id, actor string, prepare func(airlock.Request)) (airlock.Request, error) {
	if s.Claims != nil {
		s.Claims.Add(1)
	}
	if s.Fault == Honest {
		return s.Store.ClaimExecution(ctx, id, actor, prepare)
	}
	r, err := s.Store.GetRequest(ctx, id)
	if err != nil {
		return airlock.Request{}, err
	}
	r.Execution = &airlock.Execution{ClaimedAt: time.Now(), ClaimedBy: actor, Status: airlock.ExecClaimed}
	switch s.Fault {
	case Empty, HTML, Truncated:
		return airlock.Request{}, nil
	case OtherID:
		r.ID = "req_someone_else"
	case OtherState:
		r.State = airlock.StateDenied
	case NoExecution:
		r.Execution = nil
	}
	return r, nil
}
