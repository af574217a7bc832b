package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/airlockhq/airlock"
)

// DefaultTimeout bounds one webhook attempt, connection to last byte of
// the answer's headers: a slow receiver fails and is retried later, and
// never holds a worker for long.
const DefaultTimeout = 10 * time.Second

// maxAnswer is how much of a receiver's answer body is read: nothing in it
// matters beyond the status, and a hostile receiver must not make Airlock
// read without end.
const maxAnswer = 64 << 10

// Sender attempts one delivery to an endpoint of its kind. Status is the
// receiver's answer (0 when none came); err is nil only when the endpoint
// accepted the delivery.
type Sender interface {
	Send(ctx context.Context, e airlock.Endpoint, d airlock.Delivery) (status int, err error)
}

// WebhookSender POSTs deliveries as Standard Webhooks.
type WebhookSender struct {
	client *http.Client
	now    func() time.Time
	agent  string
}

// WebhookConfig configures a WebhookSender.
type WebhookConfig struct {
	// AllowPrivate lets webhooks reach loopback, private, link-local and
	// other non-public addresses (--webhook-allow-private): for tests and
	// receivers on the same network. Off, such a connection is refused
	// after the name is resolved, so a name resolving to one is refused too.
	AllowPrivate bool
	// Timeout bounds one attempt (default DefaultTimeout).
	Timeout time.Duration
	// Now stamps webhook-timestamp (default time.Now).
	Now func() time.Time
	// Version goes in the User-Agent.
	Version string
}

// NewWebhookSender returns a sender with its own HTTP client: no proxy
// from the environment (the address checked is the one connected to), no
// redirects followed, short timeouts.
func NewWebhookSender(cfg WebhookConfig) *WebhookSender {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	dialer := &net.Dialer{Timeout: min(cfg.Timeout, 5*time.Second), KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivate {
		dialer.Control = refusePrivate
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   min(cfg.Timeout, 5*time.Second),
		ResponseHeaderTimeout: cfg.Timeout,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &WebhookSender{
		client: &http.Client{
			Transport: tr,
			Timeout:   cfg.Timeout,
			// A redirect is an answer, not an instruction: following it
			// would let a receiver point Airlock at an address it may not
			// reach, and a 3xx is not acceptance.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		now:   cfg.Now,
		agent: "airlock-webhooks/" + cfg.Version,
	}
}

// Close closes idle connections.
func (s *WebhookSender) Close() { s.client.CloseIdleConnections() }

// Send POSTs d's payload to e's URL, signed with e's secret. Any 2xx is
// acceptance.
func (s *WebhookSender) Send(ctx context.Context, e airlock.Endpoint, d airlock.Delivery) (int, error) {
	ts := s.now().Unix()
	sig, err := Sign(e.Secret, d.MessageID, ts, d.Payload)
	if err != nil {
		return 0, fmt.Errorf("endpoint %s: %w", e.ID, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(d.Payload))
	if err != nil {
		return 0, errors.New("the endpoint's URL cannot be requested")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.agent)
	req.Header.Set(HeaderID, d.MessageID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, sig)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, describe(err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		if loc := resp.Header.Get("Location"); resp.StatusCode >= 300 && resp.StatusCode < 400 && loc != "" {
			return resp.StatusCode, fmt.Errorf("HTTP %d: redirects are not followed; give the webhook its final URL", resp.StatusCode)
		}
		return resp.StatusCode, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// describe says why an attempt got no answer, without the URL: a URL may
// carry a token in its query, and attempts are shown and logged.
func describe(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	if pe, ok := errors.AsType[*PrivateAddressError](err); ok {
		return pe
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return errors.New("timed out")
	}
	return err
}

// PrivateAddressError is the refusal of a connection to an address
// webhooks may not reach.
type PrivateAddressError struct{ Addr netip.Addr }

func (e *PrivateAddressError) Error() string {
	return fmt.Sprintf("refused to connect to %s: a loopback, private, link-local or otherwise non-public address (start the server with --webhook-allow-private to allow it)", e.Addr)
}

// refusePrivate is the dialer's check of each address it is about to
// connect to, after name resolution, so a name that resolves to a
// private address (or is re-pointed at one) is refused too.
func refusePrivate(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("refused to connect to %q: not an IP address", host)
	}
	if !Public(ip) {
		return &PrivateAddressError{Addr: ip}
	}
	return nil
}

// nonPublic are ranges that IsPrivate and friends leave out and that no
// public receiver has: "this network", carrier-grade NAT, IETF protocol
// assignments, documentation, benchmarking, reserved, and IPv6 NAT64 and
// documentation prefixes.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("100::/64"),
}

// Public reports whether webhooks may reach ip without
// --webhook-allow-private: not loopback, private (10/8, 172.16/12,
// 192.168/16, fc00::/7 — which holds cloud metadata's fd00:ec2::254),
// link-local (169.254/16, where cloud metadata answers, and fe80::/10),
// multicast, unspecified, or another non-public range. An IPv4-mapped
// IPv6 address is judged as its IPv4 address.
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

// CheckURL refuses, at creation, a webhook URL whose host is a literal
// non-public address or a loopback name, unless allowPrivate. Other names
// are checked where they resolve, at each connection.
func CheckURL(raw string, allowPrivate bool) error {
	if allowPrivate {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return airlock.Invalid("url", "url is not a URL")
	}
	host := u.Hostname()
	if host == "localhost" || len(host) > len(".localhost") && host[len(host)-len(".localhost"):] == ".localhost" {
		return airlock.Invalid("url", "url %q is a loopback name; webhooks reach public addresses only unless the server runs with --webhook-allow-private", host)
	}
	if ip, err := netip.ParseAddr(host); err == nil && !Public(ip) {
		return airlock.Invalid("url", "url %q is a loopback, private, link-local or otherwise non-public address; webhooks reach public addresses only unless the server runs with --webhook-allow-private", host)
	}
	return nil
}
