package rest

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/logtest"
	"github.com/airlockhq/airlock/internal/ratelimit"
	"github.com/airlockhq/airlock/store/storetest"
)

// TestFailedAuthenticationThrottled: 300 wrong tokens from one address
// (behind a trusted proxy, named by X-Forwarded-For) get 401 for the
// default budget of 20, then 429 rate_limited with Retry-After; during the
// attack a valid token from another address works, and so does a token
// this server accepted before, from the attacking address; a token it has
// never seen waits there like a wrong one. The log names the address, once
// for the 300 attempts until a minute has passed.
func TestFailedAuthenticationThrottled(t *testing.T) {
	t.Parallel()
	clock := storetest.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	logs := &logtest.Recorder{}
	guard := ratelimit.NewGuard(ratelimit.GuardConfig{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, // the test's client is the proxy
		Logger:         logs.Logger(), Now: clock.Now,
	})
	b := setup(t, func(o *options) { o.guard = guard })
	const attacker, bystander = "203.0.113.7", "198.51.100.2"
	list := func(token, addr string) resp {
		t.Helper()
		return b.do(t, req{method: "GET", path: "/v1/approval-requests", token: token, header: map[string]string{"X-Forwarded-For": addr}})
	}
	want(t, list(b.agentA, attacker), http.StatusOK, "") // agent A's token is known from now on

	unauthorized, limited := 0, 0
	for i := range 300 {
		r := list(fmt.Sprintf("airlock_wrong%04d", i), attacker)
		switch r.status {
		case http.StatusUnauthorized:
			unauthorized++
			if limited > 0 {
				t.Fatalf("attempt %d: 401 after a 429; the budget did not refill", i+1)
			}
		case http.StatusTooManyRequests:
			limited++
			want(t, r, http.StatusTooManyRequests, airlock.CodeRateLimited)
			if got := r.header.Get("Retry-After"); got != "3" {
				t.Fatalf("attempt %d: Retry-After %q, want 3 (20 failures a minute)", i+1, got)
			}
		default:
			t.Fatalf("attempt %d with a wrong token: %d %s", i+1, r.status, r.body)
		}
	}
	if unauthorized != ratelimit.DefaultAddressFailures || limited != 300-ratelimit.DefaultAddressFailures {
		t.Fatalf("300 wrong tokens: %d × 401 and %d × 429, want %d and %d", unauthorized, limited,
			ratelimit.DefaultAddressFailures, 300-ratelimit.DefaultAddressFailures)
	}

	want(t, list(b.agentB, bystander), http.StatusOK, "")
	want(t, list(b.agentA, attacker), http.StatusOK, "")
	r := list(b.reviewer, attacker)
	want(t, r, http.StatusTooManyRequests, airlock.CodeRateLimited)
	if !strings.Contains(string(r.body), attacker) {
		t.Errorf("the refusal does not name the address it counts under: %s", r.body)
	}
	clock.Advance(3 * time.Second)
	want(t, list(b.reviewer, attacker), http.StatusOK, "") // after a refill, like anyone

	if got := logs.Containing("address=" + attacker); len(got) != 1 || !strings.HasPrefix(got[0], "failed authentication ") {
		t.Fatalf("log lines naming the attacker: %q; want one, at its first failure", got)
	}
	clock.Advance(time.Minute)
	guard.Flush()
	got := logs.Containing("address=" + attacker)
	if len(got) != 2 || got[1] != fmt.Sprintf("failed authentication address=%s failed=%d throttled=%d", attacker, unauthorized-1, limited+1) {
		t.Fatalf("log lines naming the attacker after a minute: %q; want a second one counting the rest", got)
	}
	if got := logs.Containing("address=" + bystander); len(got) != 0 {
		t.Fatalf("the bystander is logged: %q", got)
	}
}

// TestFailedAuthenticationForwardedForIgnored: without trusted proxies, a
// client cannot escape its budget by writing a new X-Forwarded-For on
// every attempt: it counts under its TCP peer address.
func TestFailedAuthenticationForwardedForIgnored(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) {
		o.guard = ratelimit.NewGuard(ratelimit.GuardConfig{AddressBurst: 5, Logger: (&logtest.Recorder{}).Logger()})
	})
	limited := 0
	for i := range 10 {
		r := b.do(t, req{method: "GET", path: "/v1/approval-requests", token: "airlock_wrong",
			header: map[string]string{"X-Forwarded-For": fmt.Sprintf("198.51.100.%d", i)}})
		if r.status == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited != 5 {
		t.Fatalf("%d of 10 wrong tokens with forged X-Forwarded-For throttled, want 5 past a budget of 5", limited)
	}
}

// TestFailedAuthenticationOverallBudget: wrong tokens from many addresses
// spend the server-wide budget; past it, a token this server accepted
// before still works from an address never seen.
func TestFailedAuthenticationOverallBudget(t *testing.T) {
	t.Parallel()
	guard := ratelimit.NewGuard(ratelimit.GuardConfig{
		OverallBurst: 30, OverallRate: 0.001,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Logger:         (&logtest.Recorder{}).Logger(),
	})
	b := setup(t, func(o *options) { o.guard = guard })
	list := func(token, addr string) resp {
		t.Helper()
		return b.do(t, req{method: "GET", path: "/v1/approval-requests", token: token, header: map[string]string{"X-Forwarded-For": addr}})
	}
	want(t, list(b.reviewer, "192.0.2.1"), http.StatusOK, "")
	limited := 0
	for i := range 40 {
		if r := list("airlock_wrong", fmt.Sprintf("203.0.113.%d", i)); r.status == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited != 10 {
		t.Fatalf("%d of 40 wrong tokens from 40 addresses throttled, want 10 past an overall budget of 30", limited)
	}
	want(t, list(b.reviewer, "198.51.100.77"), http.StatusOK, "")
}

// TestRevokedLongPollCountsAsFailure: a long-poll whose token is revoked
// while it waits answers 401, which counts against its address and makes
// the token one the server no longer lets past the budget.
func TestRevokedLongPollCountsAsFailure(t *testing.T) {
	t.Parallel()
	guard := ratelimit.NewGuard(ratelimit.GuardConfig{AddressBurst: 1, Logger: (&logtest.Recorder{}).Logger()})
	b := setup(t, func(o *options) { o.guard = guard })
	_, id := b.pending(t, "1h")
	waiters := b.svc.Waiters()
	poll := b.longPoll(t, b.agentA, id, "60s")
	waitFor(t, "the long-poll to wait", func() bool { return b.svc.Waiters() == waiters+1 })
	want(t, b.do(t, req{method: "DELETE", path: "/v1/tokens/" + b.callers["agentA"].ID, token: b.admin}), http.StatusOK, "")
	want(t, (<-poll).r, http.StatusUnauthorized, airlock.CodeUnauthorized)
	// The one failure of the budget is spent: the next unknown token waits.
	want(t, b.do(t, req{method: "GET", path: "/v1/approval-requests", token: "airlock_wrong"}), http.StatusTooManyRequests, airlock.CodeRateLimited)
}
