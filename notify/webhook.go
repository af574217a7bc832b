package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/outbound"
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
	// other non-public addresses (--outbound-allow-private): for tests and
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

// NewWebhookSender returns a sender with its own HTTP client under the
// outbound rules of outboundClient.
func NewWebhookSender(cfg WebhookConfig) *WebhookSender {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &WebhookSender{
		client: outboundClient(cfg.Timeout, cfg.AllowPrivate),
		now:    cfg.Now,
		agent:  "airlock-webhooks/" + cfg.Version,
	}
}

// outboundClient is the HTTP client of every sender that reaches an
// address someone else chose (webhooks, push services): no proxy from the
// environment (the address checked is the one connected to), public
// addresses only unless allowPrivate, short timeouts, and no redirects
// followed. A redirect is an answer, not an instruction: following it would
// let a receiver point Airlock at an address it may not reach, and a 3xx is
// not acceptance.
func outboundClient(timeout time.Duration, allowPrivate bool) *http.Client {
	dialer := outbound.Dialer(min(timeout, 5*time.Second), allowPrivate)
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   min(timeout, 5*time.Second),
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
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
	if pe, ok := errors.AsType[*outbound.RefusedError](err); ok {
		return pe
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return errors.New("timed out")
	}
	return err
}

// CheckURL refuses, at creation, a webhook URL whose host the outbound
// rules refuse (a literal non-public address in any spelling, or a
// loopback name), as an invalid_request naming the field.
func CheckURL(raw string, allowPrivate bool) error {
	if err := outbound.CheckURL(raw, allowPrivate); err != nil {
		return airlock.Invalid("url", "url: %v", err)
	}
	return nil
}
