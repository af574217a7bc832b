package airlock

import (
	"crypto/ecdh"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Web Push (docs/phone.md): a reviewer's browser subscribes to pushes,
// and each new pending request the reviewer may decide, each reminder
// and each escalation is pushed to it. A subscription is an endpoint of
// kind EndpointPush, so it shares the webhooks' queue, retries and
// leases: one delivery per subscription and event, derived from the
// committed event log. A push carries only PushMessage: no arguments,
// reasoning, context or notes ever leave through a push service.

// EndpointPush is one browser's Web Push subscription: its URL is the
// push service's endpoint, its Secret the browser's keys (PushKeys as
// JSON), its CreatedBy the subscriber's caller ID.
const EndpointPush EndpointKind = "push"

// PrefixPushSubscription starts every push subscription's ID.
const PrefixPushSubscription = "psh_"

// PushTypes are the notifications pushed: a request to decide, its
// reminder, and its escalation.
var PushTypes = []NotifyType{NotifyCreated, NotifyReminder, NotifyEscalated}

// Limits of a push subscription.
const (
	// MaxPushSubscriptionsPerCaller bounds how many browsers one caller
	// subscribes.
	MaxPushSubscriptionsPerCaller = 20
	// MaxPushKey bounds the base64 of p256dh and auth.
	MaxPushKey = 256
)

// EventVAPIDKeyCreated is appended when the server's VAPID key pair is
// created, at the first start; its Subject is the public key.
const EventVAPIDKeyCreated EventType = "vapid_key.created"

// PushKeys are a browser subscription's keys (RFC 8291): P256DH is its
// P-256 public key (uncompressed, base64url), Auth its 16-byte
// authentication secret (base64url).
type PushKeys struct {
	P256DH string `json:"p256dh"`
	Auth   string `json:"auth"`
}

// PushSubscriptionInput is the body of POST /v1/push/subscriptions: what
// the browser's PushSubscription.toJSON() gives.
type PushSubscriptionInput struct {
	Endpoint string `json:"endpoint"`
	// ExpirationTime is what browsers send alongside; it is not kept.
	ExpirationTime *float64 `json:"expirationTime,omitempty"`
	Keys           PushKeys `json:"keys"`
}

// Validate refuses a subscription nothing could be pushed to: an
// endpoint that is not an https URL (push services are reached over
// TLS only) or keys that are not a P-256 public key and a 16-byte
// secret. Where the endpoint's host resolves to is checked at each
// connection (docs/notifications.md, SSRF), unless the server allows
// private addresses.
func (in PushSubscriptionInput) Validate(allowHTTP bool) error {
	if len(in.Endpoint) > MaxEndpointURL {
		return Invalid("endpoint", "endpoint is %d bytes; at most %d", len(in.Endpoint), MaxEndpointURL)
	}
	u, err := url.Parse(in.Endpoint)
	switch {
	case err != nil:
		return Invalid("endpoint", "endpoint is not a URL: %v", err)
	case u.Scheme != "https" && !(allowHTTP && u.Scheme == "http"):
		return Invalid("endpoint", "endpoint must be https://, not %q", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return Invalid("endpoint", "endpoint needs a host")
	case u.User != nil:
		return Invalid("endpoint", "endpoint must not carry a user or password")
	case strings.Contains(in.Endpoint, "#"):
		return Invalid("endpoint", "endpoint must not have a #fragment")
	}
	if len(in.Keys.P256DH) > MaxPushKey || len(in.Keys.Auth) > MaxPushKey {
		return Invalid("keys", "keys.p256dh and keys.auth are at most %d bytes each", MaxPushKey)
	}
	pub, err := DecodePushKey(in.Keys.P256DH)
	if err != nil {
		return Invalid("keys.p256dh", "keys.p256dh is not base64url: %v", err)
	}
	if _, err := ecdh.P256().NewPublicKey(pub); err != nil {
		return Invalid("keys.p256dh", "keys.p256dh is not an uncompressed P-256 public key")
	}
	auth, err := DecodePushKey(in.Keys.Auth)
	if err != nil {
		return Invalid("keys.auth", "keys.auth is not base64url: %v", err)
	}
	if len(auth) != 16 {
		return Invalid("keys.auth", "keys.auth has %d bytes, not 16", len(auth))
	}
	return nil
}

// DecodePushKey reads a key as browsers write them: base64url, padded or
// not (standard base64 is accepted too, as some libraries write it).
func DecodePushKey(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "+/") {
		return base64.RawStdEncoding.DecodeString(s)
	}
	return base64.RawURLEncoding.DecodeString(s)
}

// PushSubscription is a subscription as the API shows it: never its keys.
type PushSubscription struct {
	ID        string    `json:"id"`
	Endpoint  string    `json:"endpoint"`
	CreatedAt time.Time `json:"created_at"`
}

// PushSubscriptionOf returns the subscription an endpoint of kind
// EndpointPush is.
func PushSubscriptionOf(e Endpoint) PushSubscription {
	return PushSubscription{ID: e.ID, Endpoint: e.URL, CreatedAt: e.CreatedAt}
}

// PushMessage is all a push carries: which request, which tool, and by
// when. Never the arguments, the agent's reasoning, the context or a
// note: a push crosses a push service the reviewer's organisation does
// not run, and it is shown on a lock screen. The notification opens the
// request page, where a signed-in reviewer sees the rest.
type PushMessage struct {
	RequestID  string    `json:"request_id"`
	Tool       string    `json:"tool"`
	DeadlineAt time.Time `json:"deadline_at"`
}

// MaxPushTool bounds the tool name a push carries: push services take
// about 4 KB, and a lock screen shows far less.
const MaxPushTool = 200

// NewPushMessage returns r's push: its ID, tool (cut to MaxPushTool bytes
// on a character boundary) and deadline.
func NewPushMessage(r Request) PushMessage {
	tool := r.Tool
	if len(tool) > MaxPushTool {
		cut := MaxPushTool
		for cut > 0 && !utf8Start(tool[cut]) {
			cut--
		}
		tool = tool[:cut]
	}
	return PushMessage{RequestID: r.ID, Tool: tool, DeadlineAt: r.DeadlineAt.UTC()}
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// Marshal returns m as JSON: exactly {request_id, tool, deadline_at}.
func (m PushMessage) Marshal() []byte {
	b, _ := json.Marshal(m)
	return b
}

// WantsPush reports whether a push subscription gets notification t.
func WantsPush(t NotifyType) bool { return t == NotifyTest || slices.Contains(PushTypes, t) }

// EncodePushKey writes a key as browsers and the Web Push specifications
// do: base64url without padding.
func EncodePushKey(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
