package outbound_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/outbound"
	"github.com/airlockhq/airlock/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// TestPublic: every non-public range is refused, IPv4-compatible and
// IPv4-translated IPv6 forms among them; public addresses pass.
func TestPublic(t *testing.T) {
	t.Parallel()
	for _, a := range []string{
		"127.0.0.1", "127.255.255.254", "::1", "10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.255",
		"192.168.0.1", "192.168.255.255", "169.254.169.254", "169.254.0.1", "fe80::1", "fc00::1", "fd00:ec2::254",
		"0.0.0.0", "::", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "100.64.0.1", "224.0.0.1",
		"ff02::1", "192.0.0.192", "198.18.0.1", "240.0.0.1", "255.255.255.255", "64:ff9b::a00:1", "2001:db8::1",
		// IPv4-compatible (::/96) and IPv4-translated (::ffff:0:0:0/96).
		"::127.0.0.1", "::169.254.169.254", "::8.8.8.8", "::ffff:0:127.0.0.1", "::ffff:0:10.0.0.1", "::ffff:0:8.8.8.8",
	} {
		if outbound.Public(netip.MustParseAddr(a)) {
			t.Errorf("%s counts as public", a)
		}
	}
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "172.32.0.1", "100.128.0.1", "::ffff:8.8.8.8"} {
		if !outbound.Public(netip.MustParseAddr(a)) {
			t.Errorf("%s counts as private", a)
		}
	}
}

// TestCheckHost reads hosts as resolvers do: inet_aton's spellings of a
// number, names in any case and with a trailing dot.
func TestCheckHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		host string
		says string // "" when accepted
	}{
		{"2130706433", "the IPv4 address 127.0.0.1 spelled"},
		{"0x7f000001", "the IPv4 address 127.0.0.1 spelled"},
		{"0X7F000001", "the IPv4 address 127.0.0.1 spelled"},
		{"0177.0.0.1", "the IPv4 address 127.0.0.1 spelled"},
		{"017700000001", "the IPv4 address 127.0.0.1 spelled"},
		{"127.1", "the IPv4 address 127.0.0.1 spelled"},
		{"127.0.1", "the IPv4 address 127.0.0.1 spelled"},
		{"0", "the IPv4 address 0.0.0.0 spelled"},
		{"0x", "the IPv4 address 0.0.0.0 spelled"},
		{"0xa9fea9fe", "the IPv4 address 169.254.169.254 spelled"},
		{"10.0.0.010", "the IPv4 address 10.0.0.8 spelled"},
		// Public, but spelled so resolvers disagree: refused all the same.
		{"134744072", "the IPv4 address 8.8.8.8 spelled"},
		{"08.0.0.1", "ends in a number but is not an IPv4 address"},
		{"256.0.0.1", "ends in a number but is not an IPv4 address"},
		{"1.2.3.4.5", "ends in a number but is not an IPv4 address"},
		{"127.16777216", "ends in a number but is not an IPv4 address"},
		{"4294967296", "ends in a number but is not an IPv4 address"},
		{"hooks.example.123", "ends in a number but is not an IPv4 address"},
		{"127.0.0.1", "non-public address"},
		{"127.0.0.1.", "non-public address"},
		{"::127.0.0.1", "non-public address"},
		{"::ffff:0:7f00:1", "non-public address"},
		{"fe80::1%eth0", "non-public address"},
		{"LOCALHOST", "loopback name"},
		{"localhost.", "loopback name"},
		{"localhost..", "loopback name"},
		{"x.LocalHost.", "loopback name"},
		{"", "no host"},
		{".", "no host"},
		{"8.8.8.8", ""},
		{"2606:4700:4700::1111", ""},
		{"hooks.example.com", ""},
		{"hooks.example.com.", ""},
		{"0x7g000001", ""}, // a name: its last label is no number
		{"localhost.example.com", ""},
	} {
		err := outbound.CheckHost(tc.host, false)
		if tc.says == "" && err != nil || tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)) {
			t.Errorf("CheckHost(%q) = %v, want %q", tc.host, err, tc.says)
		}
	}
	// --outbound-allow-private lifts the address rules, not the refusal
	// of spellings resolvers disagree on.
	for _, h := range []string{"127.0.0.1", "localhost.", "::127.0.0.1", "10.1.2.3"} {
		if err := outbound.CheckHost(h, true); err != nil {
			t.Errorf("CheckHost(%q, allow private) = %v", h, err)
		}
	}
	if err := outbound.CheckHost("127.1", true); err == nil {
		t.Errorf("CheckHost(127.1, allow private) accepted a spelling resolvers disagree on")
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"http://127.0.0.1/", "https://[::1]:8443/x", "http://10.1.2.3/", "http://169.254.169.254/latest/meta-data/",
		"http://localhost:8080/", "http://api.localhost/", "http://[::ffff:192.168.1.1]/", "http://[fd00:ec2::254]/",
		"http://[::127.0.0.1]:9/", "http://%6c%6fcalhost/", "http://u@2130706433/", "https://slack.com@127.1/api/",
	} {
		if err := outbound.CheckURL(u, false); err == nil {
			t.Errorf("CheckURL(%s) accepted", u)
		}
	}
	for _, u := range []string{"https://hooks.example.com/x", "http://8.8.8.8/", "https://slack.com/api/"} {
		if err := outbound.CheckURL(u, false); err != nil {
			t.Errorf("CheckURL(%s) = %v", u, err)
		}
	}
}

// TestControl is the dial-time check on the address a name resolved to:
// what a resolver may answer for any name, IPv4-compatible and
// IPv4-translated forms of loopback and metadata addresses included.
func TestControl(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{
		"[::127.0.0.1]:80", "[::7f00:1]:443", "[::169.254.169.254]:80", "[::ffff:0:127.0.0.1]:80",
		"[::ffff:0:a9fe:a9fe]:80", "[::ffff:127.0.0.1]:80", "127.0.0.1:80", "[::1]:80", "169.254.169.254:80", "[::]:80",
	} {
		err := outbound.Control("tcp", addr, nil)
		if _, ok := errors.AsType[*outbound.RefusedError](err); !ok {
			t.Errorf("Control(%s) = %v, want a refusal", addr, err)
		}
	}
	for _, addr := range []string{"8.8.8.8:443", "[2606:4700:4700::1111]:443"} {
		if err := outbound.Control("tcp", addr, nil); err != nil {
			t.Errorf("Control(%s) = %v", addr, err)
		}
	}
}

// TestDialerRefuses: the dialer refuses before connecting, so a listener
// on loopback gets no connection; with allowPrivate it does.
func TestDialerRefuses(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	ctx := context.Background()
	for _, host := range []string{"127.0.0.1", "localhost", "::127.0.0.1", "::ffff:0:127.0.0.1"} {
		conn, err := outbound.Dialer(time.Second, false).DialContext(ctx, "tcp", net.JoinHostPort(host, port))
		if conn != nil {
			conn.Close()
		}
		if _, ok := errors.AsType[*outbound.RefusedError](err); !ok {
			t.Errorf("dial %s: %v, want a refusal", host, err)
		}
	}
	resp, err := outbound.HTTPClient(time.Second, false).Get(srv.URL)
	if err == nil {
		resp.Body.Close()
	}
	if _, ok := errors.AsType[*outbound.RefusedError](err); !ok {
		t.Errorf("HTTPClient GET %s: %v, want a refusal", srv.URL, err)
	}
	if hits.Load() != 0 {
		t.Fatalf("the loopback listener got %d requests", hits.Load())
	}
	resp, err = outbound.HTTPClient(time.Second, true).Get(srv.URL)
	if err != nil {
		t.Fatalf("with allowPrivate: %v", err)
	}
	resp.Body.Close()
	if hits.Load() != 1 {
		t.Fatalf("with allowPrivate the listener got %d requests", hits.Load())
	}
}
