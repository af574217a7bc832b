package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPush runs the push scenario briefly on SQLite: lifecycle passes with
// the delivery engine on, off, off, on in the server process, then creates
// pushed to two subscriptions of a push service that checks each push's
// VAPID signature and decrypts it. Every paced create reaches both
// subscriptions, each with a lag, and no push carries anything beyond
// {request_id, tool, deadline_at} (the run fails on one that does, or on
// one that does not decrypt).
func TestPush(t *testing.T) {
	t.Parallel()
	rep := run(t, Config{Scenario: Push, Clients: 2, Duration: 60 * time.Second, Count: 48})
	p := rep.Push
	if p == nil || len(p.Passes) != len(pushOrder) {
		t.Fatalf("push report %+v, want %d passes", p, len(pushOrder))
	}
	for i, ps := range p.Passes {
		if ps.Deliverer != pushOrder[i] {
			t.Errorf("pass %d had the engine %v, want %v", i+1, ps.Deliverer, pushOrder[i])
		}
		checkResult(t, fmt.Sprintf("pass %d, engine %s", i+1, onOff(ps.Deliverer)), ps.Result, 6)
	}
	if want := round(p.WithDeliverer.OpsPerS/p.WithoutDeliverer.OpsPerS, 3); p.PushRatio != want || want <= 0 {
		t.Errorf("push_ratio %v, want %v", p.PushRatio, want)
	}
	checkResult(t, "creates, maximum", p.MaxCreates, 12)
	checkResult(t, "creates, paced", p.PacedCreates, 12)
	if p.Rate <= 0 || rep.Bounds.Rate != p.Rate || rep.Max == nil {
		t.Errorf("paced at %v (bounds %v), max %v", p.Rate, rep.Bounds.Rate, rep.Max)
	}
	if want := p.PacedCreates.Ops * pushSubscriptions; p.Lagged != want || p.Undelivered != 0 {
		t.Errorf("%d paced pushes lagged, %d undelivered; want %d (each paced create to each subscription)", p.Lagged, p.Undelivered, want)
	}
	if min := (p.MaxCreates.Ops + p.PacedCreates.Ops) * pushSubscriptions; p.Messages < min {
		t.Errorf("%d pushes received, want at least %d", p.Messages, min)
	}
	if l := p.LagMS; !(0 < l.P50 && l.P50 <= l.P99 && l.P99 <= l.Max) || p.LagFrom != "created_at" {
		t.Errorf("lag from %q %+v: want recorded, in order", p.LagFrom, l)
	}
	if p.WithArguments != 0 {
		t.Errorf("%d pushes carried arguments", p.WithArguments)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"push.push_ratio", "push.lag_ms.p99", "push.messages", "push.with_arguments", "push.with_deliverer.ops_per_s", "push.without_deliverer.ops_per_s"} {
		if lookup(m, path) == nil {
			t.Errorf("JSON report has no %s:\n%s", path, b)
		}
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	for _, want := range []string{"creates pushed, at half", "lifecycle, delivery engine off", "push_ratio: ", "target ≥ 0.98", "push lag, created_at", "0 carried more than"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

// TestPushRefusals: the push scenario needs the run's own servers, sets
// its own pace, and needs room for its passes and create phases.
func TestPushRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Scenario: Push, URLs: []string{"http://127.0.0.1:1"}, Token: "x"}, "needs the run's own servers"},
		{Config{Scenario: Push, Rate: 10}, "has its own pace"},
		{Config{Scenario: Push, HalfMax: true}, "has its own pace"},
		{Config{Scenario: Push, Count: 5}, "--count must be at least 12 for push"},
		{Config{Scenario: Push, Duration: 100 * time.Millisecond}, "--duration must be at least 200ms for push"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
	if err := (Config{Scenario: Push}).Validate(); err != nil {
		t.Errorf("the push scenario's defaults: %v", err)
	}
}
