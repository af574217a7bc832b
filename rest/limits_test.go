package rest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/ratelimit"
)

// padded returns a create body of exactly n bytes.
func padded(t *testing.T, n int) string {
	t.Helper()
	head, tail := `{"tool":"ls","arguments":{"pad":"`, `"}}`
	if n < len(head)+len(tail) {
		t.Fatalf("body of %d bytes is too small", n)
	}
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

// TestBodyLimit is T20's first line: a body over 1 MiB is 413 whether its
// length is declared or streamed, and exactly 1 MiB is accepted.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, b.agentA)
	path := "/v1/instances/" + inst + "/approval-requests"

	r := b.create(t, b.agentA, inst, "at-limit", padded(t, airlock.MaxBodyBytes))
	want(t, r, http.StatusCreated, "")

	r = b.create(t, b.agentA, inst, "over-limit", padded(t, airlock.MaxBodyBytes+1))
	want(t, r, http.StatusRequestEntityTooLarge, airlock.CodePayloadTooLarge)

	// Without a Content-Length (chunked), the limit holds while reading.
	hr := b.newRequest(context.Background(), t, req{method: "POST", path: path, token: b.agentA,
		header: map[string]string{"Idempotency-Key": "chunked", "Content-Type": "application/json"}})
	hr.Body = io.NopCloser(io.MultiReader(strings.NewReader(padded(t, 2<<20))))
	hr.ContentLength = -1
	res, err := b.client.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked 2 MiB body: %d, want 413", res.StatusCode)
	}

	_, id := b.pending(t, "10m")
	r = b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/decision", token: b.reviewer,
		body: `{"status":"approved","note":"` + strings.Repeat("n", 2<<20) + `"}`, invalid: true})
	want(t, r, http.StatusRequestEntityTooLarge, airlock.CodePayloadTooLarge)

	r = b.do(t, req{method: "GET", path: "/v1/approval-requests", token: b.reviewer})
	if n := len(r.obj(t)["items"].([]any)); n != 2 {
		t.Fatalf("%d requests stored, want 2 (the one at the limit and the fixture)", n)
	}
}

// TestRateLimitPerToken is T20's rate line: past its burst a token gets 429
// with Retry-After, and other tokens are unaffected.
func TestRateLimitPerToken(t *testing.T) {
	t.Parallel()
	// The limiter's clock stands still: a slow machine taking seconds
	// over the burst refills nothing.
	frozen := time.Now()
	b := setup(t, func(o *options) { o.limiter = ratelimit.New(0.5, 3, func() time.Time { return frozen }) })
	list := req{method: "GET", path: "/v1/approval-requests", token: b.reviewer}
	for i := range 3 {
		if r := b.do(t, list); r.status != http.StatusOK {
			t.Fatalf("request %d within the burst: %d", i+1, r.status)
		}
	}
	r := b.do(t, list)
	want(t, r, http.StatusTooManyRequests, airlock.CodeRateLimited)
	retry, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || retry < 1 || retry > 2 {
		t.Fatalf("Retry-After %q, want 1..2 s at 0.5 requests/s", r.header.Get("Retry-After"))
	}
	list.token = b.agentA
	want(t, b.do(t, list), http.StatusOK, "")
	// Unauthenticated endpoints are not limited.
	for range 5 {
		want(t, b.do(t, req{method: "GET", path: "/healthz"}), http.StatusOK, "")
	}
}

// TestSlowClientsDoNotBlockHealthz is T20's slow-client line: 500
// connections that trickle headers or bodies do not stop /healthz (nor an
// authenticated read) from answering.
func TestSlowClientsDoNotBlockHealthz(t *testing.T) {
	t.Parallel()
	const slow = 500
	var newConns, activeConns atomic.Int64
	b := setup(t, func(o *options) {
		o.connState = func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				newConns.Add(1)
			case http.StateActive:
				activeConns.Add(1)
			}
		}
	})
	inst, _ := b.pending(t, "10m")
	addr := b.srv.Listener.Addr().String()
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range slow {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		if i%2 == 0 {
			// Headers that never end.
			fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
		} else {
			// Headers, then a body that never comes.
			fmt.Fprintf(c, "POST /v1/instances HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
				"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", b.agentA)
		}
	}
	waitFor(t, "the server to accept every slow connection", func() bool {
		// Every connection is accepted; those whose headers ended are
		// active, their handlers blocked reading the body.
		return newConns.Load() >= slow && activeConns.Load() >= slow/2
	})

	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	res, err := client.Get(b.srv.URL + "/healthz")
	if err != nil {
		t.Fatalf("/healthz with %d slow clients: %v", slow, err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d", res.StatusCode)
	}
	hr, _ := http.NewRequest("GET", b.srv.URL+"/v1/instances/"+inst, nil)
	hr.Header.Set("Authorization", "Bearer "+b.agentA)
	res, err = client.Do(hr)
	if err != nil {
		t.Fatalf("authenticated read with %d slow clients: %v", slow, err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("authenticated read: %d", res.StatusCode)
	}
	t.Logf("/healthz and a read answered in %s with %d slow connections open", time.Since(start), slow)

	// The slow connections are still being held, not dropped.
	c := conns[1]
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := bufio.NewReader(c).ReadByte(); err == nil {
		t.Fatalf("a slow body connection was answered before its body arrived")
	}
}
