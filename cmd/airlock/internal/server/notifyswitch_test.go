package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/logtest"
	"github.com/airlockhq/airlock/internal/testkit"
)

// TestEngineSwitch: the loop runs from open; off waits until it has
// returned; on starts it again, once however often it is asked; after
// close nothing can start it.
func TestEngineSwitch(t *testing.T) {
	t.Parallel()
	var e engineSwitch
	if err := e.set(true); err == nil {
		t.Fatal("set before open: no error")
	}
	starts, running := make(chan struct{}, 10), make(chan bool, 20)
	run := func(ctx context.Context) {
		starts <- struct{}{}
		running <- true
		<-ctx.Done()
		running <- false
	}
	e.open(context.Background(), run)
	<-starts
	<-running
	if err := e.set(false); err != nil {
		t.Fatal(err)
	}
	if r := <-running; r { // set(false) returned: the loop has returned
		t.Fatal("after set(false), the loop still runs")
	}
	for range 3 {
		if err := e.set(true); err != nil {
			t.Fatal(err)
		}
	}
	<-starts
	<-running
	e.close()
	if r := <-running; r {
		t.Fatal("after close, the loop still runs")
	}
	if err := e.set(true); err == nil {
		t.Fatal("set after close: no error")
	}
	if n := len(starts); n != 0 {
		t.Fatalf("%d more starts; want two in all", n)
	}
}

// TestSetNotifications: with the delivery engine stopped, a request
// created meanwhile waits in the log; started again, it is pushed to the
// subscriber. Once Run has returned, the engine cannot be started.
func TestSetNotifications(t *testing.T) {
	t.Parallel()
	var log logtest.Recorder
	var admin string
	srv, err := New(t.Context(), Config{
		Store: openSQLite(t, filepath.Join(t.TempDir(), "airlock.db")), Addr: "127.0.0.1:0", Logger: log.Logger(),
		ShowAdminToken: func(s string) error { admin = s; return nil }, OutboundAllowPrivate: true, WebhookTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	base := "http://" + srv.Addr()
	call := func(method, path, token, body string, want int, header ...string) testkit.Reply {
		t.Helper()
		r, err := testkit.Call(t.Context(), http.DefaultClient, method, base+path, token, body, header...)
		if err != nil || r.Status != want {
			t.Fatalf("%s %s: %d %v %s; want %d", method, path, r.Status, err, r.Raw, want)
		}
		return r
	}
	mint := func(name, role, principal string) string {
		return call("POST", "/v1/tokens", admin, fmt.Sprintf(`{"name":%q,"role":%q,"principal":%q}`, name, role, principal), 201).Str("secret")
	}
	agent, reviewer := mint("agent", "agent", "ann"), mint("reviewer", "reviewer", "rev")
	push := newPushReceiver(t)
	body, _ := json.Marshal(push.subscribe("/ok"))
	call("POST", "/v1/push/subscriptions", reviewer, string(body), 201)
	inst := call("POST", "/v1/instances", agent, `{"name":"switch"}`, 201).Str("id")

	if err := srv.SetNotifications(false); err != nil {
		t.Fatal(err)
	}
	before, err := srv.store.DeliveryBacklog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	id := call("POST", "/v1/instances/"+inst+"/approval-requests", agent, `{"tool":"send_money","arguments":{},"timeout":"1m"}`, 201,
		"Idempotency-Key", "k1").Str("id")
	// The engine has returned (SetNotifications waits for it): the
	// create's event is still after the fan-out cursor.
	after, err := srv.store.DeliveryBacklog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if after.Unqueued <= before.Unqueued {
		t.Fatalf("with the engine stopped, events after the cursor went from %d to %d; want the create's waiting", before.Unqueued, after.Unqueued)
	}
	if err := srv.SetNotifications(true); err != nil {
		t.Fatal(err)
	}
	push.wait(t, 15*time.Second, "the request created while the engine was stopped pushed", func(got map[string][]pushGot) bool {
		for _, g := range got["/ok"] {
			var m struct {
				RequestID string `json:"request_id"`
			}
			if json.Unmarshal(g.plain, &m) == nil && m.RequestID == id {
				return true
			}
		}
		return false
	})
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := srv.SetNotifications(true); err == nil {
		t.Fatal("SetNotifications after Run returned: no error")
	}
}
