// Package outbound holds the rules for every connection the server opens
// to an address it was given: webhook URLs (an admin's), the Slack Web API
// URL and the SMTP host (the operator's), and push endpoints later. They
// reach public addresses only, unless the server runs with
// --outbound-allow-private (docs/notifications.md, "SSRF").
//
// The rules are applied twice. CheckURL and CheckHost refuse, when the
// address is given, a host that is a literal non-public address in any
// spelling a resolver accepts, or a loopback name: the admin learns at
// once. Control refuses, at each connection, an address that a name
// resolved to: a name may resolve anywhere, and may be re-pointed later,
// so only the dial-time check is the guard; the first is a courtesy.
package outbound

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Flag is the server's flag that lifts these rules, named in refusals.
const Flag = "--outbound-allow-private"

// nonPublic are ranges that IsPrivate and friends leave out and that no
// public receiver has: "this network", carrier-grade NAT, IETF protocol
// assignments, documentation, benchmarking, reserved; and in IPv6 the
// IPv4-compatible (::/96, deprecated, where ::127.0.0.1 is) and
// IPv4-translated (::ffff:0:0:0/96) forms, NAT64, and documentation.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::/96"),
	netip.MustParsePrefix("::ffff:0:0:0/96"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("100::/64"),
}

// Public reports whether the server may connect to ip without
// --outbound-allow-private: not loopback, private (10/8, 172.16/12,
// 192.168/16, fc00::/7 — which holds cloud metadata's fd00:ec2::254),
// link-local (169.254/16, where cloud metadata answers, and fe80::/10),
// multicast, unspecified, or another non-public range. An IPv4-mapped
// IPv6 address (::ffff:a.b.c.d) is judged as its IPv4 address.
func Public(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// CheckURL is CheckHost for the host of an absolute URL.
func CheckURL(raw string, allowPrivate bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Host == "" {
		return errors.New("no host")
	}
	return CheckHost(u.Hostname(), allowPrivate)
}

// CheckHost refuses a host (as url.URL.Hostname returns it) that is a
// loopback name or a literal non-public address, unless allowPrivate; and,
// always, a number in a spelling other than dotted decimal, since
// resolvers disagree on what such a host means (inet_aton reads
// 2130706433, 0x7f000001, 0177.0.0.1 and 127.1 as 127.0.0.1; Go's
// resolver looks them up as names). Names are compared lower-cased and
// without a trailing dot, as resolvers compare them. Other names pass: the
// address they resolve to is checked when connecting (Control).
func CheckHost(host string, allowPrivate bool) error {
	h := strings.ToLower(strings.TrimRight(host, "."))
	if h == "" {
		return errors.New("no host")
	}
	ip, err := netip.ParseAddr(h)
	switch {
	case err == nil: // dotted decimal IPv4, or IPv6
	case endsInNumber(h):
		v4, ok := parseInetAton(h)
		if !ok {
			return fmt.Errorf("%q ends in a number but is not an IPv4 address", host)
		}
		return fmt.Errorf("%q is the IPv4 address %s spelled in a form resolvers disagree on; write %s", host, v4, v4)
	case !allowPrivate && (h == "localhost" || strings.HasSuffix(h, ".localhost")):
		return fmt.Errorf("%q is a loopback name; only public addresses are reached unless the server runs with %s", host, Flag)
	default:
		return nil
	}
	if !allowPrivate && !Public(ip) {
		return fmt.Errorf("%q is a loopback, private, link-local or otherwise non-public address; only public addresses are reached unless the server runs with %s", host, Flag)
	}
	return nil
}

// endsInNumber reports whether host's last label is a number (decimal,
// or 0x and hex digits), which makes it an IPv4 address or nothing, as
// the WHATWG URL standard reads hosts: no top-level domain is a number.
func endsInNumber(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if hex, ok := strings.CutPrefix(last, "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// parseInetAton reads an IPv4 address as inet_aton does: one to four
// parts, each decimal, octal (a leading 0) or hex (0x), the last filling
// the bytes the others left.
func parseInetAton(h string) (netip.Addr, bool) {
	parts := strings.Split(h, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var n uint64
	for i, p := range parts {
		v, ok := parseAtonPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if v > 255 {
				return netip.Addr{}, false
			}
			n |= v << (8 * (3 - i))
			continue
		}
		if rest := 8 * (4 - i); v >= 1<<rest {
			return netip.Addr{}, false
		}
		n |= v
	}
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

func parseAtonPart(p string) (uint64, bool) {
	base := 10
	switch {
	case strings.HasPrefix(p, "0x"):
		p, base = p[2:], 16
		if p == "" {
			return 0, true // "0x" is 0 to inet_aton
		}
	case len(p) > 1 && p[0] == '0':
		p, base = p[1:], 8
	}
	if p == "" {
		return 0, false
	}
	v, err := strconv.ParseUint(p, base, 32)
	return v, err == nil
}

// RefusedError is the refusal of a connection to a non-public address.
type RefusedError struct{ Addr netip.Addr }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refused to connect to %s: a loopback, private, link-local or otherwise non-public address (start the server with %s to allow it)", e.Addr, Flag)
}

// Control is a net.Dialer's Control that refuses each non-public address
// it is about to connect to, after name resolution, so a name resolving
// to one (or re-pointed at one) is refused too.
func Control(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("refused to connect to %q: not an IP address", host)
	}
	if !Public(ip) {
		return &RefusedError{Addr: ip}
	}
	return nil
}

// Dialer returns a dialer with timeout that refuses non-public addresses
// unless allowPrivate. Every outbound connection goes through one.
func Dialer(timeout time.Duration, allowPrivate bool) *net.Dialer {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = Control
	}
	return d
}

// HTTPClient returns an HTTP client whose connections go through Dialer:
// no proxy from the environment, since the address checked must be the
// one connected to (through a proxy it would be the proxy's), and a
// redirect's target is checked like any other connection.
func HTTPClient(timeout time.Duration, allowPrivate bool) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         Dialer(min(timeout, 5*time.Second), allowPrivate).DialContext,
		TLSHandshakeTimeout: min(timeout, 5*time.Second),
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}}
}
