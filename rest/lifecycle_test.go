package rest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// waitFor polls cond until it holds or a few seconds pass. Used only where
// nothing can be injected: whether a long poll has subscribed yet.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// longPoll starts GET ?wait= in the background and returns its answer and
// how long it took on the channel.
func (b *bundle) longPoll(t testing.TB, token, id, wait string) <-chan struct {
	r       resp
	elapsed time.Duration
} {
	t.Helper()
	ch := make(chan struct {
		r       resp
		elapsed time.Duration
	}, 1)
	hr := b.newRequest(context.Background(), t, req{method: "GET", path: "/v1/approval-requests/" + id + "?wait=" + wait, token: token})
	go func() {
		start := time.Now()
		var out resp
		res, err := b.client.Do(hr)
		if err == nil {
			var buf bytes.Buffer
			buf.ReadFrom(res.Body)
			res.Body.Close()
			out = resp{status: res.StatusCode, header: res.Header, body: buf.Bytes()}
		}
		ch <- struct {
			r       resp
			elapsed time.Duration
		}{out, time.Since(start)}
	}()
	return ch
}

// TestLifecycleOverHTTP walks one call through its whole life: create,
// long-poll woken by the decision, claim, report.
func TestLifecycleOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, b.agentA)
	r := b.create(t, b.agentA, inst, "k1", `{"tool":"issue_refund","arguments":{"payment_id":"payment_123","amount":4900},"timeout":"30m","agent_reasoning":"The customer was charged twice.","context":{"session_id":"s"}}`)
	want(t, r, http.StatusCreated, "")
	created := r.obj(t)
	id := created["id"].(string)
	if created["state"] != "pending" || created["kind"] != "tool_call" || created["decision"] != nil {
		t.Fatalf("new request: %s", r.body)
	}
	if loc := r.header.Get("Location"); loc != "/v1/approval-requests/"+id {
		t.Fatalf("Location %q", loc)
	}

	waiters := b.svc.Waiters()
	poll := b.longPoll(t, b.agentA, id, "30s")
	waitFor(t, "the long poll to subscribe", func() bool { return b.svc.Waiters() > waiters })
	decided := time.Now()
	r = b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/decision", token: b.reviewer,
		body: `{"status":"approved","note":"duplicate charge confirmed","valid_for":"2m"}`})
	want(t, r, http.StatusOK, "")
	got := <-poll
	want(t, got.r, http.StatusOK, "")
	if wake := time.Since(decided); wake > 2*time.Second {
		t.Fatalf("long poll answered %s after the decision", wake)
	}
	d := got.r.obj(t)["decision"].(map[string]any)
	if got.r.obj(t)["state"] != "approved" || d["status"] != "approved" || d["note"] != "duplicate charge confirmed" ||
		d["decided_by"] != b.callers["reviewer"].ID || d["expires_at"] == nil {
		t.Fatalf("after decision: %s", got.r.body)
	}
	// Names for people: the decider's, the creator's and the instance's.
	if o := got.r.obj(t); d["decided_by_name"] != "reviewer" || o["created_by_name"] != "agentA" || o["instance_name"] != "adapter" {
		t.Fatalf("names after decision: %s", got.r.body)
	}
	decidedAt, _ := time.Parse(time.RFC3339Nano, d["decided_at"].(string))
	expiresAt, _ := time.Parse(time.RFC3339Nano, d["expires_at"].(string))
	if expiresAt.Sub(decidedAt) != 2*time.Minute {
		t.Fatalf("expires_at - decided_at = %s, want valid_for 2m", expiresAt.Sub(decidedAt))
	}

	r = b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/execution", token: b.agentA})
	want(t, r, http.StatusOK, "")
	if e := r.obj(t)["execution"].(map[string]any); e["status"] != "claimed" || e["claimed_at"] == nil {
		t.Fatalf("claim: %s", r.body)
	}
	r = b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/execution", token: b.agentA})
	want(t, r, http.StatusConflict, airlock.CodeAlreadyExecuted)

	r = b.do(t, req{method: "PUT", path: "/v1/approval-requests/" + id + "/execution", token: b.agentA,
		body: `{"status":"succeeded","detail":"refund re_1 issued"}`})
	want(t, r, http.StatusOK, "")
	if e := r.obj(t)["execution"].(map[string]any); e["status"] != "succeeded" || e["finished_at"] == nil || e["detail"] != "refund re_1 issued" {
		t.Fatalf("report: %s", r.body)
	}
	r = b.do(t, req{method: "PUT", path: "/v1/approval-requests/" + id + "/execution", token: b.agentA, body: `{"status":"failed"}`})
	want(t, r, http.StatusConflict, airlock.CodeAlreadyExecuted)

	// A terminal request answers a long poll at once.
	start := time.Now()
	r = b.do(t, req{method: "GET", path: "/v1/approval-requests/" + id + "?wait=PT30S", token: b.reviewer})
	want(t, r, http.StatusOK, "")
	if time.Since(start) > 2*time.Second {
		t.Fatalf("long poll of a terminal request took %s", time.Since(start))
	}
	// Deciding again loses to the state that holds.
	r = b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/decision", token: b.reviewer, body: `{"status":"denied"}`})
	want(t, r, http.StatusConflict, airlock.CodeNotPending)
	if r.obj(t)["state"] != "approved" {
		t.Fatalf("conflict names state %v, want approved", r.obj(t)["state"])
	}
}

// TestLongPollReturnsOnExpiry checks a long poll ends when the deadline
// expires the request, not when its wait ends.
func TestLongPollReturnsOnExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, b.agentA)
	r := b.create(t, b.agentA, inst, "k", `{"tool":"ls","arguments":{},"timeout":"100ms"}`)
	want(t, r, http.StatusCreated, "")
	id := r.obj(t)["id"].(string)
	got := <-b.longPoll(t, b.agentA, id, "30s")
	want(t, got.r, http.StatusOK, "")
	m := got.r.obj(t)
	if m["state"] != "expired" || m["decision"].(map[string]any)["decided_by"] != airlock.ActorExpiry ||
		m["decision"].(map[string]any)["decided_by_name"] != airlock.ActorExpiry {
		t.Fatalf("after the deadline: %s", got.r.body)
	}
	if _, ok := m["decision"].(map[string]any)["expires_at"]; ok {
		t.Fatalf("an expired request has no expires_at: %s", got.r.body)
	}
	if got.elapsed > 5*time.Second {
		t.Fatalf("long poll took %s for a 100ms deadline", got.elapsed)
	}
}

// TestLongPollBoundedByMaxWait checks a wait longer than the provider's
// maximum ends at the maximum with the request as it is.
func TestLongPollBoundedByMaxWait(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.maxWait = 50 * time.Millisecond })
	_, id := b.pending(t, "10m")
	got := <-b.longPoll(t, b.agentA, id, "1h")
	want(t, got.r, http.StatusOK, "")
	if got.r.obj(t)["state"] != "pending" {
		t.Fatalf("state after the wait: %s", got.r.body)
	}
	if got.elapsed > 5*time.Second {
		t.Fatalf("wait=1h with MaxWait 50ms took %s", got.elapsed)
	}
	for _, bad := range []string{"abc", "0s", "-5s", "P1M"} {
		r := b.do(t, req{method: "GET", path: "/v1/approval-requests/" + id + "?wait=" + bad, token: b.agentA})
		want(t, r, http.StatusBadRequest, airlock.CodeInvalidRequest)
		if r.obj(t)["field"] != "wait" {
			t.Fatalf("wait=%s: field %v", bad, r.obj(t)["field"])
		}
	}
}

// TestLongPollEndsAtShutdown checks a long poll answers with the current
// state when the server's Context ends, instead of holding up shutdown.
func TestLongPollEndsAtShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, id := b.pending(t, "10m")
	waiters := b.svc.Waiters()
	poll := b.longPoll(t, b.agentA, id, "60s")
	waitFor(t, "the long poll to subscribe", func() bool { return b.svc.Waiters() > waiters })
	b.stop()
	got := <-poll
	want(t, got.r, http.StatusOK, "")
	if got.r.obj(t)["state"] != "pending" {
		t.Fatalf("at shutdown: %s", got.r.body)
	}
}

// TestIdempotentCreate is T09 over HTTP: a replay returns the original (200,
// same body); another body with the key is 422; the same key from another
// agent is independent.
func TestIdempotentCreate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	instA := b.instance(t, b.agentA)
	instB := b.instance(t, b.agentB)
	body := `{"tool":"issue_refund","arguments":{"amount":4900,"currency":"GBP"},"timeout":"30m"}`
	first := b.create(t, b.agentA, instA, "key-1", body)
	want(t, first, http.StatusCreated, "")
	again := b.create(t, b.agentA, instA, "key-1", body)
	want(t, again, http.StatusOK, "")
	if !bytes.Equal(first.body, again.body) {
		t.Fatalf("replay body differs:\n%s\n%s", first.body, again.body)
	}
	// Same meaning, different bytes: still the same call.
	same := b.create(t, b.agentA, instA, "key-1", `{"timeout":"30m","arguments":{"currency":"GBP","amount":4900},"tool":"issue_refund"}`)
	want(t, same, http.StatusOK, "")
	conflict := b.create(t, b.agentA, instA, "key-1", `{"tool":"issue_refund","arguments":{"amount":490000,"currency":"GBP"},"timeout":"30m"}`)
	want(t, conflict, http.StatusUnprocessableEntity, airlock.CodeIdempotencyConflict)

	other := b.create(t, b.agentB, instB, "key-1", body)
	want(t, other, http.StatusCreated, "")
	if other.obj(t)["id"] == first.obj(t)["id"] {
		t.Fatalf("agent B's key-1 returned agent A's request")
	}
	// A replay after a decision returns the terminal request.
	id := first.obj(t)["id"].(string)
	want(t, b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/decision", token: b.reviewer, body: `{"status":"denied","note":"no"}`}), http.StatusOK, "")
	replay := b.create(t, b.agentA, instA, "key-1", body)
	want(t, replay, http.StatusOK, "")
	if replay.obj(t)["state"] != "denied" || replay.obj(t)["id"] != id {
		t.Fatalf("replay after denial: %s", replay.body)
	}

	// No key, or a bad one, is refused.
	r := b.do(t, req{method: "POST", path: "/v1/instances/" + instA + "/approval-requests", token: b.agentA, body: body, invalid: true})
	want(t, r, http.StatusBadRequest, airlock.CodeInvalidRequest)
	if r.obj(t)["field"] != "Idempotency-Key" {
		t.Fatalf("missing key: %s", r.body)
	}
	r = b.do(t, req{method: "POST", path: "/v1/instances/" + instA + "/approval-requests", token: b.agentA, body: body,
		header: map[string]string{"Idempotency-Key": "has space"}, invalid: true})
	want(t, r, http.StatusBadRequest, airlock.CodeInvalidRequest)
}

// TestConcurrentIdenticalCreates is T09's race: 50 identical creates at
// once make one request, and none fails.
func TestConcurrentIdenticalCreates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, b.agentA)
	body := `{"tool":"deploy","arguments":{"env":"prod"}}`
	const n = 50
	var wg sync.WaitGroup
	results := make([]resp, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i] = b.create(t, b.agentA, inst, "same-key", body)
		})
	}
	close(start)
	wg.Wait()
	ids := map[any]int{}
	statuses := map[int]int{}
	for _, r := range results {
		statuses[r.status]++
		if r.status < 300 {
			ids[r.obj(t)["id"]]++
		}
	}
	if statuses[http.StatusCreated] != 1 || statuses[http.StatusOK] != n-1 || len(ids) != 1 {
		t.Fatalf("statuses %v, distinct ids %d; want one 201, %d 200, one id", statuses, len(ids), n-1)
	}
	r := b.do(t, req{method: "GET", path: "/v1/approval-requests", token: b.agentA})
	want(t, r, http.StatusOK, "")
	if items := r.obj(t)["items"].([]any); len(items) != 1 {
		t.Fatalf("%d requests stored, want 1", len(items))
	}
}

// TestWireFormat checks the resource's JSON: arguments byte for byte, UTC
// times, absent optionals omitted (never null).
func TestWireFormat(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, b.agentA)
	args := `{ "z": 1, "a" : "<b>&amp;</b>",
  "n": 1.50, "u": "\u00e9" }`
	r := b.create(t, b.agentA, inst, "k", `{"tool":"t","arguments":`+args+`}`)
	want(t, r, http.StatusCreated, "")
	if !bytes.Contains(r.body, []byte(`"arguments":`+args)) {
		t.Fatalf("arguments not returned byte for byte: %s", r.body)
	}
	if bytes.Contains(r.body, []byte("null")) {
		t.Fatalf("a null in the resource: %s", r.body)
	}
	m := r.obj(t)
	for _, absent := range []string{"decision", "execution", "timeout", "agent_reasoning", "context", "title", "proposal", "question"} {
		if _, ok := m[absent]; ok {
			t.Errorf("%s present on a fresh request without it: %s", absent, r.body)
		}
	}
	rfc3339UTC := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$`)
	for _, k := range []string{"created_at", "deadline_at"} {
		s, _ := m[k].(string)
		if !rfc3339UTC.MatchString(s) || strings.HasSuffix(strings.TrimSuffix(s, "Z"), "0") && strings.Contains(s, ".") {
			t.Errorf("%s = %q, want RFC 3339 UTC with at most 6 fraction digits, zeros trimmed", k, s)
		}
	}
	created, _ := time.Parse(time.RFC3339Nano, m["created_at"].(string))
	deadline, _ := time.Parse(time.RFC3339Nano, m["deadline_at"].(string))
	if deadline.Sub(created) != 15*time.Minute {
		t.Errorf("default window %s, want 15m", deadline.Sub(created))
	}

	// Instance resource and delete.
	r = b.do(t, req{method: "GET", path: "/v1/instances/" + inst, token: b.reviewer})
	want(t, r, http.StatusOK, "")
	if r.obj(t)["pending_count"] != float64(1) || r.obj(t)["name"] != "adapter" {
		t.Fatalf("instance: %s", r.body)
	}
	r = b.do(t, req{method: "DELETE", path: "/v1/instances/" + inst, token: b.agentA})
	want(t, r, http.StatusOK, "")
	if string(bytes.TrimSpace(r.body)) != `{"cancelled":1}` {
		t.Fatalf("delete: %s", r.body)
	}
	r = b.do(t, req{method: "GET", path: "/v1/approval-requests/" + m["id"].(string), token: b.agentA})
	if r.obj(t)["state"] != "cancelled" {
		t.Fatalf("after delete: %s", r.body)
	}
}

// TestListRequests checks filters and cursor pagination.
func TestListRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, b.agentA)
	for i := range 5 {
		tool := "read"
		if i%2 == 1 {
			tool = "write"
		}
		want(t, b.create(t, b.agentA, inst, fmt.Sprint("k", i), `{"tool":"`+tool+`","arguments":{"i":`+fmt.Sprint(i)+`}}`), http.StatusCreated, "")
	}
	var seen []any
	cursor := ""
	for page := 0; ; page++ {
		path := "/v1/approval-requests?limit=2&instance_id=" + inst
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := b.do(t, req{method: "GET", path: path, token: b.reviewer})
		want(t, r, http.StatusOK, "")
		m := r.obj(t)
		for _, it := range m["items"].([]any) {
			seen = append(seen, it.(map[string]any)["arguments"].(map[string]any)["i"])
		}
		next, ok := m["next_cursor"].(string)
		if !ok {
			break
		}
		cursor = next
		if page > 5 {
			t.Fatal("pagination does not end")
		}
	}
	if fmt.Sprint(seen) != "[4 3 2 1 0]" {
		t.Fatalf("pages gave %v, want newest first [4 3 2 1 0]", seen)
	}
	r := b.do(t, req{method: "GET", path: "/v1/approval-requests?tool=write&state=pending&kind=tool_call", token: b.reviewer})
	want(t, r, http.StatusOK, "")
	if n := len(r.obj(t)["items"].([]any)); n != 2 {
		t.Fatalf("tool=write gave %d, want 2", n)
	}
	// state=all lists every state, as the CLI's --state all does.
	all := b.do(t, req{method: "GET", path: "/v1/approval-requests?state=all&tool=write", token: b.reviewer})
	want(t, all, http.StatusOK, "")
	none := b.do(t, req{method: "GET", path: "/v1/approval-requests?tool=write", token: b.reviewer})
	if a, n := len(all.obj(t)["items"].([]any)), len(none.obj(t)["items"].([]any)); a != n || a < 2 {
		t.Fatalf("state=all gave %d items, no state %d; want the same, at least 2", a, n)
	}
	for _, bad := range []string{"state=done", "kind=x", "limit=0", "limit=201", "limit=x", "cursor=zz"} {
		r := b.do(t, req{method: "GET", path: "/v1/approval-requests?" + bad, token: b.reviewer, invalid: true})
		want(t, r, http.StatusBadRequest, airlock.CodeInvalidRequest)
	}
}
