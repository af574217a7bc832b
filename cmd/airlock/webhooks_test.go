package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/internal/webhooktest"
	"github.com/airlockhq/airlock/store/sqlite"
	"github.com/airlockhq/airlock/store/storetest"
)

// receivers starts one receiver of each behavior, closed when t ends.
func receivers(t *testing.T) []*webhooktest.Receiver {
	t.Helper()
	var rcs []*webhooktest.Receiver
	for name, b := range map[string]webhooktest.Behavior{
		"ok": webhooktest.OK, "fail500": webhooktest.Fail500First, "drop": webhooktest.DropFirst,
		"slow": webhooktest.Slow, "hang": webhooktest.Hang,
	} {
		rc := webhooktest.NewReceiver(name, b)
		t.Cleanup(rc.Close)
		rcs = append(rcs, rc)
	}
	slices.SortFunc(rcs, func(a, b *webhooktest.Receiver) int { return strings.Compare(a.Name, b.Name) })
	return rcs
}

// TestWebhooksKillRestart is T24 on SQLite: webhooks to receivers that
// answer, fail once with 500, drop the connection once, answer slowly and
// hang, while the server takes lifecycles and is killed with SIGKILL
// mid-delivery and restarted. Every committed event reaches every
// receiver that answers, at least once, verified; a webhook-id always
// carries the same body; nothing arrives that the log does not hold (a
// decision refused and rolled back sends nothing); the hung receiver
// delays no other.
func TestWebhooksKillRestart(t *testing.T) {
	testkit.Long(t)
	t.Parallel()
	const restarts, perCycle = 5, 40
	dir := t.TempDir()
	db := filepath.Join(dir, "airlock.db")
	args := []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--admin-token", testAdmin,
		"--rate-limit", "1000000", "--log-level", "error", "--outbound-allow-private", "--webhook-timeout", "3s"}
	srv := startProcess(t, dir, nil, args...)
	c := newAPI(t, srv.URL)
	agent := c.mintToken(testAdmin, "agent", "agent")
	reviewer := c.mintToken(testAdmin, "reviewer", "reviewer")
	// A reviewer holding the agent's principal: its decisions are refused
	// and rolled back (self-approval).
	agentID := c.call("GET", "/v1/tokens", testAdmin, "").want(t, 200, "tokens")
	var agentTokID string
	for _, it := range agentID.Body["items"].([]any) {
		if m := it.(map[string]any); m["name"] == "agent" {
			agentTokID = m["id"].(string)
		}
	}
	self := c.call("POST", "/v1/tokens", testAdmin, fmt.Sprintf(`{"name":"self","role":"reviewer","principal":%q}`, agentTokID)).
		want(t, 201, "mint self reviewer").Str("secret")
	rcs := receivers(t)
	for _, rc := range rcs {
		r := c.call("POST", "/v1/webhooks", testAdmin, fmt.Sprintf(`{"url":%q}`, rc.URL())).want(t, 201, "create webhook "+rc.Name)
		rc.SetSecret(r.Str("secret"))
	}
	inst := c.call("POST", "/v1/instances", agent, `{"name":"load"}`).want(t, 201, "instance").Str("id")

	var (
		mu         sync.Mutex
		rolledBack []string
		created    atomic.Int64
	)
	for cycle := 0; cycle <= restarts; cycle++ {
		if cycle > 0 {
			srv = startProcess(t, dir, nil, args...)
			c.url = srv.URL
		}
		if cycle == restarts {
			break
		}
		burst := testkit.StartBurst(4, int64(perCycle), uint64(cycle), func(_ *rand.Rand, w, n int) bool {
			r, err := c.try("POST", "/v1/instances/"+inst+"/approval-requests", agent,
				fmt.Sprintf(`{"tool":"load","arguments":{"n":%d},"timeout":"1h"}`, n), "Idempotency-Key", fmt.Sprintf("c%d-w%d-%d", cycle, w, n))
			if err != nil || r.Status != 201 {
				return false
			}
			created.Add(1)
			id := r.Str("id")
			if n%5 == 0 {
				// Refused: rolled back, stays pending.
				if r, err := c.try("POST", "/v1/approval-requests/"+id+"/decision", self, `{"status":"approved"}`); err == nil && r.Status == 403 {
					mu.Lock()
					rolledBack = append(rolledBack, id)
					mu.Unlock()
				}
			} else {
				status := []string{"approved", "denied"}[n%2]
				c.try("POST", "/v1/approval-requests/"+id+"/decision", reviewer, `{"status":"`+status+`"}`)
			}
			return true
		})
		srv.AwaitLoad(t, burst.Enough, fmt.Sprintf("%d lifecycles", perCycle))
		srv.Kill() // mid-load, and mid-delivery to the slow and hung receivers
		burst.Stop()
		c.hc.CloseIdleConnections()
	}

	// What was committed, read from the file itself.
	st, err := sqlite.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	evs := storetest.AllEvents(t, st)
	st.Close()
	want := webhooktest.ExpectedFrom(evs, 0)
	loaded := time.Now()
	webhooktest.CheckAll(t, rcs, want, 2*time.Minute, nil)
	t.Logf("the receivers had everything %s after the last restart", time.Since(loaded).Round(time.Millisecond))
	webhooktest.CheckRolledBack(t, rcs, rolledBack)
	t.Logf("%d kill -9 restarts, %d requests, %d committed webhook events, %d decisions rolled back", restarts, created.Load(), len(want), len(rolledBack))
}

// TestCLIWebhooks: airlock webhooks create, list, show, deliveries, test
// and delete against a real server delivering to a real receiver; a
// private URL is refused without --outbound-allow-private.
func TestCLIWebhooks(t *testing.T) {
	t.Parallel()
	srv, c := serveNew(t, "--outbound-allow-private")
	s := &cliServer{running: srv, api: c, admin: testAdmin}
	s.agent = c.mintToken(testAdmin, "cli agent", "agent")
	s.instance = c.call("POST", "/v1/instances", s.agent, `{"name":"laptop"}`).want(t, 201, "register").Str("id")
	rc := webhooktest.NewReceiver("cli", webhooktest.OK)
	defer rc.Close()

	out := s.cli(t, testAdmin, "webhooks", "create", rc.URL(), "--event", "approval_request.created,approval_request.approved",
		"--description", "ops channel").want(t, 0, "create").stdout
	m := regexp.MustCompile(`Created webhook (whk_\S+) .*\n.*\n(whsec_\S+)\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("create printed:\n%s", out)
	}
	id, secret := m[1], m[2]
	rc.SetSecret(secret)
	if out := s.cli(t, testAdmin, "webhooks", "list").want(t, 0, "list").stdout; !strings.Contains(out, id) || strings.Contains(out, secret) ||
		!strings.Contains(out, "enabled") {
		t.Fatalf("list printed:\n%s", out)
	}
	if out := s.cli(t, testAdmin, "webhooks", "show", id, "--json").want(t, 0, "show").stdout; strings.Contains(out, "whsec_") ||
		!strings.Contains(out, `"approval_request.approved"`) {
		t.Fatalf("show printed:\n%s", out)
	}
	req := s.create(t, `{"tool":"deploy","arguments":{}}`)
	// The server delivers on its own time.
	testkit.Eventually(t, time.Minute, "the created event's delivery", func() bool { return rc.Received() > 0 })
	s.cli(t, testAdmin, "webhooks", "test", id).want(t, 0, "test")
	testkit.Eventually(t, time.Minute, "the test event's delivery", func() bool { return rc.Received() >= 2 })
	if rep := rc.Check(nil); len(rep.Bad) != 0 {
		t.Fatalf("unverified webhooks: %v", rep.Bad)
	}
	if got := rc.TypesOf(req); !slices.Equal(got, []string{"approval_request.created"}) {
		t.Fatalf("the receiver got %v for %s", got, req)
	}
	// The receiver answered before the server recorded its answer.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		out = s.cli(t, testAdmin, "webhooks", "deliveries", id).want(t, 0, "deliveries").stdout
		if strings.Count(out, "delivered") == 2 || time.Now().After(deadline) {
			break
		}
	}
	if strings.Count(out, "delivered") != 2 || !strings.Contains(out, "webhook.test") || !strings.Contains(out, "approval_request.created") {
		t.Fatalf("deliveries printed:\n%s", out)
	}
	// Enabling an enabled endpoint changes nothing (the store's and the
	// API's tests disable one first).
	if out := s.cli(t, testAdmin, "webhooks", "enable", id).want(t, 0, "enable").stdout; !strings.Contains(out, "Enabled webhook "+id) {
		t.Fatalf("enable printed %q", out)
	}
	s.cli(t, s.agent, "webhooks", "enable", id).want(t, 5, "an agent enables a webhook")
	s.cli(t, testAdmin, "webhooks", "enable", "whk_missing").want(t, 3, "enable an unknown webhook")
	s.cli(t, s.agent, "webhooks", "list").want(t, 5, "an agent lists webhooks")
	s.cli(t, testAdmin, "webhooks", "create", "ftp://x.test/").want(t, 1, "a bad URL")
	s.cli(t, testAdmin, "webhooks", "delete", id).want(t, 0, "delete")
	s.cli(t, testAdmin, "webhooks", "show", id).want(t, 3, "show a deleted webhook")

	// Without --outbound-allow-private, loopback URLs are refused.
	_, strict := serveNew(t)
	r := strict.call("POST", "/v1/webhooks", testAdmin, fmt.Sprintf(`{"url":%q}`, rc.URL()))
	if r.Status != 400 || !strings.Contains(r.Raw, "--outbound-allow-private") {
		t.Fatalf("a loopback URL without --outbound-allow-private: %d %s", r.Status, r.Raw)
	}
}

// TestWebhookURLSpellings: every spelling of a non-public address that
// some resolver reads as one is refused at creation through the REST API
// of a server without --outbound-allow-private, with a 400 that says why;
// and nothing is stored.
func TestWebhookURLSpellings(t *testing.T) {
	t.Parallel()
	_, c := serveNew(t)
	for _, tc := range []struct{ host, says string }{
		{"2130706433", "the IPv4 address 127.0.0.1 spelled in a form resolvers disagree on"},
		{"0x7f000001", "the IPv4 address 127.0.0.1 spelled"},
		{"0177.0.0.1", "the IPv4 address 127.0.0.1 spelled"},
		{"017700000001", "the IPv4 address 127.0.0.1 spelled"},
		{"127.1", "the IPv4 address 127.0.0.1 spelled"},
		{"0", "the IPv4 address 0.0.0.0 spelled"},
		{"0xa9fea9fe", "the IPv4 address 169.254.169.254 spelled"},
		{"0x7f.1", "the IPv4 address 127.0.0.1 spelled"},
		{"127.0.0.1.", "non-public address"},
		{"LOCALHOST", "loopback name"},
		{"localhost.", "loopback name"},
		{"Api.LocalHost.", "loopback name"},
		{"[::127.0.0.1]", "non-public address"},
		{"[::ffff:0:127.0.0.1]", "non-public address"},
		{"[::ffff:127.0.0.1]", "non-public address"},
		{"08.0.0.1", "ends in a number but is not an IPv4 address"},
		{"1.2.3.4.5", "ends in a number but is not an IPv4 address"},
	} {
		r := c.call("POST", "/v1/webhooks", testAdmin, fmt.Sprintf(`{"url":"http://%s:8080/hook"}`, tc.host))
		if r.Status != 400 || r.Str("code") != "invalid_request" || !strings.Contains(r.Raw, tc.says) {
			t.Errorf("webhook to %s: %d %s; want 400 saying %q", tc.host, r.Status, r.Raw, tc.says)
		}
	}
	if r := c.call("GET", "/v1/webhooks", testAdmin, ""); r.Status != 200 || strings.Contains(r.Raw, "whk_") {
		t.Fatalf("refused webhooks were stored: %d %s", r.Status, r.Raw)
	}
	// A public address in dotted decimal, and a name, are accepted.
	for _, u := range []string{"http://8.8.8.8/hook", "https://hooks.example.com./x"} {
		if r := c.call("POST", "/v1/webhooks", testAdmin, fmt.Sprintf(`{"url":%q}`, u)); r.Status != 201 {
			t.Errorf("webhook to %s: %d %s; want 201", u, r.Status, r.Raw)
		}
	}
}

// TestAllowPrivateOldName: --webhook-allow-private and its environment
// twin still lift the rules, with one warning line naming the new flag.
func TestAllowPrivateOldName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  map[string]string
	}{
		{args: []string{"--webhook-allow-private"}},
		{env: map[string]string{"AIRLOCK_WEBHOOK_ALLOW_PRIVATE": "true"}},
	} {
		var stderr bytes.Buffer
		a := &App{Stderr: &stderr, LookupEnv: mapEnv(tc.env)}
		cfg, err := a.serveConfig(tc.args)
		if err != nil || !cfg.OutboundAllowPrivate {
			t.Fatalf("%v %v: %+v, %v", tc.args, tc.env, cfg, err)
		}
		if n := strings.Count(stderr.String(), "\n"); n != 1 || !strings.Contains(stderr.String(), "is deprecated; use --outbound-allow-private") {
			t.Errorf("%v %v: warned %q, want one line", tc.args, tc.env, stderr.String())
		}
	}
	var stderr bytes.Buffer
	a := &App{Stderr: &stderr, LookupEnv: mapEnv(nil)}
	if cfg, err := a.serveConfig([]string{"--outbound-allow-private"}); err != nil || !cfg.OutboundAllowPrivate || stderr.Len() > 0 {
		t.Fatalf("--outbound-allow-private: %+v, %v, %q", cfg, err, stderr.String())
	}
}

// TestNotifyFlags: --remind-before, --webhook-timeout, and the SMTP and
// Slack hosts under the outbound rules are checked at start, naming the
// flag.
func TestNotifyFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  Config
		want string // "" when valid
	}{
		{Config{RemindBefore: "25%"}, ""},
		{Config{RemindBefore: "10m", WebhookTimeout: time.Second, OutboundAllowPrivate: true}, ""},
		{Config{SMTPURL: "smtp://u:p@localhost.:587"}, "--smtp-url: \"localhost.\" is a loopback name"},
		{Config{SMTPURL: "smtp://u:p@0x7f000001:587"}, "--smtp-url: \"0x7f000001\" is the IPv4 address 127.0.0.1"},
		{Config{SMTPURL: "smtp://u:p@10.0.0.5:587"}, "--smtp-url: \"10.0.0.5\" is a loopback, private"},
		{Config{SMTPURL: "smtp://u:p@10.0.0.5:587", OutboundAllowPrivate: true}, ""},
		{Config{SMTPURL: "smtp://u:p@smtp.example.com:587"}, ""},
		{Config{SlackBotToken: "xoxb-1", SlackChannel: "C1", SlackAPIURL: "http://127.1:9/api/"}, "--slack-api-url: \"127.1\" is the IPv4 address 127.0.0.1"},
		{Config{SlackBotToken: "xoxb-1", SlackChannel: "C1", SlackAPIURL: "http://[::1]:9/api/"}, "--slack-api-url: \"::1\" is a loopback, private"},
		{Config{SlackBotToken: "xoxb-1", SlackChannel: "C1", SlackAPIURL: "http://127.0.0.1:9/api/", OutboundAllowPrivate: true}, ""},
		{Config{SlackBotToken: "xoxb-1", SlackChannel: "C1"}, ""},
		{Config{RemindBefore: "150%"}, "--remind-before"},
		{Config{RemindBefore: "soon"}, "--remind-before"},
		{Config{WebhookTimeout: 2 * time.Minute}, "--webhook-timeout"},
	} {
		err := c.cfg.WithDefaults().Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	if got := (Config{RemindBefore: "25%"}).Remind(); got != (airlock.RemindBefore{Fraction: 0.25}) {
		t.Errorf("Remind = %+v", got)
	}
}

// TestWebhookIDsAfterRestore is the backup-and-restore test of
// webhook-id. The SQLite file is copied while the server is stopped,
// more requests are made and delivered, and the copy is put back: the
// restored database hands out again the event IDs (sequence numbers) of
// the events delivered after the backup. The new events' webhook-ids
// differ from every webhook-id delivered before the restore, so a
// receiver that drops repeated ids keeps them. A delivery retried after a
// 500 keeps its one webhook-id (the receiver answers 500 to the first
// attempt of each id, so a new id would never be accepted).
func TestWebhookIDsAfterRestore(t *testing.T) {
	t.Parallel()
	dir, backup := t.TempDir(), t.TempDir()
	db := filepath.Join(dir, "airlock.db")
	ok := webhooktest.NewReceiver("ok", webhooktest.OK)
	defer ok.Close()
	flaky := webhooktest.NewReceiver("flaky", webhooktest.Fail500First)
	defer flaky.Close()
	serve := func() (*running, *api) {
		srv := startApp(t, nil, "--addr", "127.0.0.1:0", "--db", db, "--admin-token", testAdmin, "--outbound-allow-private", "--log-level", "error")
		return srv, newAPI(t, srv.url)
	}
	// copyDB copies the database's files from one folder to another, as
	// a backup of a stopped server does, and as its restore does.
	copyDB := func(from, to string) {
		t.Helper()
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(filepath.Join(to, "airlock.db"+suffix))
			b, err := os.ReadFile(filepath.Join(from, "airlock.db"+suffix))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(to, "airlock.db"+suffix), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	type delivery struct {
		MessageID string            `json:"message_id"`
		EventID   int64             `json:"event_id"`
		RequestID string            `json:"request_id"`
		Attempts  []json.RawMessage `json:"attempts"`
	}
	// sent reads an endpoint's deliveries, newest first.
	sent := func(c *api, endpoint string) []delivery {
		t.Helper()
		var page struct{ Items []delivery }
		r := c.call("GET", "/v1/webhooks/"+endpoint+"/deliveries?limit=100", testAdmin, "").want(t, 200, "deliveries")
		if err := json.Unmarshal([]byte(r.Raw), &page); err != nil {
			t.Fatal(err)
		}
		return page.Items
	}
	webhook := func(c *api, rc *webhooktest.Receiver) string {
		t.Helper()
		r := c.call("POST", "/v1/webhooks", testAdmin, fmt.Sprintf(`{"url":%q,"events":["approval_request.created"]}`, rc.URL())).want(t, 201, "create webhook")
		rc.SetSecret(r.Str("secret"))
		return r.Str("id")
	}
	var agent, instance string
	create := func(c *api, key string) string {
		t.Helper()
		return c.call("POST", "/v1/instances/"+instance+"/approval-requests", agent, `{"tool":"deploy","arguments":{}}`,
			"Idempotency-Key", key).want(t, 201, "create").Str("id")
	}
	accepted := func(rc *webhooktest.Receiver, ids ...string) func() bool {
		return func() bool {
			got := rc.IDsByRequest()
			for _, id := range ids {
				if len(got[id]) == 0 {
					return false
				}
			}
			return true
		}
	}

	// Before the backup: one request, delivered to both receivers.
	srv, c := serve()
	okID, flakyID := webhook(c, ok), webhook(c, flaky)
	agent = c.mintToken(testAdmin, "agent", "agent")
	instance = c.call("POST", "/v1/instances", agent, `{"name":"restore"}`).want(t, 201, "register").Str("id")
	a := create(c, "a")
	testkit.Eventually(t, time.Minute, "the first request's webhooks", func() bool { return accepted(ok, a)() && accepted(flaky, a)() })
	// The retried delivery kept its webhook-id. The receiver answers
	// before the server records the answer.
	testkit.Eventually(t, time.Minute, "the retried delivery's second attempt", func() bool {
		ds := sent(c, flakyID)
		return len(ds) == 1 && len(ds[0].Attempts) == 2
	})
	if ds := sent(c, flakyID); len(ds) != 1 || len(ds[0].Attempts) != 2 || flaky.IDsByRequest()[a][0] != ds[0].MessageID ||
		flaky.AttemptsOf(ds[0].MessageID) != 2 {
		t.Fatalf("the retried delivery: %+v; the receiver accepted %v", ds, flaky.IDsByRequest()[a])
	}
	c.call("DELETE", "/v1/webhooks/"+flakyID, testAdmin, "").want(t, 204, "delete the flaky webhook")
	srv.stop(t)
	copyDB(dir, backup)

	// After the backup: two more, delivered, then lost with the restore.
	srv, c = serve()
	lost := []string{create(c, "b1"), create(c, "b2")}
	testkit.Eventually(t, time.Minute, "the lost requests' webhooks", accepted(ok, lost...))
	before := sent(c, okID)
	srv.stop(t)
	delivered := map[string]bool{} // every webhook-id the receiver accepted before the restore
	for _, ids := range ok.IDsByRequest() {
		for _, id := range ids {
			delivered[id] = true
		}
	}

	// The restore, and two new requests.
	copyDB(backup, dir)
	_, c = serve()
	fresh := []string{create(c, "c1"), create(c, "c2")}
	testkit.Eventually(t, time.Minute, "the new requests' webhooks", accepted(ok, fresh...))
	after := sent(c, okID)

	// The restore handed the lost events' sequence numbers out again...
	reused := 0
	for _, d := range after {
		for _, l := range before {
			if d.EventID == l.EventID && d.RequestID != l.RequestID {
				reused++
			}
		}
	}
	if reused != len(fresh) {
		t.Fatalf("%d new events reuse the event IDs of lost ones, want %d: before %+v, after %+v", reused, len(fresh), before, after)
	}
	// ...and their webhook-ids are new all the same.
	for _, r := range fresh {
		for _, id := range ok.IDsByRequest()[r] {
			if delivered[id] {
				t.Errorf("request %s after the restore came with webhook-id %s, delivered before it", r, id)
			}
		}
	}
}
