package inbox

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/logtest"
	"github.com/airlockhq/airlock/internal/ratelimit"
)

// TestSigninThrottled: 300 wrong tokens pasted into /signin from one
// address (behind a trusted proxy) get 401 for its budget of 20, then 429
// with Retry-After and a page saying when to try again; meanwhile a
// reviewer signs in from another address, and a reviewer whose token this
// server accepted before signs in from the attacking one. The log names
// the address once.
func TestSigninThrottled(t *testing.T) {
	t.Parallel()
	logs := &logtest.Recorder{}
	guard := ratelimit.NewGuard(ratelimit.GuardConfig{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Logger:         logs.Logger(), Now: func() time.Time { return time.Unix(1000, 0) }, // no refill
	})
	b := setup(t, func(o *options) { o.guard = guard })
	const attacker, bystander = "203.0.113.7", "198.51.100.2"
	signin := func(c *browserless, addr, token string) reply {
		t.Helper()
		via := map[string]string{"X-Forwarded-For": addr}
		form := c.do(t, "GET", "/signin", nil, via)
		return c.do(t, "POST", "/signin", url.Values{"csrf": {csrf(t, form.body)}, "token": {token}, "next": {"/"}}, via)
	}
	if r := signin(b.newClient(t), attacker, b.reviewer); r.status != http.StatusSeeOther {
		t.Fatalf("a reviewer's first sign-in: %d", r.status)
	}

	c := b.newClient(t)
	statuses := map[int]int{}
	for i := range 300 {
		r := signin(c, attacker, fmt.Sprintf("airlock_wrong%04d", i))
		statuses[r.status]++
		if r.status == http.StatusTooManyRequests &&
			(r.header.Get("Retry-After") != "3" || !strings.Contains(r.body, "Too many failed sign-ins from your address ("+attacker+"). Try again in 3 seconds.")) {
			t.Fatalf("a throttled sign-in: Retry-After %q:\n%s", r.header.Get("Retry-After"), r.body)
		}
	}
	if statuses[http.StatusUnauthorized] != 20 || statuses[http.StatusTooManyRequests] != 280 {
		t.Fatalf("300 wrong sign-ins: %v, want 20 × 401 then 280 × 429", statuses)
	}

	if r := signin(b.newClient(t), bystander, b.reviewerB); r.status != http.StatusSeeOther {
		t.Fatalf("a reviewer signing in from another address during the attack: %d", r.status)
	}
	if r := signin(b.newClient(t), attacker, b.reviewer); r.status != http.StatusSeeOther {
		t.Fatalf("a reviewer whose token was accepted before, from the attacking address: %d", r.status)
	}
	if got := logs.Containing("address=" + attacker); len(got) != 1 || !strings.HasPrefix(got[0], "failed authentication ") {
		t.Fatalf("log lines naming the attacker: %q, want one", got)
	}
}
