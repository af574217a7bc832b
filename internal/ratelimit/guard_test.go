package ratelimit

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/logtest"
	"github.com/airlockhq/airlock/store/storetest"
)

// guardBundle is a Guard on a fake clock with its log.
type guardBundle struct {
	g     *Guard
	clock *storetest.FakeClock
	log   *logtest.Recorder
}

func newGuard(t *testing.T, cfg GuardConfig) *guardBundle {
	t.Helper()
	b := &guardBundle{clock: storetest.NewFakeClock(time.Unix(1_000_000, 0)), log: &logtest.Recorder{}}
	cfg.Now, cfg.Logger = b.clock.Now, b.log.Logger()
	b.g = NewGuard(cfg)
	return b
}

// from is a request whose TCP peer is ip, with X-Forwarded-For headers
// when given.
func from(ip string, forwardedFor ...string) *http.Request {
	r, _ := http.NewRequest("GET", "http://airlock/v1/instances", nil)
	r.RemoteAddr = net.JoinHostPort(ip, "40000")
	for _, h := range forwardedFor {
		r.Header.Add("X-Forwarded-For", h)
	}
	return r
}

// try makes one authentication with secret from r that ends with err
// when admitted, and says whether it was admitted.
func (b *guardBundle) try(r *http.Request, secret string, err error) (bool, time.Duration) {
	a, retry, ok := b.g.Admit(r, secret)
	if ok {
		a.Done(err)
	}
	return ok, retry
}

var errRefused = airlock.TokenRefused()

// TestGuardThrottlesAnAddress: an address gets its burst of failures, then
// one per refill, each refusal saying how long to wait; other addresses and
// tokens accepted before are not held back, and a token never seen from
// the throttled address waits like a wrong one.
func TestGuardThrottlesAnAddress(t *testing.T) {
	t.Parallel()
	b := newGuard(t, GuardConfig{AddressBurst: 3, AddressRate: 1})
	attacker, other := from("203.0.113.7"), from("198.51.100.2")
	if ok, _ := b.try(attacker, "known-secret", nil); !ok {
		t.Fatal("a first valid attempt was refused")
	}
	for i := range 3 {
		if ok, _ := b.try(attacker, fmt.Sprint("wrong-", i), errRefused); !ok {
			t.Fatalf("failure %d of a burst of 3 refused", i+1)
		}
	}
	ok, retry := b.try(attacker, "wrong-3", errRefused)
	if ok || retry != time.Second {
		t.Fatalf("the 4th failure: admitted=%v retry=%s; want refused, retry after 1s", ok, retry)
	}
	if ok, _ := b.try(attacker, "known-secret", nil); !ok {
		t.Fatal("a token accepted before was refused from the throttled address")
	}
	if ok, _ := b.try(attacker, "never-seen-secret", nil); ok {
		t.Fatal("a token never seen was let through from the throttled address; it must wait like a wrong one")
	}
	if ok, _ := b.try(other, "wrong-other", errRefused); !ok {
		t.Fatal("another address was throttled for the attacker's failures")
	}
	if ok, _ := b.try(attacker, "", errRefused); !ok {
		t.Fatal("a request without a token was refused; it costs no lookup")
	}
	b.clock.Advance(time.Second)
	if ok, _ := b.try(attacker, "wrong-4", errRefused); !ok {
		t.Fatal("refused after a second's refill")
	}
	if ok, _ := b.try(attacker, "wrong-5", errRefused); ok {
		t.Fatal("two failures admitted after one refill")
	}
}

// TestGuardReservesBeforeTheLookup: concurrent attempts from one address
// cannot exceed its budget by racing past the check before any fails, and
// attempts that succeed give back what they took.
func TestGuardReservesBeforeTheLookup(t *testing.T) {
	t.Parallel()
	b := newGuard(t, GuardConfig{AddressBurst: 3, AddressRate: 1})
	r := from("203.0.113.7")
	var admitted []Attempt
	for i := range 10 {
		if a, _, ok := b.g.Admit(r, fmt.Sprint("in-flight-", i)); ok {
			admitted = append(admitted, a)
		}
	}
	if len(admitted) != 3 {
		t.Fatalf("%d of 10 attempts in flight at once admitted, want the burst of 3", len(admitted))
	}
	for _, a := range admitted {
		a.Done(nil) // all three were valid new tokens
	}
	for i := range 3 {
		if ok, _ := b.try(r, fmt.Sprint("wrong-", i), errRefused); !ok {
			t.Fatalf("failure %d refused: the successes did not give back their reservations", i+1)
		}
	}
	// A check that could not be made (the store failed) counts as neither.
	b.clock.Advance(time.Second)
	for range 5 {
		if ok, _ := b.try(r, "unchecked", airlock.Errorf(airlock.CodeInternal, "store down")); !ok {
			t.Fatal("an attempt after unchecked ones was refused: they must give back their reservations")
		}
	}
}

// TestGuardOverallBudget: failures from many addresses spend the overall
// budget; past it, tokens never seen are refused from any address, and
// tokens accepted before still pass.
func TestGuardOverallBudget(t *testing.T) {
	t.Parallel()
	b := newGuard(t, GuardConfig{AddressBurst: 5, OverallBurst: 10, OverallRate: 2})
	if ok, _ := b.try(from("192.0.2.1"), "known-secret", nil); !ok {
		t.Fatal("a first valid attempt was refused")
	}
	refused := 0
	for i := range 30 {
		if ok, _ := b.try(from(fmt.Sprintf("203.0.113.%d", i)), "wrong", errRefused); !ok {
			refused++
		}
	}
	if refused != 20 {
		t.Fatalf("%d of 30 failures from 30 addresses refused, want 20 past an overall budget of 10", refused)
	}
	ok, retry := b.try(from("198.51.100.9"), "never-seen", nil)
	if ok || retry != 500*time.Millisecond {
		t.Fatalf("a new token from a new address with the overall budget spent: admitted=%v retry=%s; want refused, 500ms", ok, retry)
	}
	if ok, _ := b.try(from("198.51.100.9"), "known-secret", nil); !ok {
		t.Fatal("a token accepted before was refused with the overall budget spent")
	}
}

// TestGuardForgetsARevokedToken: a token accepted before that fails (it
// was revoked) is forgotten, so its next attempts are budgeted like any
// other; Refused records a failure found later in the call.
func TestGuardForgetsARevokedToken(t *testing.T) {
	t.Parallel()
	b := newGuard(t, GuardConfig{AddressBurst: 2, AddressRate: 1})
	r := from("203.0.113.7")
	b.try(r, "revoked-secret", nil)
	b.try(r, "revoked-secret", errRefused) // revoked since: forgotten, one failure
	b.g.Refused(r, "later-secret")         // a second failure, found after the lookup
	if ok, _ := b.try(r, "revoked-secret", errRefused); ok {
		t.Fatal("a forgotten token passed an empty budget")
	}
}

// TestGuardAddress: the address is the TCP peer's unless the peer is a
// trusted proxy; then the last X-Forwarded-For hop that is not one. An
// IPv6 address counts as its /64.
func TestGuardAddress(t *testing.T) {
	t.Parallel()
	trusted, err := ParseTrustedProxies("10.0.0.0/8, 192.0.2.1,fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	plain, proxied := NewGuard(GuardConfig{}), NewGuard(GuardConfig{TrustedProxies: trusted})
	for _, tc := range []struct {
		name string
		g    *Guard
		r    *http.Request
		want string
	}{
		{"the peer, without trusted proxies", plain, from("203.0.113.7"), "203.0.113.7"},
		{"X-Forwarded-For ignored without trusted proxies", plain, from("203.0.113.7", "198.51.100.1"), "203.0.113.7"},
		{"X-Forwarded-For ignored from an untrusted peer", proxied, from("203.0.113.7", "198.51.100.1"), "203.0.113.7"},
		{"the hop before a trusted proxy", proxied, from("10.1.2.3", "198.51.100.1"), "198.51.100.1"},
		{"what the client wrote itself is not believed", proxied, from("10.1.2.3", "6.6.6.6, 198.51.100.1"), "198.51.100.1"},
		{"through two trusted proxies", proxied, from("10.1.2.3", "198.51.100.1, 192.0.2.1"), "198.51.100.1"},
		{"repeated headers read as one list", proxied, from("10.1.2.3", "6.6.6.6", "198.51.100.1"), "198.51.100.1"},
		{"only trusted hops: the first of them", proxied, from("10.1.2.3", "10.9.9.9"), "10.9.9.9"},
		{"no header: the proxy", proxied, from("10.1.2.3"), "10.1.2.3"},
		{"a hop that does not parse: the last trusted proxy", proxied, from("10.1.2.3", "198.51.100.1, garbage, 192.0.2.1"), "192.0.2.1"},
		{"IPv6 counts as its /64", plain, from("2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64"},
		{"IPv4 mapped in IPv6 is IPv4", plain, from("::ffff:203.0.113.7"), "203.0.113.7"},
		{"an IPv6 hop behind a trusted IPv6 proxy", proxied, from("fd00::1", "2001:db8:9::1"), "2001:db8:9::/64"},
		{"no IP at all", plain, &http.Request{RemoteAddr: "@", Header: http.Header{}}, "unknown"},
	} {
		if got := tc.g.Address(tc.r); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if _, err := ParseTrustedProxies("10.0.0.0/8,proxy.internal"); err == nil || !strings.Contains(err.Error(), "proxy.internal") {
		t.Errorf("a host name among trusted proxies: %v, want an error naming it", err)
	}
	if got, err := ParseTrustedProxies(""); err != nil || got != nil {
		t.Errorf("empty list: %v, %v", got, err)
	}
}

// TestGuardLogsRateLimited: each address is named at most once per
// LogEvery, with the counts since its last line; Flush writes what was
// held back; past the lines allowed in one LogEvery, addresses are summed
// into one line.
func TestGuardLogsRateLimited(t *testing.T) {
	t.Parallel()
	b := newGuard(t, GuardConfig{AddressBurst: 20, LogEvery: time.Minute})
	attacker := from("203.0.113.7")
	for i := range 300 {
		b.try(attacker, fmt.Sprint("wrong-", i), errRefused)
	}
	got := b.log.Take()
	if len(got) != 1 || got[0] != "failed authentication address=203.0.113.7 failed=1 throttled=0" {
		t.Fatalf("300 attempts logged %q; want one line, at the first failure", got)
	}
	b.g.Flush()
	if got := b.log.Take(); len(got) != 0 {
		t.Fatalf("Flush within the minute wrote %q; the address was named less than a minute ago", got)
	}
	b.clock.Advance(time.Minute)
	b.g.Flush()
	if got := b.log.Take(); len(got) != 1 || got[0] != "failed authentication address=203.0.113.7 failed=19 throttled=280" {
		t.Fatalf("Flush a minute later wrote %q; want the 19 failures and 280 refusals held back", got)
	}

	// Many addresses: at most maxLinesPerInterval lines name one per
	// minute; the rest wait for Flush, which sums those beyond its own
	// allowance into one line.
	b.clock.Advance(time.Minute)
	const flood = 2*maxLinesPerInterval + 50
	for i := range flood {
		b.try(from(fmt.Sprintf("10.0.%d.%d", i/250, i%250)), "wrong", errRefused)
	}
	if got := b.log.Take(); len(got) != maxLinesPerInterval {
		t.Fatalf("%d addresses failing once wrote %d lines, want %d", flood, len(got), maxLinesPerInterval)
	}
	b.clock.Advance(time.Minute)
	b.g.Flush()
	got = b.log.Take()
	summary := fmt.Sprintf("failed authentication from more addresses addresses=%d failed=%d throttled=0", flood-2*maxLinesPerInterval, flood-2*maxLinesPerInterval)
	if len(got) != maxLinesPerInterval+1 || !slices.Contains(got, summary) {
		t.Fatalf("Flush after the flood wrote %d lines (last %q); want %d naming addresses and %q", len(got), got[len(got)-1], maxLinesPerInterval, summary)
	}
}

// TestGuardPrunesIdleAddresses: addresses whose budget has refilled and
// that have nothing left to log are dropped, so the map stays small.
func TestGuardPrunesIdleAddresses(t *testing.T) {
	t.Parallel()
	b := newGuard(t, GuardConfig{AddressBurst: 2, AddressRate: 1, OverallBurst: 1_000_000})
	for i := range 1000 {
		b.try(from(fmt.Sprintf("10.0.%d.%d", i/250, i%250)), "wrong", errRefused)
	}
	b.clock.Advance(time.Hour)
	b.g.Flush()
	b.g.mu.Lock()
	n := len(b.g.addrs)
	b.g.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d addresses tracked an hour after their last failure, want 0", n)
	}
}

// TestParseTrustedProxiesMasks: a prefix is stored masked, and a bare
// address as a single-host prefix.
func TestParseTrustedProxiesMasks(t *testing.T) {
	t.Parallel()
	got, err := ParseTrustedProxies("10.1.2.3/8,192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.1/32")}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("%v, want %v", got, want)
	}
}

// BenchmarkGuardAdmit measures what the guard adds to an authenticated
// call: a token accepted before, and a new one that succeeds (reserved,
// then given back).
func BenchmarkGuardAdmit(b *testing.B) {
	g := NewGuard(GuardConfig{Logger: (&logtest.Recorder{}).Logger()})
	r := from("203.0.113.7")
	a, _, _ := g.Admit(r, "known-secret")
	a.Done(nil)
	b.Run("accepted before", func(b *testing.B) {
		for b.Loop() {
			a, _, _ := g.Admit(r, "known-secret")
			a.Done(nil)
		}
	})
	b.Run("new and valid", func(b *testing.B) {
		g := NewGuard(GuardConfig{Logger: (&logtest.Recorder{}).Logger()})
		for b.Loop() {
			a, _, _ := g.Admit(r, "new-secret")
			a.Done(nil)
			clear(g.known) // so that each round is new
		}
	})
}
