package rest

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/getkin/kin-openapi/openapi3"
)

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	id, typ string
	data    string
	comment string
}

// stream is an open event stream read by a goroutine.
type stream struct {
	events <-chan sseEvent
	cancel context.CancelFunc
	done   <-chan struct{} // closed when the server ends the stream
}

// openStream connects to /v1/events with extra headers and parses what
// arrives. It fails the test unless the answer is a 200 stream.
func (b *bundle) openStream(t *testing.T, token, query string, header map[string]string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	res, err := b.client.Do(b.newRequest(ctx, t, req{method: "GET", path: "/v1/events" + query, token: token, header: header}))
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	events := make(chan sseEvent, 1000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 4<<20)
		var e sseEvent
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if e.id != "" || e.comment != "" {
					e.data = strings.Join(data, "\n")
					events <- e
				}
				e, data = sseEvent{}, nil
			case strings.HasPrefix(line, ":"):
				e.comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "id: "):
				e.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				e.typ = line[7:]
			case strings.HasPrefix(line, "data: "):
				data = append(data, line[6:])
			}
		}
	}()
	return &stream{events: events, cancel: cancel, done: done}
}

// next returns the next event (skipping comments unless wanted), failing
// after a few seconds.
func (s *stream) next(t *testing.T, comments bool) sseEvent {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case e := <-s.events:
			if e.id == "" && !comments {
				continue
			}
			return e
		case <-s.done:
			t.Fatal("stream ended")
		case <-timeout:
			t.Fatal("no event within 5s")
		}
	}
}

// until reads events until one of type typ about request id arrives.
func (s *stream) until(t *testing.T, typ airlock.EventType, id string) (sseEvent, map[string]any) {
	t.Helper()
	for {
		e := s.next(t, false)
		data := decodeEventData(t, e)
		ev := data["event"].(map[string]any)
		if e.typ == string(typ) && ev["request_id"] == id {
			return e, data
		}
	}
}

// decodeEventData checks one event's data against the EventData schema and
// that its id and type match the SSE fields.
func decodeEventData(t *testing.T, e sseEvent) map[string]any {
	t.Helper()
	var data map[string]any
	if err := json.Unmarshal([]byte(e.data), &data); err != nil {
		t.Fatalf("event %s data is not JSON: %v: %q", e.id, err, e.data)
	}
	doc, _ := loadSpec(t)
	var v any
	json.Unmarshal([]byte(e.data), &v)
	if err := doc.Components.Schemas["EventData"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		t.Fatalf("event %s data does not match EventData: %v", e.id, err)
	}
	ev := data["event"].(map[string]any)
	if strconv.FormatFloat(ev["id"].(float64), 'f', -1, 64) != e.id || ev["type"] != e.typ {
		t.Fatalf("SSE id/event %s/%s differ from data %v", e.id, e.typ, ev)
	}
	return data
}

// TestEventStream checks events arrive for create and decide with the
// request resource, and that resuming with Last-Event-ID (or ?after=)
// continues after what was seen.
func TestEventStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.openStream(t, b.reviewer, "", nil)
	inst := b.instance(t, b.agentA)
	args := "{\n  \"path\": \"/etc\"\n}"
	r := b.create(t, b.agentA, inst, "k", `{"tool":"ls","arguments":`+args+`,"agent_reasoning":"look"}`)
	want(t, r, http.StatusCreated, "")
	id := r.obj(t)["id"].(string)

	createdEv, data := s.until(t, airlock.EventRequestCreated, id)
	resource := data["request"].(map[string]any)
	if resource["id"] != id || resource["agent_reasoning"] != "look" {
		t.Fatalf("created event's request: %v", resource)
	}
	if !strings.Contains(createdEv.data, `"arguments":`+args) {
		t.Fatalf("arguments with line breaks not carried byte for byte across data lines: %q", createdEv.data)
	}

	want(t, b.do(t, reqDecide(id, b.reviewer, "approved")), http.StatusOK, "")
	approvedEv, data := s.until(t, airlock.EventRequestApproved, id)
	if data["request"].(map[string]any)["state"] != "approved" || data["event"].(map[string]any)["actor"] != b.callers["reviewer"].ID {
		t.Fatalf("approved event: %s", approvedEv.data)
	}
	s.cancel()

	// Resume after the created event: the next one is the approval.
	for _, resume := range []struct {
		query  string
		header map[string]string
	}{
		{"", map[string]string{"Last-Event-ID": createdEv.id}},
		{"?after=" + createdEv.id, nil},
	} {
		s2 := b.openStream(t, b.reviewer, resume.query, resume.header)
		if e := s2.next(t, false); e.id != approvedEv.id {
			t.Fatalf("resumed after %s: first event %s (%s), want %s", createdEv.id, e.id, e.typ, approvedEv.id)
		}
		s2.cancel()
	}

	// Resume after the last event: nothing is replayed; the next change arrives.
	s3 := b.openStream(t, b.reviewer, "", map[string]string{"Last-Event-ID": approvedEv.id})
	want(t, b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/execution", token: b.agentA}), http.StatusOK, "")
	e := s3.next(t, false)
	if e.typ != string(airlock.EventExecutionClaimed) {
		t.Fatalf("after the last seen event, got %s %s, want execution.claimed", e.id, e.typ)
	}
	if n, _ := strconv.Atoi(e.id); n <= must(strconv.Atoi(approvedEv.id)) {
		t.Fatalf("event id %s does not follow %s", e.id, approvedEv.id)
	}

	r = b.do(t, req{method: "GET", path: "/v1/events", token: b.reviewer, header: map[string]string{"Last-Event-ID": "x"}, invalid: true})
	want(t, r, http.StatusBadRequest, airlock.CodeInvalidRequest)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func reqDecide(id, token, status string) req {
	return req{method: "POST", path: "/v1/approval-requests/" + id + "/decision", token: token, body: `{"status":"` + status + `"}`}
}

// TestEventStreamHeartbeatAndShutdown checks an idle stream sends comments
// and ends when the server's Context ends.
func TestEventStreamHeartbeatAndShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.heartbeat = 20 * time.Millisecond })
	s := b.openStream(t, b.admin, "?after=1000000", nil)
	for {
		if e := s.next(t, true); e.comment == "heartbeat" {
			break
		}
	}
	b.stop()
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		t.Fatal("stream still open 5s after shutdown")
	}
}

// TestEventStreamEndsForRevokedToken checks a stream stops at the next wake
// once its token is revoked.
func TestEventStreamEndsForRevokedToken(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.heartbeat = 20 * time.Millisecond })
	s := b.openStream(t, b.reviewer, "", nil)
	s.next(t, false)
	want(t, b.do(t, req{method: "DELETE", path: "/v1/tokens/" + b.callers["reviewer"].ID, token: b.admin}), http.StatusOK, "")
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		t.Fatal("stream of a revoked token still open")
	}
}

// served returns how many requests to route the handler has finished, from
// its metrics.
func (b *bundle) served(t *testing.T, route string) float64 {
	t.Helper()
	mfs, err := b.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "airlock_http_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "route" && l.GetValue() == route {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// TestStreamAndLongPollEndWhenClientLeaves checks the handlers return
// promptly when their client disconnects, long before a heartbeat or the
// wait would end them.
func TestStreamAndLongPollEndWhenClientLeaves(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.openStream(t, b.reviewer, "", nil)
	s.next(t, false)
	s.cancel()
	waitFor(t, "the event stream handler to return", func() bool { return b.served(t, "GET /v1/events") == 1 })

	_, id := b.pending(t, "10m")
	ctx, cancel := context.WithCancel(context.Background())
	waiters := b.svc.Waiters()
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err := b.client.Do(b.newRequest(ctx, t, req{method: "GET", path: "/v1/approval-requests/" + id + "?wait=60s", token: b.agentA}))
		if err == nil {
			res.Body.Close()
		}
	}()
	waitFor(t, "the long poll to subscribe", func() bool { return b.svc.Waiters() > waiters })
	cancel()
	<-done
	waitFor(t, "the long poll handler to return", func() bool {
		return b.served(t, "GET /v1/approval-requests/{id}") == 1
	})
	mfs, _ := b.reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" && l.GetValue() == "500" {
					t.Errorf("a client leaving was counted as a 500: %v", m)
				}
			}
		}
	}
}
