package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/display"
	"github.com/airlockhq/airlock/store"
)

// Web Push (docs/phone.md): each subscription is an endpoint of kind
// push, so a push is a delivery like a webhook's, derived from the
// committed event log, leased, retried with backoff, and one dead push
// service holds only its own worker. What is pushed is built here, at
// the attempt, from the request as it stands: PushMessage and nothing
// more, encrypted for the browser (RFC 8291, aes128gcm) and signed with
// the server's VAPID key (RFC 8292).

// ErrGone is the error of a push the push service answered 404 or 410:
// the subscription has ended (the browser unsubscribed, or the service
// dropped it). The engine deletes such an endpoint.
var ErrGone = errors.New("the push service says the subscription is gone")

// PushStore is what the push sender reads: the request pushed.
type PushStore interface {
	GetRequest(ctx context.Context, id string) (airlock.Request, error)
}

// PushConfig configures a PushSender.
type PushConfig struct {
	Store PushStore
	// Key signs every push (store.PushKeys: one for every replica).
	Key store.VAPIDKey
	// Subject is the VAPID "sub": a mailto: or https: URL a push service
	// may contact about this server.
	Subject string
	// MayPush reports whether the subscriber of e (its CreatedBy) may
	// decide r: only then is r pushed to e.
	MayPush func(ctx context.Context, e airlock.Endpoint, r airlock.Request) (bool, error)
	// AllowPrivate lets pushes reach non-public addresses
	// (--outbound-allow-private), as for webhooks.
	AllowPrivate bool
	// Timeout bounds one attempt (default DefaultTimeout).
	Timeout time.Duration
	// Now tells a push's TTL from its request's deadline (default time.Now).
	Now func() time.Time
}

// PushSender pushes deliveries to browsers' push services.
type PushSender struct {
	cfg    PushConfig
	client *http.Client
	pub    string
	priv   string
}

// NewPushSender returns a sender with its own HTTP client under the
// outbound rules of outboundClient.
func NewPushSender(cfg PushConfig) (*PushSender, error) {
	if err := cfg.Key.Validate(); err != nil {
		return nil, err
	}
	if cfg.MayPush == nil || cfg.Store == nil {
		return nil, errors.New("push sender: Store and MayPush are required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Subject == "" {
		cfg.Subject = "mailto:airlock@localhost"
	}
	return &PushSender{
		cfg:    cfg,
		client: outboundClient(cfg.Timeout, cfg.AllowPrivate),
		pub:    airlock.EncodePushKey(cfg.Key.Public),
		priv:   airlock.EncodePushKey(cfg.Key.Private),
	}, nil
}

// Close closes idle connections.
func (s *PushSender) Close() { s.client.CloseIdleConnections() }

// Send pushes d's request to e if it is still pending and e's subscriber
// may decide it; otherwise it sends nothing and the delivery is done. A
// 2xx is acceptance; 404 and 410 are ErrGone.
func (s *PushSender) Send(ctx context.Context, e airlock.Endpoint, d airlock.Delivery) (int, error) {
	if d.RequestID == "" || !airlock.WantsPush(d.Type) || d.Type == airlock.NotifyTest {
		return 0, nil
	}
	r, err := s.cfg.Store.GetRequest(ctx, d.RequestID)
	if airlock.ErrorCode(err) == airlock.CodeNotFound {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read request %s: %w", d.RequestID, err)
	}
	now := s.cfg.Now()
	if r.State != airlock.StatePending || !now.Before(r.DeadlineAt) {
		return 0, nil // nothing left to decide
	}
	ok, err := s.cfg.MayPush(ctx, e, r)
	if err != nil {
		return 0, fmt.Errorf("who may decide %s: %w", r.ID, err)
	}
	if !ok {
		return 0, nil
	}
	var keys airlock.PushKeys
	if err := json.Unmarshal([]byte(e.Secret), &keys); err != nil {
		return 0, fmt.Errorf("subscription %s: stored keys: %w", e.ID, err)
	}
	// A push the reviewer could no longer act on is not worth keeping:
	// the push service drops it at the deadline.
	ttl := max(int(r.DeadlineAt.Sub(now)/time.Second), 1)
	resp, err := webpush.SendNotificationWithContext(ctx, PushMessage(r).Marshal(),
		&webpush.Subscription{Endpoint: e.URL, Keys: webpush.Keys{P256dh: keys.P256DH, Auth: keys.Auth}},
		&webpush.Options{HTTPClient: s.client, Subscriber: s.cfg.Subject, VAPIDPublicKey: s.pub, VAPIDPrivateKey: s.priv,
			TTL: ttl, Urgency: webpush.UrgencyHigh, VapidExpiration: now.Add(12 * time.Hour)})
	if err != nil {
		return 0, describe(err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return resp.StatusCode, fmt.Errorf("HTTP %d: %w", resp.StatusCode, ErrGone)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return resp.StatusCode, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// PushMessage is what is pushed of r: airlock.NewPushMessage, its tool
// shown as the inbox shows a one-line field, with every invisible,
// bidirectional or line-breaking character a visible marker, since a
// lock screen is no place to hide part of a tool's name.
func PushMessage(r airlock.Request) airlock.PushMessage {
	r.Tool = display.Visible(r.Tool)
	return airlock.NewPushMessage(r)
}
