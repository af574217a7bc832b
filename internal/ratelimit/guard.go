package ratelimit

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/airlockhq/airlock"
)

// Defaults of GuardConfig.
const (
	// DefaultAddressFailures is how many failed authentications one client
	// address may make at once, and again every minute.
	DefaultAddressFailures = 20
	// DefaultOverallBurst and DefaultOverallRate are the failed
	// authentications allowed at once, and per second, from every address
	// together.
	DefaultOverallBurst = 500
	DefaultOverallRate  = 50
	// DefaultLogEvery is how often, at most, one client address is named in
	// the log.
	DefaultLogEvery = time.Minute
)

const (
	// maxLinesPerInterval bounds the lines naming addresses written in one
	// LogEvery; the addresses beyond it are summed into one line, so that
	// an attacker with many addresses cannot flood the log either.
	maxLinesPerInterval = 100
	// knownMax bounds the tokens remembered as accepted; at it, they start
	// over.
	knownMax = 10_000
	// pruneFloor is how many addresses are tracked before idle ones are
	// dropped outside Flush.
	pruneFloor = 10_000
)

// GuardConfig configures a Guard. Zero fields take the documented defaults.
type GuardConfig struct {
	// AddressBurst is how many failed authentications one client address
	// may make before it is throttled (default DefaultAddressFailures), and
	// AddressRate how many more it earns per second (default
	// DefaultAddressFailures a minute).
	AddressBurst int
	AddressRate  float64
	// OverallBurst and OverallRate are the same budget for all addresses
	// together (default 500, and 50 a second): each failure costs a store
	// lookup, and this bounds them when an attack comes from many
	// addresses.
	OverallBurst int
	OverallRate  float64
	// TrustedProxies are the peers whose X-Forwarded-For header names the
	// client. Default none: the address is the TCP peer's, and the header is
	// ignored, since any client can send it.
	TrustedProxies []netip.Prefix
	// Logger receives the failed authentications, one line per address per
	// LogEvery at most, with counts (default slog.Default()).
	Logger *slog.Logger
	// LogEvery is how often one address may be named in the log (default
	// DefaultLogEvery); Run writes what was held back meanwhile.
	LogEvery time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Guard throttles failed authentications, per client address and overall,
// without locking out valid tokens.
//
// A token this process has accepted before is never held back: Admit lets
// it through before any budget is looked at, from any address, whatever the
// attack. Any other attempt — a wrong token, or a token this process has not
// seen yet — holds one failure of its address's budget and of the overall
// one before the store is asked (so attempts in flight at once cannot
// overdraw them); if it fails, the failure is taken, and if it succeeds,
// let go. When either budget holds no failure beyond those held, the
// attempt is refused (429 with Retry-After) without a lookup. So an
// attacker guessing tokens gets AddressBurst guesses, then AddressRate a
// second, and learns nothing from a refusal; the cost is that a token
// never used on this server, sent from an address under attack (or while
// the overall budget is spent), waits like a wrong one.
//
// Each failure is logged with its address: one line per address per
// LogEvery at most, counting the failures and refusals since the last
// line about it.
type Guard struct {
	addrRate  rate.Limit
	addrBurst int
	trusted   []netip.Prefix
	log       *slog.Logger
	every     time.Duration
	now       func() time.Time

	// mu guards what follows, and orders the calls on each budget by the
	// clock (read under it), so no budget sees time run backwards.
	mu    sync.Mutex
	addrs map[string]*address
	// pruneAt is how many addresses may be tracked before idle ones are
	// dropped.
	pruneAt int
	// all is the overall budget, and allPending the attempts admitted
	// against it and not yet done.
	all        *rate.Limiter
	allPending int
	// allRefused counts the attempts the overall budget refused since
	// allLogged, when that was last logged.
	allRefused int
	allLogged  time.Time
	// known holds digests of the secrets of tokens accepted before.
	known map[[sha256.Size]byte]struct{}
	// window is the start of the current LogEvery for the lines naming
	// addresses, and lines how many were written in it.
	window time.Time
	lines  int
}

// address is the state of one client address.
type address struct {
	budget *rate.Limiter
	// pending counts the attempts admitted and not yet done. Each holds a
	// failure of the budget while its lookup runs, so that attempts in
	// flight at once cannot overdraw it: a failure then takes it from the
	// budget, a success or an unchecked attempt lets it go.
	pending         int
	failed, refused int       // since the last line about the address
	logged          time.Time // when that line was written; zero: never
}

// line is a log line, written once the Guard's lock is released.
type line struct {
	msg   string
	attrs []any
}

// NewGuard returns a Guard for cfg.
func NewGuard(cfg GuardConfig) *Guard {
	if cfg.AddressBurst <= 0 {
		cfg.AddressBurst = DefaultAddressFailures
	}
	if cfg.AddressRate <= 0 {
		cfg.AddressRate = DefaultAddressFailures / 60.0
	}
	if cfg.OverallBurst <= 0 {
		cfg.OverallBurst = DefaultOverallBurst
	}
	if cfg.OverallRate <= 0 {
		cfg.OverallRate = DefaultOverallRate
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LogEvery <= 0 {
		cfg.LogEvery = DefaultLogEvery
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Guard{
		addrRate: rate.Limit(cfg.AddressRate), addrBurst: cfg.AddressBurst,
		trusted: cfg.TrustedProxies, log: cfg.Logger, every: cfg.LogEvery, now: cfg.Now,
		addrs: map[string]*address{}, pruneAt: pruneFloor,
		all:   rate.NewLimiter(rate.Limit(cfg.OverallRate), cfg.OverallBurst),
		known: map[[sha256.Size]byte]struct{}{},
	}
}

// Attempt is one authentication Admit let through; Done reports how it
// ended.
type Attempt struct {
	g    *Guard // nil: nothing to report (no token was sent)
	addr string
	hash [sha256.Size]byte
	// reserved is set when the attempt holds a failure of the budgets
	// (address.pending), to take if it fails and let go otherwise.
	reserved bool
}

// Address is the client address the attempt counts under.
func (a Attempt) Address() string { return a.addr }

// RetryAfter is a wait Admit returned in whole seconds, rounded up: the
// value of a Retry-After header.
func RetryAfter(wait time.Duration) int { return int(math.Ceil(wait.Seconds())) }

// Throttled is the error that answers an attempt Admit refused, telling
// the client to retry after secs seconds.
func (a Attempt) Throttled(secs int) *airlock.Error {
	return airlock.Errorf(airlock.CodeRateLimited,
		"too many failed authentications from %s; retry after %d s (a token this server has accepted before is not held back)", a.addr, secs)
}

// Admit says whether an authentication with secret, sent in r, may be
// made now. When it may not, it returns how long the client should wait;
// the attempt is not counted again. A request without a secret is always
// let through (it costs no lookup, and fails anyway).
func (g *Guard) Admit(r *http.Request, secret string) (Attempt, time.Duration, bool) {
	a := Attempt{addr: g.Address(r)}
	if secret == "" {
		return a, 0, true
	}
	a.g, a.hash = g, sha256.Sum256([]byte(secret))
	var out []line
	defer func() { g.write(out) }()
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if _, ok := g.known[a.hash]; ok {
		return a, 0, true
	}
	// The budgets must hold a failure for this attempt besides those the
	// attempts in flight hold.
	st := g.addrs[a.addr]
	if st != nil {
		if d := wait(st.budget, now, st.pending+1); d > 0 {
			st.refused++
			out = g.noteLocked(out, a.addr, st, now)
			return a, d, false
		}
	}
	if d := wait(g.all, now, g.allPending+1); d > 0 {
		g.allRefused++
		out = g.noteOverallLocked(out, now)
		return a, d, false
	}
	if st == nil {
		st = g.trackLocked(a.addr, now)
	}
	st.pending++
	g.allPending++
	a.reserved = true
	return a, 0, true
}

// Done reports how the attempt ended: err nil when the token was accepted,
// an unauthorized error when it was refused (counted as a failure, and
// logged), any other error when it could not be checked (counted as
// neither).
func (a Attempt) Done(err error) {
	if a.g == nil {
		return
	}
	switch {
	case err == nil:
		a.g.accepted(a)
	case airlock.ErrorCode(err) == airlock.CodeUnauthorized:
		a.g.failed(a.addr, a.hash, a.reserved)
	default:
		a.g.mu.Lock()
		a.g.releaseLocked(a.addr, a.reserved)
		a.g.mu.Unlock()
	}
}

// Refused records that a token Admit let through, and the store accepted,
// was refused later in the same call (revoked meanwhile): a failure of
// the request's address, and a token no longer accepted.
func (g *Guard) Refused(r *http.Request, secret string) {
	if secret == "" {
		return
	}
	g.failed(g.Address(r), sha256.Sum256([]byte(secret)), false)
}

func (g *Guard) accepted(a Attempt) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.releaseLocked(a.addr, a.reserved)
	if _, ok := g.known[a.hash]; !ok {
		if len(g.known) >= knownMax {
			clear(g.known)
		}
		g.known[a.hash] = struct{}{}
	}
}

// releaseLocked lets go of the failure an attempt from addr held, if it
// held one (reserved), now that its lookup is done.
func (g *Guard) releaseLocked(addr string, reserved bool) {
	if !reserved {
		return
	}
	if st := g.addrs[addr]; st != nil && st.pending > 0 {
		st.pending--
	}
	g.allPending = max(0, g.allPending-1)
}

// failed counts a failed authentication from addr with the secret whose
// digest is hash: it takes one failure from the budgets, if they hold
// one. An attempt admitted with a reservation (reserved) found the budgets
// holding it then; one that was not (a token accepted before) may find
// them empty, and takes nothing.
func (g *Guard) failed(addr string, hash [sha256.Size]byte, reserved bool) {
	var out []line
	defer func() { g.write(out) }()
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	delete(g.known, hash)
	g.releaseLocked(addr, reserved)
	st := g.addrs[addr]
	if st == nil {
		st = g.trackLocked(addr, now)
	}
	st.budget.AllowN(now, 1)
	g.all.AllowN(now, 1)
	st.failed++
	out = g.noteLocked(out, addr, st, now)
}

// trackLocked starts tracking addr with a full budget, first dropping idle
// addresses when many are tracked.
func (g *Guard) trackLocked(addr string, now time.Time) *address {
	if len(g.addrs) >= g.pruneAt {
		g.pruneLocked(now)
	}
	st := &address{budget: rate.NewLimiter(g.addrRate, g.addrBurst)}
	g.addrs[addr] = st
	return st
}

// pruneLocked drops the addresses whose budget is full again and that
// have no attempt in flight and nothing left to log: they are as good as
// new.
func (g *Guard) pruneLocked(now time.Time) {
	for k, st := range g.addrs {
		if st.pending == 0 && st.failed == 0 && st.refused == 0 &&
			st.budget.TokensAt(now) >= float64(g.addrBurst) {
			delete(g.addrs, k)
		}
	}
	g.pruneAt = max(pruneFloor, 2*len(g.addrs))
}

// noteLocked adds to out the line about addr, when one is due: its first
// failure, or LogEvery after its last line, within the lines allowed per
// LogEvery. What is not written now waits for the next one or for Flush.
func (g *Guard) noteLocked(out []line, addr string, st *address, now time.Time) []line {
	if !st.logged.IsZero() && now.Sub(st.logged) < g.every {
		return out
	}
	if !g.lineAllowedLocked(now) {
		return out
	}
	out = append(out, addressLine(addr, st.failed, st.refused))
	st.failed, st.refused, st.logged = 0, 0, now
	return out
}

func addressLine(addr string, failed, refused int) line {
	return line{"failed authentication", []any{"address", addr, "failed", failed, "throttled", refused}}
}

// lineAllowedLocked takes one of the lines allowed in the current
// LogEvery, when one is left.
func (g *Guard) lineAllowedLocked(now time.Time) bool {
	if now.Sub(g.window) >= g.every {
		g.window, g.lines = now, 0
	}
	if g.lines >= maxLinesPerInterval {
		return false
	}
	g.lines++
	return true
}

// noteOverallLocked adds to out the line about the overall budget, when
// one is due.
func (g *Guard) noteOverallLocked(out []line, now time.Time) []line {
	if !g.allLogged.IsZero() && now.Sub(g.allLogged) < g.every {
		return out
	}
	out = append(out, overallLine(g.allRefused))
	g.allRefused, g.allLogged = 0, now
	return out
}

func overallLine(refused int) line {
	return line{"failed authentications over the server-wide budget: tokens this server has not accepted before are refused for now",
		[]any{"throttled", refused}}
}

// Flush writes the counts held back since the last lines (an address is
// named at most once per LogEvery), summing the addresses beyond the lines
// allowed into one, and stops tracking the addresses that are idle again.
func (g *Guard) Flush() {
	var out []line
	defer func() { g.write(out) }()
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	var more, moreFailed, moreRefused int
	for addr, st := range g.addrs {
		if st.failed == 0 && st.refused == 0 || !st.logged.IsZero() && now.Sub(st.logged) < g.every {
			continue
		}
		if g.lineAllowedLocked(now) {
			out = append(out, addressLine(addr, st.failed, st.refused))
		} else {
			more, moreFailed, moreRefused = more+1, moreFailed+st.failed, moreRefused+st.refused
		}
		st.failed, st.refused, st.logged = 0, 0, now
	}
	if more > 0 {
		out = append(out, line{"failed authentication from more addresses", []any{"addresses", more, "failed", moreFailed, "throttled", moreRefused}})
	}
	if g.allRefused > 0 {
		out = append(out, overallLine(g.allRefused))
		g.allRefused, g.allLogged = 0, now
	}
	g.pruneLocked(now)
}

// Run flushes every LogEvery until ctx ends, and once more then.
func (g *Guard) Run(ctx context.Context) {
	tick := time.NewTicker(g.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			g.Flush()
			return
		case <-tick.C:
			g.Flush()
		}
	}
}

func (g *Guard) write(out []line) {
	for _, l := range out {
		g.log.Warn(l.msg, l.attrs...)
	}
}

// Address returns the client address r counts under: the TCP peer's IP;
// when the peer is a trusted proxy, the last address of X-Forwarded-For
// that is not one (proxies append the peer they heard from, so what a
// client wrote itself is further left and never believed). An IPv6
// address counts as its /64, which one host may hold whole.
func (g *Guard) Address(r *http.Request) string {
	ip := peer(r.RemoteAddr)
	if ip.IsValid() && g.trustedProxy(ip) {
		ip = g.forwardedFor(r, ip)
	}
	switch {
	case !ip.IsValid():
		return "unknown"
	case ip.Is4():
		return ip.String()
	}
	return netip.PrefixFrom(ip, 64).Masked().String()
}

// peer parses a request's RemoteAddr; the zero Addr when it is no IP.
func peer(remote string) netip.Addr {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return ip.WithZone("").Unmap()
}

func (g *Guard) trustedProxy(ip netip.Addr) bool {
	for _, p := range g.trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// forwardedFor walks r's X-Forwarded-For from the right, from proxy, a
// trusted peer: the first hop that is not a trusted proxy is the client.
// A hop that does not parse ends the walk at the last trusted proxy.
func (g *Guard) forwardedFor(r *http.Request, proxy netip.Addr) netip.Addr {
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop := strings.TrimSpace(hops[i])
		if hop == "" {
			continue
		}
		ip := peer(hop)
		if !ip.IsValid() {
			return proxy
		}
		if !g.trustedProxy(ip) {
			return ip
		}
		proxy = ip
	}
	return proxy
}

// ParseTrustedProxies reads a comma-separated list of IP addresses and
// CIDR prefixes (10.0.0.0/8, 192.0.2.7, fd00::/8); empty means none.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if p, err := netip.ParsePrefix(part); err == nil {
			out = append(out, p.Masked())
			continue
		}
		ip, err := netip.ParseAddr(part)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an IP address nor a CIDR prefix (like 10.0.0.0/8)", part)
		}
		ip = ip.Unmap()
		out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
	}
	return out, nil
}
