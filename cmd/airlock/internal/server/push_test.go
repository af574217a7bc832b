package server

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/logtest"
	"github.com/airlockhq/airlock/internal/pushrecv"
	"github.com/airlockhq/airlock/internal/testkit"
)

// pushReceiver is a push service started in the test: it decrypts every
// message with its subscription's private keys (RFC 8291, with
// internal/pushrecv: the standard library alone, sharing no code with
// the sender) and checks the VAPID JWT's ES256 signature against the key
// it names (RFC 8292). It misbehaves on purpose (hangs, 404, 410), which
// pushrecv's receiver does not.
type pushReceiver struct {
	t      *testing.T
	srv    *httptest.Server
	status map[string]int  // by path: the status a subscription answers (0: 201)
	hang   map[string]bool // by path: never answers
	keys   map[string]*ecdh.PrivateKey
	auth   map[string][]byte

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced at each message
	got      map[string][]pushGot
	problems []string
	vapidKey string // the k= of every Authorization seen
}

type pushGot struct {
	plain []byte
	at    time.Time
}

func newPushReceiver(t *testing.T) *pushReceiver {
	p := &pushReceiver{t: t, status: map[string]int{}, hang: map[string]bool{}, keys: map[string]*ecdh.PrivateKey{}, auth: map[string][]byte{},
		changed: make(chan struct{}), got: map[string][]pushGot{}}
	release := make(chan struct{})
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve(release)))
	t.Cleanup(p.srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: a hanging handler returns, so Close does not wait on it
	return p
}

// subscribe makes a browser's subscription at path: its keys, fresh.
func (p *pushReceiver) subscribe(path string) airlock.PushSubscriptionInput {
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	auth := make([]byte, 16)
	rand.Read(auth)
	p.keys[path], p.auth[path] = k, auth
	return airlock.PushSubscriptionInput{Endpoint: p.srv.URL + path,
		Keys: airlock.PushKeys{P256DH: airlock.EncodePushKey(k.PublicKey().Bytes()), Auth: airlock.EncodePushKey(auth)}}
}

func (p *pushReceiver) serve(release <-chan struct{}) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := readAll(r)
		if err != nil {
			return
		}
		plain, k, err := p.open(r, body)
		p.mu.Lock()
		if err != nil {
			p.problems = append(p.problems, fmt.Sprintf("%s: %v", r.URL.Path, err))
		} else {
			p.got[r.URL.Path] = append(p.got[r.URL.Path], pushGot{plain: plain, at: time.Now()})
			if p.vapidKey != "" && p.vapidKey != k {
				p.problems = append(p.problems, fmt.Sprintf("VAPID keys %s and %s: want one", p.vapidKey, k))
			}
			p.vapidKey = k
		}
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
		if p.hang[r.URL.Path] {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		if s := p.status[r.URL.Path]; s != 0 {
			w.WriteHeader(s)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}
}

func readAll(r *http.Request) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(http.MaxBytesReader(nil, r.Body, 8<<10))
	return b.Bytes(), err
}

// open checks a push's VAPID authorization and decrypts its body,
// returning the plaintext and the VAPID public key it was signed with.
func (p *pushReceiver) open(r *http.Request, body []byte) ([]byte, string, error) {
	if ce := r.Header.Get("Content-Encoding"); ce != "aes128gcm" {
		return nil, "", fmt.Errorf("Content-Encoding %q; want aes128gcm", ce)
	}
	if ttl := r.Header.Get("TTL"); ttl == "" || ttl == "0" {
		return nil, "", fmt.Errorf("TTL %q; want the seconds to the deadline", ttl)
	}
	k, err := pushrecv.CheckVAPID(r.Header.Get("Authorization"), "http://"+r.Host, time.Now())
	if err != nil {
		return nil, "", err
	}
	priv, auth := p.keys[r.URL.Path], p.auth[r.URL.Path]
	if priv == nil {
		return nil, "", errors.New("a push to no subscription")
	}
	plain, err := pushrecv.Decrypt(priv, auth, body)
	return plain, k, err
}

// wait returns once ok holds of what arrived, failing at the deadline.
func (p *pushReceiver) wait(t *testing.T, within time.Duration, what string, ok func(map[string][]pushGot) bool) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		done, changed := ok(p.got), p.changed
		p.mu.Unlock()
		if done {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("after %s: %s has not happened", within, what)
		}
	}
}

// TestPushes is T39's push half, over the server that serve runs: a
// reviewer subscribes four browsers (one healthy, one hanging, one the
// push service answers 410, one 404) and a reviewer of the agent's own
// principal subscribes one. Every pending request arrives at the healthy
// browser, once created and once reminded, as exactly {request_id, tool,
// deadline_at}: 0 messages carry arguments, reasoning or context, every
// one decrypts with the browser's keys and carries a VAPID signature by
// the server's one key. The 410 and 404 subscriptions are removed; the
// hanging one delays no push to the others and no request; the reviewer
// who may not decide (self-approval) gets nothing.
func TestPushes(t *testing.T) {
	t.Parallel()
	var log logtest.Recorder
	var admin string
	remind, err := airlock.ParseRemindBefore("50%")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(t.Context(), Config{
		Store: openSQLite(t, filepath.Join(t.TempDir(), "airlock.db")), Addr: "127.0.0.1:0", Logger: log.Logger(),
		ShowAdminToken: func(s string) error { admin = s; return nil }, OutboundAllowPrivate: true, RemindBefore: remind,
		WebhookTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	defer func() {
		stop()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	base := "http://" + srv.Addr()
	call := func(method, path, token, body string, want int) testkit.Reply {
		t.Helper()
		r, err := testkit.Call(t.Context(), http.DefaultClient, method, base+path, token, body)
		if err != nil || r.Status != want {
			t.Fatalf("%s %s: %d %v %s; want %d", method, path, r.Status, err, r.Raw, want)
		}
		return r
	}
	mint := func(name, role, principal string) string {
		return call("POST", "/v1/tokens", admin, fmt.Sprintf(`{"name":%q,"role":%q,"principal":%q}`, name, role, principal), 201).Str("secret")
	}
	agent, reviewer, self := mint("agent", "agent", "ann"), mint("reviewer", "reviewer", "rev"), mint("self", "reviewer", "ann")

	push := newPushReceiver(t)
	push.hang["/hang"] = true
	push.status["/gone"] = http.StatusGone
	push.status["/missing"] = http.StatusNotFound
	subs := map[string]string{}
	for _, s := range []struct{ path, token string }{{"/ok", reviewer}, {"/hang", reviewer}, {"/gone", reviewer}, {"/missing", reviewer}, {"/self", self}} {
		body, _ := json.Marshal(push.subscribe(s.path))
		subs[s.path] = call("POST", "/v1/push/subscriptions", s.token, string(body), 201).Str("id")
	}
	serverKey := call("GET", "/v1/push/vapid-public-key", reviewer, "", 200).Str("public_key")

	inst := call("POST", "/v1/instances", agent, `{"name":"pushes"}`, 201).Str("id")
	const n = 20
	created := map[string]time.Time{}
	deadlines := map[string]string{}
	var slowest time.Duration
	for i := range n {
		start := time.Now()
		r, err := testkit.Call(t.Context(), http.DefaultClient, "POST", base+"/v1/instances/"+inst+"/approval-requests", agent,
			fmt.Sprintf(`{"tool":"send_money","arguments":{"secret":"ARG-SECRET-%d"},"timeout":"8s","agent_reasoning":"REASON-SECRET","context":{"seen":"CONTEXT-SECRET"}}`, i),
			"Idempotency-Key", fmt.Sprint("k", i))
		if err != nil || r.Status != 201 {
			t.Fatalf("create: %d %v %s", r.Status, err, r.Raw)
		}
		slowest = max(slowest, time.Since(start))
		created[r.Str("id")], deadlines[r.Str("id")] = time.Now(), r.Str("deadline_at")
	}
	// A hanging push service holds one worker of its own: creates stay
	// as quick as ever.
	if slowest > time.Second {
		t.Errorf("the slowest create took %s while a push service hung", slowest)
	}

	// Each request arrives at the healthy browser twice: created, then
	// reminded halfway to its deadline.
	push.wait(t, 15*time.Second, "every request pushed twice to /ok", func(got map[string][]pushGot) bool {
		seen := map[string]int{}
		for _, g := range got["/ok"] {
			var m struct {
				RequestID string `json:"request_id"`
			}
			json.Unmarshal(g.plain, &m)
			seen[m.RequestID]++
		}
		for id := range created {
			if seen[id] < 2 {
				return false
			}
		}
		return true
	})
	// The 410 and 404 subscriptions are gone from the store.
	deadline := time.Now().Add(10 * time.Second)
	for {
		eps, err := srv.store.ListEndpoints(t.Context(), airlock.EndpointPush)
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, e := range eps {
			left = append(left, e.ID)
		}
		slices.Sort(left)
		want := []string{subs["/ok"], subs["/hang"], subs["/self"]}
		slices.Sort(want)
		if slices.Equal(left, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("push subscriptions left %v; want %v (410 and 404 removed)", left, want)
		}
		select {
		case <-push.changedCh():
		case <-time.After(100 * time.Millisecond): // the delete commits after the answer: look again
		}
	}

	push.mu.Lock()
	defer push.mu.Unlock()
	for _, p := range push.problems {
		t.Errorf("push: %s", p)
	}
	if push.vapidKey != serverKey {
		t.Errorf("pushes signed with %s; the server's key is %s", push.vapidKey, serverKey)
	}
	if got := len(push.got["/self"]); got != 0 {
		t.Errorf("the reviewer of the agent's own principal got %d pushes; want 0", got)
	}
	if len(push.got["/gone"]) == 0 || len(push.got["/missing"]) == 0 || len(push.got["/hang"]) == 0 {
		t.Errorf("attempts: gone %d, missing %d, hang %d; want each tried", len(push.got["/gone"]), len(push.got["/missing"]), len(push.got["/hang"]))
	}
	leaks, total := 0, 0
	first := map[string]time.Duration{} // by request: its first push to /ok, at creation
	for path, gots := range push.got {
		for _, g := range gots {
			total++
			for _, secret := range []string{"ARG-SECRET", "REASON-SECRET", "CONTEXT-SECRET", "arguments", "agent_reasoning", "context", "note"} {
				if bytes.Contains(g.plain, []byte(secret)) {
					leaks++
					t.Errorf("a push to %s carries %q: %s", path, secret, g.plain)
				}
			}
			var m map[string]string
			if err := json.Unmarshal(g.plain, &m); err != nil || len(m) != 3 || m["tool"] != "send_money" || deadlines[m["request_id"]] == "" {
				t.Errorf("a push to %s is %s; want exactly {request_id, tool, deadline_at} of a request made", path, g.plain)
				continue
			}
			if want, _ := time.Parse(time.RFC3339Nano, deadlines[m["request_id"]]); !strings.HasPrefix(m["deadline_at"], want.UTC().Format("2006-01-02T15:04:05")) {
				t.Errorf("push deadline_at %s; the request's is %s", m["deadline_at"], deadlines[m["request_id"]])
			}
			if lag := g.at.Sub(created[m["request_id"]]); path == "/ok" && (first[m["request_id"]] == 0 || lag < first[m["request_id"]]) {
				first[m["request_id"]] = lag
			}
		}
	}
	var firsts []time.Duration
	for _, d := range first {
		firsts = append(firsts, d)
	}
	slices.Sort(firsts)
	if len(firsts) != n {
		t.Fatalf("%d requests reached /ok; want %d", len(firsts), n)
	}
	t.Logf("%d pushes decrypted and verified, %d carrying arguments, reasoning, context or notes; push lag at creation p50 %s, max %s",
		total, leaks, firsts[n/2], firsts[n-1])
	if firsts[n-1] > time.Second {
		t.Errorf("the slowest push at creation took %s; want under 1 s while another push service hangs", firsts[n-1])
	}
}

func (p *pushReceiver) changedCh() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}
