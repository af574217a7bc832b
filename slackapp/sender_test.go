package slackapp_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/slacktest"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/notify"
	"github.com/airlockhq/airlock/rest"
	"github.com/airlockhq/airlock/slackapp"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/airlockhq/airlock/store/sqlite"
)

// TestSlackRetries: Slack failing (HTTP 500, then 429 with Retry-After)
// is retried by the delivery engine like a webhook; the outcome of a
// request decided before its post went through waits for the post; the
// message is posted once and ends showing the outcome without buttons;
// each failed attempt is recorded with why; a request a policy rule
// decided at creation is not posted.
func TestSlackRetries(t *testing.T) {
	t.Parallel()
	onEachStore(t, testRetries)
}

func testRetries(t *testing.T, st store.Store) {
	t.Cleanup(func() { st.Close() })
	ctx := t.Context()
	f := slacktest.New(t)
	f.Fail = func(method string, n int, w http.ResponseWriter) bool {
		if method != "chat.postMessage" {
			return false
		}
		switch n {
		case 1:
			http.Error(w, "<html>oops</html>", http.StatusInternalServerError)
			return true
		case 2:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return true
		}
		return false
	}
	ep, err := slackapp.EnsureEndpoint(ctx, st, slacktest.Channel)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := slackapp.EnsureEndpoint(ctx, st, slacktest.Channel); err != nil || again.ID != ep.ID || ep.ID != airlock.SlackEndpointID {
		t.Fatalf("EnsureEndpoint again = %v, %v", again, err)
	}
	sender := slackapp.NewSender(slackapp.Config{AllowPrivate: true, BotToken: slacktest.BotToken, Channel: slacktest.Channel, APIURL: f.APIURL(),
		PublicURL: "https://airlock.example.com", Store: st})
	eng := notify.New(notify.Config{Store: st, Senders: map[airlock.EndpointKind]notify.Sender{airlock.EndpointSlack: sender},
		Render: rest.RequestJSON, PollEvery: 20 * time.Millisecond, Schedule: []time.Duration{10 * time.Millisecond, 10 * time.Millisecond,
			10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond},
		Jitter: func(d time.Duration) time.Duration { return d }})

	inst, err := st.CreateInstance(ctx, airlock.Instance{ID: airlock.NewID(airlock.PrefixInstance), OwnerID: "tok_agent", Name: "ci"}, "tok_agent")
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := st.CreateRequest(ctx, store.NewRequestParams{Request: airlock.Request{ID: airlock.NewID(airlock.PrefixRequest),
		InstanceID: inst.ID, OwnerID: "tok_agent", Tool: "deploy", Arguments: []byte(`{"env":"prod"}`)}, Window: time.Hour, Actor: "tok_agent"})
	if err != nil {
		t.Fatal(err)
	}
	// Decided before the engine runs: the post and the outcome are both
	// queued, and the outcome must wait for the post.
	if _, err := st.Decide(ctx, store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Validity: time.Minute, Actor: "tok_bob"}); err != nil {
		t.Fatal(err)
	}
	// Decided by a policy rule at creation: no person needs to see it.
	if _, _, err := st.CreateRequest(ctx, store.NewRequestParams{Request: airlock.Request{ID: airlock.NewID(airlock.PrefixRequest),
		InstanceID: inst.ID, OwnerID: "tok_agent", Tool: "ls", Arguments: []byte(`{}`)}, Window: time.Hour, Actor: "tok_agent",
		Initial: &airlock.InitialDecision{Status: airlock.StateApproved, Validity: time.Minute, DecidedBy: airlock.PolicyActor("reads")}}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); eng.Run(runCtx) }()
	defer func() { stop(); <-done }()

	f.Await(t, "the message showing the approval", func() bool {
		m := f.Message(r.ID)
		return m != nil && !m.HasButtons() && strings.Contains(m.BlocksJSON(), "*Approved*")
	})
	// All four deliveries (two per request) end delivered, with the
	// failures recorded.
	var ds []airlock.Delivery
	deadline := time.Now().Add(20 * time.Second)
	for {
		ds, _, err = st.ListDeliveries(ctx, airlock.SlackEndpointID, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		delivered := 0
		for _, d := range ds {
			if d.State == airlock.DeliveryDelivered {
				delivered++
			}
		}
		if len(ds) == 4 && delivered == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries = %+v", ds)
		}
		select { // the engine records attempts after the calls: look again soon
		case <-f.Changed():
		case <-time.After(20 * time.Millisecond):
		}
	}
	var errs []string
	for _, d := range ds {
		for _, a := range d.Attempts {
			errs = append(errs, a.Error)
		}
	}
	all := strings.Join(errs, "\n")
	for _, want := range []string{"slack answered HTTP 500", "rate-limited", "not posted yet"} {
		if !strings.Contains(all, want) {
			t.Errorf("the attempts' errors lack %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, slacktest.BotToken) {
		t.Error("an attempt's error shows the bot token")
	}
	if n := f.Posts(); n != 1 {
		t.Errorf("%d posts, want 1", n)
	}
}

// TestSlackReminder: with reminders on, a pending request's message gets
// one reply, also sent to the channel, naming the deadline and the way to
// decide; a request decided before its reminder goes out gets none.
func TestSlackReminder(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	t.Cleanup(func() { st.Close() })
	ctx := t.Context()
	f := slacktest.New(t)
	if _, err := slackapp.EnsureEndpoint(ctx, st, slacktest.Channel); err != nil {
		t.Fatal(err)
	}
	sender := slackapp.NewSender(slackapp.Config{AllowPrivate: true, BotToken: slacktest.BotToken, Channel: slacktest.Channel, APIURL: f.APIURL(),
		PublicURL: "https://airlock.example.com", Store: st})
	inst, err := st.CreateInstance(ctx, airlock.Instance{ID: airlock.NewID(airlock.PrefixInstance), OwnerID: "tok_agent", Name: "ci"}, "tok_agent")
	if err != nil {
		t.Fatal(err)
	}
	create := func(tool string) airlock.Request {
		r, _, err := st.CreateRequest(ctx, store.NewRequestParams{Request: airlock.Request{ID: airlock.NewID(airlock.PrefixRequest),
			InstanceID: inst.ID, OwnerID: "tok_agent", Tool: tool, Arguments: []byte(`{}`)}, Window: 30 * time.Minute, Actor: "tok_agent"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	waiting := create("deploy")
	decided := create("rollback")
	if _, err := st.Decide(ctx, store.DecideParams{ID: decided.ID, Status: airlock.StateDenied, Actor: "tok_bob"}); err != nil {
		t.Fatal(err)
	}
	// Reminders an hour before the deadline: due at once for both.
	eng := notify.New(notify.Config{Store: st, Senders: map[airlock.EndpointKind]notify.Sender{airlock.EndpointSlack: sender},
		Render: rest.RequestJSON, PollEvery: 20 * time.Millisecond, Remind: airlock.RemindBefore{Before: time.Hour},
		RemindEvery: 10 * time.Millisecond, Schedule: []time.Duration{10 * time.Millisecond}, Jitter: func(d time.Duration) time.Duration { return d }})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); eng.Run(runCtx) }()
	defer func() { stop(); <-done }()

	f.Await(t, "the reminder reply", func() bool { m := f.Message(waiting.ID); return m != nil && len(m.Replies) > 0 })
	// Every delivery recorded, so nothing more is coming.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ds, _, err := st.ListDeliveries(ctx, airlock.SlackEndpointID, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		pending := 0
		for _, d := range ds {
			if d.State == airlock.DeliveryPending {
				pending++
			}
		}
		if pending == 0 && len(ds) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries still pending: %+v", ds)
		}
		select { // a call to the fake, or the engine recording on its own
		case <-f.Changed():
		case <-time.After(20 * time.Millisecond):
		}
	}
	m := f.Message(waiting.ID)
	if len(m.Replies) != 1 || !m.Broadcast[0] {
		t.Fatalf("%d replies (broadcast %v); want one, sent to the channel too", len(m.Replies), m.Broadcast)
	}
	reply, _ := m.Replies[0].Blocks[0]["text"].(map[string]any)["text"].(string)
	for _, want := range []string{"still waits for a decision", fmt.Sprintf("<!date^%d^", waiting.DeadlineAt.Unix()),
		"https://airlock.example.com/requests/" + waiting.ID} {
		if !strings.Contains(reply, want) {
			t.Errorf("the reminder lacks %q: %s", want, reply)
		}
	}
	if d := f.Message(decided.ID); d == nil || len(d.Replies) != 0 {
		t.Fatalf("the decided request's message: %+v; want posted, no reminder", d)
	}
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
