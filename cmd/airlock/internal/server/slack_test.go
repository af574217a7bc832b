package server_test

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
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/cmd/airlock/internal/server"
	"github.com/airlockhq/airlock/internal/slacktest"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/slackapp"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/airlockhq/airlock/store/sqlite"
)

// signingSecret signs the fake Slack's interactions; adminSecret is the
// server's admin token.
const (
	signingSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	adminSecret   = "admin-secret-for-slack-tests"
)

// stack is a server with Slack on, posting to a fake Slack.
type stack struct {
	base  string
	slack *slacktest.Slack
	logs  *testkit.Buffer
	hc    *http.Client
}

// start runs a server over st with Slack on, posting to a fake Slack,
// until t ends; then no secret may be in its logs.
func start(t *testing.T, st store.Store, opts ...func(*server.Config)) *stack {
	t.Helper()
	f := slacktest.New(t)
	logs := &testkit.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	cfg := server.Config{
		Store: st, Addr: "127.0.0.1:0", AdminToken: adminSecret, Limits: airlock.DefaultLimits(),
		Slack:                slackapp.Config{BotToken: slacktest.BotToken, Channel: slacktest.Channel, APIURL: f.APIURL()},
		OutboundAllowPrivate: true, // the fake Slack listens on loopback
		SlackSigningSecret:   signingSecret,
		Logger:               slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
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
		for _, secret := range []string{slacktest.BotToken, signingSecret} {
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
		"container":    map[string]any{"type": "message", "message_ts": "1700000000.000001", "channel_id": slacktest.Channel, "is_ephemeral": false},
		"channel":      map[string]any{"id": slacktest.Channel, "name": "approvals"},
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
	s.slack.Await(t, "three posts", func() bool { return s.slack.Requests() == 3 })

	m := s.slack.Message(r1)
	js := m.BlocksJSON()
	for _, want := range []string{
		`"action_id":"airlock_approve"`, `"action_id":"airlock_deny"`, `"value":"` + r1 + `"`, `"confirm":`,
		`"style":"primary"`, `"style":"danger"`, `rich_text_preformatted`, `The agent's claim (unverified): *trust me* \u003c@U0BOB\u003e`,
		`Arguments shortened`, `/requests/` + r1, `Decide by \u003c!date^`,
	} {
		if !strings.Contains(js, want) {
			t.Errorf("the posted message lacks %s:\n%s", want, js)
		}
	}
	if strings.Contains(js, long) {
		t.Error("the arguments were not shortened")
	}
	if !strings.Contains(m.Text, "deploy") {
		t.Errorf("notification text = %q", m.Text)
	}

	approve := interaction("U0BOB", slackapp.ActionApprove, r1, s.slack.ResponseURL())
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
		{"unlinked user", interaction("U0EVE", slackapp.ActionApprove, r1, s.slack.ResponseURL()), "not linked"},
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
	s.slack.Await(t, "every message showing its outcome without buttons", func() bool {
		for id, word := range outcome {
			m := s.slack.Message(id)
			if m == nil || m.HasButtons() || !strings.Contains(m.BlocksJSON(), "*"+word+"*") {
				return false
			}
		}
		return true
	})
	if n := s.slack.Posts(); n != 4 {
		t.Errorf("%d messages posted for 4 requests", n)
	}
	if js := s.slack.Message(r1).BlocksJSON(); !strings.Contains(js, "by Bob") {
		t.Errorf("r1's message does not say who approved: %s", js)
	}
	if js := s.slack.Message(r2).BlocksJSON(); !strings.Contains(js, "not today") {
		t.Errorf("r2's message lacks the note: %s", js)
	}
}
