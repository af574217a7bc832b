package slackapp_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/server"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/slackapp"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/airlockhq/airlock/store/sqlite"
)

const (
	botToken      = "xoxb-1111-2222-secretbottoken"
	signingSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	channelID     = "C0AIRLOCK"
	adminSecret   = "admin-secret-for-slack-tests"
)

// message is one Slack message as the fake Web API keeps it.
type message struct {
	channel, ts, text string
	blocks            []map[string]any
	updates           int
	// replies are the thread's replies (thread_ts = ts), and broadcast
	// whether each was also sent to the channel (reply_broadcast).
	replies   []*message
	broadcast []bool
}

// fakeSlack speaks the two Web API methods Airlock calls, as Slack
// documents them (chat.postMessage, with thread_ts and reply_broadcast
// for a reply, and chat.update): form-encoded POSTs authenticated by the
// bot token,
// answering {"ok": true, "channel", "ts", "message"} or {"ok": false,
// "error"}. It also takes response_url posts.
type fakeSlack struct {
	srv *httptest.Server
	mu  sync.Mutex
	msg map[string]*message // by ts
	// byRequest maps a request ID (the buttons' value, or found in the
	// link) to its message's ts.
	byRequest map[string]string
	posts     int
	replies   []string
	changed   chan struct{}
	t         *testing.T
	// fail, when set, may answer the n-th call (from 1) of a method
	// itself, returning true.
	fail  func(method string, n int, w http.ResponseWriter) bool
	calls map[string]int
}

func newFakeSlack(t *testing.T) *fakeSlack {
	f := &fakeSlack{msg: map[string]*message{}, byRequest: map[string]string{}, changed: make(chan struct{}, 1000), t: t,
		calls: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSlack) answer(w http.ResponseWriter, v map[string]any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	json.NewEncoder(w).Encode(v)
}

func (f *fakeSlack) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/hooks/response" {
		var v map[string]any
		json.NewDecoder(r.Body).Decode(&v)
		f.mu.Lock()
		f.replies = append(f.replies, fmt.Sprint(v["text"]))
		f.mu.Unlock()
		return
	}
	if r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		http.Error(w, "want a form POST", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.calls[r.URL.Path]++
	n, fail := f.calls[r.URL.Path], f.fail
	f.mu.Unlock()
	if fail != nil && fail(strings.TrimPrefix(r.URL.Path, "/api/"), n, w) {
		f.changed <- struct{}{}
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if tok == "" {
		tok = r.PostForm.Get("token")
	}
	if tok != botToken {
		f.answer(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	var blocks []map[string]any
	if err := json.Unmarshal([]byte(r.PostForm.Get("blocks")), &blocks); err != nil || len(blocks) == 0 || len(blocks) > 50 {
		f.answer(w, map[string]any{"ok": false, "error": "invalid_blocks"})
		return
	}
	text := r.PostForm.Get("text")
	f.mu.Lock()
	defer func() {
		f.mu.Unlock()
		f.changed <- struct{}{}
	}()
	switch r.URL.Path {
	case "/api/chat.postMessage":
		if r.PostForm.Get("channel") != channelID {
			f.answer(w, map[string]any{"ok": false, "error": "channel_not_found"})
			return
		}
		f.posts++
		ts := fmt.Sprintf("1700000000.%06d", f.posts)
		m := &message{channel: channelID, ts: ts, text: text, blocks: blocks}
		if parent := r.PostForm.Get("thread_ts"); parent != "" {
			// A reply in the thread of parent, which must exist.
			p := f.msg[parent]
			if p == nil {
				f.answer(w, map[string]any{"ok": false, "error": "thread_not_found"})
				return
			}
			p.replies = append(p.replies, m)
			p.broadcast = append(p.broadcast, r.PostForm.Get("reply_broadcast") == "true")
			f.answer(w, map[string]any{"ok": true, "channel": channelID, "ts": ts,
				"message": map[string]any{"type": "message", "text": text, "bot_id": "B0AIRLOCK", "ts": ts, "thread_ts": parent}})
			return
		}
		f.msg[ts] = m
		if id := requestOf(blocks); id != "" {
			if prev, ok := f.byRequest[id]; ok {
				f.t.Errorf("request %s posted twice: %s and %s", id, prev, ts)
			}
			f.byRequest[id] = ts
		}
		f.answer(w, map[string]any{"ok": true, "channel": channelID, "ts": ts,
			"message": map[string]any{"type": "message", "subtype": "bot_message", "text": text, "bot_id": "B0AIRLOCK", "ts": ts}})
	case "/api/chat.update":
		m := f.msg[r.PostForm.Get("ts")]
		if m == nil || r.PostForm.Get("channel") != m.channel {
			f.answer(w, map[string]any{"ok": false, "error": "message_not_found"})
			return
		}
		m.text, m.blocks = text, blocks
		m.updates++
		f.answer(w, map[string]any{"ok": true, "channel": m.channel, "ts": m.ts, "text": text,
			"message": map[string]any{"type": "message", "text": text, "bot_id": "B0AIRLOCK"}})
	default:
		f.answer(w, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

// requestOf finds the request a message shows, by the link to its page.
func requestOf(blocks []map[string]any) string {
	b, _ := json.Marshal(blocks)
	s := string(b)
	i := strings.Index(s, "/requests/apr_")
	if i < 0 {
		return ""
	}
	s = s[i+len("/requests/"):]
	if j := strings.IndexAny(s, `|">\`); j > 0 {
		s = s[:j]
	}
	return s
}

// await waits until cond holds of the fake's messages.
func (f *fakeSlack) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		f.mu.Lock()
		ok := cond()
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-f.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (f *fakeSlack) message(id string) *message { return f.msg[f.byRequest[id]] }

func hasButtons(m *message) bool {
	for _, b := range m.blocks {
		if b["type"] == "actions" {
			return true
		}
	}
	return false
}

func blocksJSON(m *message) string { b, _ := json.Marshal(m.blocks); return string(b) }

type stack struct {
	base  string
	slack *fakeSlack
	logs  *testkit.Buffer
	hc    *http.Client
}

func start(t *testing.T, st store.Store, opts ...func(*server.Config)) *stack {
	t.Helper()
	f := newFakeSlack(t)
	logs := &testkit.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	cfg := server.Config{
		Store: st, Addr: "127.0.0.1:0", AdminToken: adminSecret, Limits: airlock.DefaultLimits(),
		Slack:              slackapp.Config{BotToken: botToken, Channel: channelID, APIURL: f.srv.URL + "/api/"},
		SlackSigningSecret: signingSecret,
		Logger:             slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := server.New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		for _, secret := range []string{botToken, signingSecret} {
			if strings.Contains(logs.String(), secret) {
				t.Errorf("a secret is in the logs:\n%s", logs.String())
			}
		}
	})
	return &stack{base: "http://" + srv.Addr(), slack: f, logs: logs, hc: &http.Client{Timeout: 30 * time.Second}}
}

func (s *stack) call(t *testing.T, method, path, token, body string, header ...string) testkit.Reply {
	t.Helper()
	r, err := testkit.Call(context.Background(), s.hc, method, s.base+path, token, body, header...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func (s *stack) token(t *testing.T, name, role, principal string) string {
	t.Helper()
	r := s.call(t, "POST", "/v1/tokens", adminSecret, fmt.Sprintf(`{"name":%q,"role":%q,"principal":%q}`, name, role, principal))
	if r.Status != http.StatusCreated || r.Str("secret") == "" {
		t.Fatalf("create token %s: %d %s", name, r.Status, r.Raw)
	}
	return r.Str("secret")
}

func (s *stack) link(t *testing.T, principal, slackUser string) {
	t.Helper()
	if r := s.call(t, "PUT", "/v1/reviewers/"+url.PathEscape(principal)+"/link", adminSecret, fmt.Sprintf(`{"slack_user_id":%q}`, slackUser)); r.Status != http.StatusOK {
		t.Fatalf("link %s: %d %s", principal, r.Status, r.Raw)
	}
}

// interaction is a block_actions payload as Slack sends it when user
// clicks actionID on request id's message.
func interaction(user, actionID, id, responseURL string) string {
	p := map[string]any{
		"type": "block_actions", "user": map[string]any{"id": user, "username": strings.ToLower(user), "team_id": "T0TEAM"},
		"api_app_id": "A0AIRLOCK", "token": "legacy-verification-token", "trigger_id": "1.2.3",
		"team":         map[string]any{"id": "T0TEAM", "domain": "example"},
		"container":    map[string]any{"type": "message", "message_ts": "1700000000.000001", "channel_id": channelID, "is_ephemeral": false},
		"channel":      map[string]any{"id": channelID, "name": "approvals"},
		"response_url": responseURL,
		"actions": []map[string]any{{"action_id": actionID, "block_id": "decide", "type": "button", "value": id,
			"text": map[string]any{"type": "plain_text", "text": "Approve"}, "action_ts": "1700000001.000000"}},
	}
	b, _ := json.Marshal(p)
	return url.Values{"payload": {string(b)}}.Encode()
}

// sign signs body as Slack does: v0= and the hex HMAC-SHA256, keyed by
// the signing secret, of "v0:<timestamp>:<body>".
func sign(secret string, ts int64, body string) (sig, stamp string) {
	stamp = strconv.FormatInt(ts, 10)
	mac := hmac.New(sha256.New, []byte(secret))
	io.WriteString(mac, "v0:"+stamp+":"+body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil)), stamp
}

// post sends body to /slack/interactions with the given signature
// headers (none when sig is empty).
func (s *stack) post(t *testing.T, body, sig, stamp string) testkit.Reply {
	t.Helper()
	req, _ := http.NewRequest("POST", s.base+"/slack/interactions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if sig != "" {
		req.Header.Set("X-Slack-Signature", sig)
		req.Header.Set("X-Slack-Request-Timestamp", stamp)
	}
	res, err := s.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := testkit.Reply{Status: res.StatusCode, Header: res.Header, Raw: string(raw)}
	json.Unmarshal(raw, &out.Body)
	return out
}

func (s *stack) signed(t *testing.T, body string) testkit.Reply {
	t.Helper()
	sig, stamp := sign(signingSecret, time.Now().Unix(), body)
	return s.post(t, body, sig, stamp)
}

func (s *stack) state(t *testing.T, id, token string) string {
	t.Helper()
	return s.call(t, "GET", "/v1/approval-requests/"+id, token, "").Str("state")
}

// onEachStore runs test on a SQLite file and on PostgreSQL, in parallel.
func onEachStore(t *testing.T, test func(*testing.T, store.Store)) {
	t.Helper()
	for _, db := range []struct {
		name string
		open func(*testing.T) store.Store
	}{{"sqlite", openSQLite}, {"postgres", openPostgres}} {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			test(t, db.open(t))
		})
	}
}

func openSQLite(t *testing.T) store.Store {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func openPostgres(t *testing.T) store.Store {
	st, err := postgres.Open(t.Context(), testkit.SchemaURL(t, testkit.CreateSchema(t, "t_slack_"), "pool_max_conns", "4"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSlackInteractions: every pending request is posted once with its
// facts and buttons; only a valid signature, fresh, from a linked user
// who did not make the request, decides; a replay or a click on a request
// decided elsewhere answers the outcome; every message ends showing the
// true outcome without buttons; no secret reaches the logs.
func TestSlackInteractions(t *testing.T) {
	t.Parallel()
	onEachStore(t, testInteractions)
}

func testInteractions(t *testing.T, st store.Store) {
	s := start(t, st)
	agent := s.token(t, "alice's agent", "agent", "alice")
	bob := s.token(t, "Bob", "reviewer", "bob")
	s.token(t, "Alice", "reviewer", "alice") // alice reviews too, but not her own agent's calls
	s.link(t, "bob", "U0BOB")
	s.link(t, "alice", "U0ALICE")

	inst := s.call(t, "POST", "/v1/instances", agent, `{"name":"laptop"}`).Str("id")
	long := strings.Repeat("x", 2000)
	create := func(key, tool, timeout string) string {
		t.Helper()
		body := fmt.Sprintf(`{"tool":%q,"arguments":{"cmd":"deploy <prod> & more","blob":%q},"timeout":%q,"agent_reasoning":"*trust me* <@U0BOB>"}`, tool, long, timeout)
		r := s.call(t, "POST", "/v1/instances/"+inst+"/approval-requests", agent, body, "Idempotency-Key", key)
		if r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Raw)
		}
		return r.Str("id")
	}
	r1, r2, r3 := create("k1", "deploy", "10m"), create("k2", "drop_table", "10m"), create("k3", "send_mail", "10m")
	s.slack.await(t, "three posts", func() bool { return len(s.slack.byRequest) == 3 })

	s.slack.mu.Lock()
	m := s.slack.message(r1)
	js := blocksJSON(m)
	s.slack.mu.Unlock()
	for _, want := range []string{
		`"action_id":"airlock_approve"`, `"action_id":"airlock_deny"`, `"value":"` + r1 + `"`, `"confirm":`,
		`"style":"primary"`, `"style":"danger"`, `rich_text_preformatted`, `Agent's claim (unverified): *trust me* \u003c@U0BOB\u003e`,
		`Arguments shortened`, `/requests/` + r1, `Decide by \u003c!date^`,
	} {
		if !strings.Contains(js, want) {
			t.Errorf("the posted message lacks %s:\n%s", want, js)
		}
	}
	if strings.Contains(js, long) {
		t.Error("the arguments were not shortened")
	}
	if !strings.Contains(m.text, "deploy") {
		t.Errorf("notification text = %q", m.text)
	}

	approve := interaction("U0BOB", slackapp.ActionApprove, r1, s.slack.srv.URL+"/hooks/response")
	now := time.Now().Unix()
	// Refused before anything is read: 401, and r1 stays pending.
	sig, stamp := sign(signingSecret, now, approve)
	for _, c := range []struct {
		name             string
		body, sig, stamp string
		status           int
	}{
		{"tampered body", strings.Replace(approve, "U0BOB", "U0BOC", 1), sig, stamp, 401},
		{"wrong secret", approve, func() string { s, _ := sign("not-the-secret", now, approve); return s }(), stamp, 401},
		{"stale, 6 minutes old", approve, func() string { s, _ := sign(signingSecret, now-360, approve); return s }(), strconv.FormatInt(now-360, 10), 401},
		{"from the future", approve, func() string { s, _ := sign(signingSecret, now+360, approve); return s }(), strconv.FormatInt(now+360, 10), 401},
		{"unsigned", approve, "", "", 401},
		{"timestamp changed", approve, sig, strconv.FormatInt(now-1, 10), 401},
		{"not v0", approve, strings.Replace(sig, "v0=", "v1=", 1), stamp, 401},
	} {
		if r := s.post(t, c.body, c.sig, c.stamp); r.Status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.Status, r.Raw, c.status)
		}
	}
	big := "payload=" + strings.Repeat("a", slackapp.MaxInteractionBytes)
	if r := s.signed(t, big); r.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized: %d %s", r.Status, r.Raw)
	}
	for _, bad := range []string{"payload=%7Bnot+json", "other=1", "payload=%ZZ"} {
		if r := s.signed(t, bad); r.Status != http.StatusBadRequest {
			t.Errorf("malformed %q: %d %s", bad, r.Status, r.Raw)
		}
	}
	// Verified, but not a decision.
	for _, c := range []struct{ name, body, want string }{
		{"unknown action", interaction("U0BOB", "airlock_launch", r1, ""), "does not know"},
		{"not a request", interaction("U0BOB", slackapp.ActionApprove, "tok_bootstrap", ""), "does not know"},
		{"unlinked user", interaction("U0EVE", slackapp.ActionApprove, r1, s.slack.srv.URL+"/hooks/response"), "not linked"},
		{"self-approval", interaction("U0ALICE", slackapp.ActionApprove, r1, ""), "your own"},
		{"unknown request", interaction("U0BOB", slackapp.ActionApprove, "apr_nope", ""), "no such request"},
	} {
		r := s.signed(t, c.body)
		if r.Status != http.StatusOK || !strings.Contains(r.Str("text"), c.want) {
			t.Errorf("%s: %d %s, want 200 saying %q", c.name, r.Status, r.Raw, c.want)
		}
	}
	if st := s.state(t, r1, bob); st != "pending" {
		t.Fatalf("after the refusals r1 is %s", st)
	}

	// The valid click decides, as bob; its replay answers the outcome.
	sig, stamp = sign(signingSecret, time.Now().Unix(), approve)
	if r := s.post(t, approve, sig, stamp); r.Status != http.StatusOK || !strings.HasPrefix(r.Str("text"), "Approved") {
		t.Fatalf("valid approve: %d %s", r.Status, r.Raw)
	}
	got := s.call(t, "GET", "/v1/approval-requests/"+r1, bob, "")
	if got.Str("state") != "approved" || got.Str("decision.decided_by_name") != "Bob" {
		t.Fatalf("r1 after the click: %s", got.Raw)
	}
	if r := s.post(t, approve, sig, stamp); r.Status != http.StatusOK || !strings.Contains(r.Str("text"), "already approved") {
		t.Errorf("replayed: %d %s", r.Status, r.Raw)
	}
	deny := interaction("U0BOB", slackapp.ActionDeny, r1, "")
	if r := s.signed(t, deny); !strings.Contains(r.Str("text"), "already approved") {
		t.Errorf("deny after approve: %s", r.Raw)
	}

	// r2 is denied in the API, then clicked in Slack: the click answers
	// the outcome. r3 is cancelled by its agent.
	if r := s.call(t, "POST", "/v1/approval-requests/"+r2+"/decision", bob, `{"status":"denied","note":"not today"}`); r.Status != http.StatusOK {
		t.Fatalf("deny r2: %d %s", r.Status, r.Raw)
	}
	if r := s.signed(t, interaction("U0BOB", slackapp.ActionApprove, r2, "")); !strings.Contains(r.Str("text"), "already denied") {
		t.Errorf("click on a denied request: %s", r.Raw)
	}
	if r := s.call(t, "POST", "/v1/approval-requests/"+r3+"/cancel", agent, ""); r.Status != http.StatusOK {
		t.Fatalf("cancel r3: %d %s", r.Status, r.Raw)
	}
	// r4 expires on its own.
	r4 := create("k4", "rotate_keys", "1s")

	outcome := map[string]string{r1: "Approved", r2: "Denied", r3: "Cancelled", r4: "Expired"}
	s.slack.await(t, "every message showing its outcome without buttons", func() bool {
		for id, word := range outcome {
			m := s.slack.message(id)
			if m == nil || hasButtons(m) || !strings.Contains(blocksJSON(m), "*"+word+"*") {
				return false
			}
		}
		return true
	})
	s.slack.mu.Lock()
	defer s.slack.mu.Unlock()
	if s.slack.posts != 4 {
		t.Errorf("%d messages posted for 4 requests", s.slack.posts)
	}
	if js := blocksJSON(s.slack.message(r1)); !strings.Contains(js, "by Bob") {
		t.Errorf("r1's message does not say who approved: %s", js)
	}
	if js := blocksJSON(s.slack.message(r2)); !strings.Contains(js, "not today") {
		t.Errorf("r2's message lacks the note: %s", js)
	}
}
