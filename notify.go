package airlock

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Notifications (docs/notifications.md): what reaches a reviewer who is
// not watching. Every notification is derived from the committed audit
// log: a fan-out step turns events into deliveries, one per subscribed
// endpoint and event, and a worker attempts each delivery under a lease
// until the endpoint accepts it. Endpoints have a kind (a webhook today);
// each kind has its own sender, and all share the queue, the retries and
// the leases.

// EndpointKind names how an endpoint is reached.
type EndpointKind string

// Endpoint kinds.
const (
	// EndpointWebhook is a URL that receives Standard Webhooks POSTs.
	EndpointWebhook EndpointKind = "webhook"
	// EndpointSlack is the Slack channel of --slack-channel: one endpoint,
	// SlackEndpointID, that the server creates when Slack is configured.
	EndpointSlack EndpointKind = "slack"
)

// EndpointEmail mails linked reviewers (--smtp-url): one endpoint,
// EmailEndpointID, that the server creates when SMTP is configured.
const EndpointEmail EndpointKind = "email"

// EmailEndpointID is the ID of the one email endpoint.
const EmailEndpointID = PrefixEndpoint + "email"

// EmailTypes are the notifications mailed: a request to decide, and its
// reminder.
var EmailTypes = []NotifyType{NotifyCreated, NotifyReminder, NotifyEscalated}

// SlackEndpointID is the ID of the one Slack endpoint. A fixed ID makes
// replicas starting together create it once.
const SlackEndpointID = PrefixEndpoint + "slack"

// SlackTypes are the notifications the Slack endpoint takes: a request to
// post, and the ends and escalations that update its message.
var SlackTypes = []NotifyType{NotifyCreated, NotifyReminder, NotifyApproved, NotifyDenied, NotifyExpired, NotifyCancelled, NotifyEscalated}

// PrefixEndpoint starts every endpoint ID; PrefixDelivery every delivery
// ID; PrefixMessage every webhook-id of a test delivery.
const (
	PrefixEndpoint = "whk_"
	PrefixDelivery = "dlv_"
	PrefixMessage  = "msg_"
)

// WebhookSecretPrefix starts every webhook signing secret, as the Standard
// Webhooks specification writes them: "whsec_" and the base64 key.
const WebhookSecretPrefix = "whsec_"

// NotifyType names what a notification tells: the "type" of a webhook's
// body.
type NotifyType string

// Notification types. Each but NotifyTest comes from one audit event type.
const (
	NotifyCreated           NotifyType = "approval_request.created"
	NotifyApproved          NotifyType = "approval_request.approved"
	NotifyDenied            NotifyType = "approval_request.denied"
	NotifyExpired           NotifyType = "approval_request.expired"
	NotifyCancelled         NotifyType = "approval_request.cancelled"
	NotifyReminder          NotifyType = "approval_request.reminder"
	NotifyEscalated         NotifyType = "approval_request.escalated"
	NotifyExecutionClaimed  NotifyType = "approval_request.execution_claimed"
	NotifyExecutionReported NotifyType = "approval_request.execution_reported"
	// NotifyTest is what POST /v1/webhooks/{id}/test sends; every endpoint
	// gets it whatever its filter.
	NotifyTest NotifyType = "webhook.test"
	// NotifyCheckpoint carries each new signed checkpoint of the audit
	// log (docs/audit.md), so that others keep them. It comes from no
	// event: checkpoints are not events (store.AuditLog.SaveCheckpoint).
	NotifyCheckpoint NotifyType = "audit.checkpoint"
)

// NotifyTypes lists the types an endpoint may subscribe to, in order.
var NotifyTypes = []NotifyType{
	NotifyCreated, NotifyApproved, NotifyDenied, NotifyExpired, NotifyCancelled,
	NotifyReminder, NotifyExecutionClaimed, NotifyExecutionReported, NotifyEscalated,
	NotifyCheckpoint,
}

// CheckpointMessageID is the webhook-id of the audit.checkpoint delivery
// of the checkpoint of a tree of size leaves: one checkpoint, one message,
// whichever endpoint and attempt, so a receiver drops a repeat.
func CheckpointMessageID(size int64) string {
	return PrefixMessage + "checkpoint_" + strconv.FormatInt(size, 10)
}

// EventRequestReminder is appended once per request, when a reminder of
// its coming deadline is due (Store.RemindDue).
const EventRequestReminder EventType = "request.reminder"

// ActorNotify is the actor of what the notification worker records:
// reminders, and endpoints disabled for failing.
const ActorNotify = "system:notify"

// Audit events of endpoints: Subject is the endpoint's ID.
const (
	EventEndpointCreated  EventType = "endpoint.created"
	EventEndpointDeleted  EventType = "endpoint.deleted"
	EventEndpointDisabled EventType = "endpoint.disabled"
	EventEndpointEnabled  EventType = "endpoint.enabled"
)

// NotifyTypeOf returns the notification an audit event gives, if any.
func NotifyTypeOf(t EventType) (NotifyType, bool) {
	switch t {
	case EventRequestCreated:
		return NotifyCreated, true
	case EventRequestApproved:
		return NotifyApproved, true
	case EventRequestDenied:
		return NotifyDenied, true
	case EventRequestExpired:
		return NotifyExpired, true
	case EventRequestCancelled:
		return NotifyCancelled, true
	case EventRequestReminder:
		return NotifyReminder, true
	case EventRequestEscalated:
		return NotifyEscalated, true
	case EventExecutionClaimed:
		return NotifyExecutionClaimed, true
	case EventExecutionReported:
		return NotifyExecutionReported, true
	}
	return "", false
}

// Endpoint is where notifications go.
type Endpoint struct {
	Seq  int64
	ID   string
	Kind EndpointKind
	URL  string
	// Events are the types a webhook subscribes to; none means all. The
	// Slack and email endpoints, which the server manages, take the types
	// their code handles (SlackTypes, EmailTypes) whatever was stored at
	// their creation: see Wants.
	Events      []NotifyType
	Description string
	// Secret signs what the endpoint receives (a webhook's "whsec_…"). It
	// is stored as it is, not hashed, since signing needs it; the API shows
	// it once, at creation.
	Secret    string
	CreatedAt time.Time
	CreatedBy string
	// AfterEvent is the last audit event ID before the endpoint existed:
	// it receives the events after it. The store sets it at creation.
	AfterEvent int64
	// FailingSince is when the current run of failed attempts began; nil
	// after a success.
	FailingSince *time.Time
	// DisabledAt is when the endpoint was disabled for failing too long;
	// a disabled endpoint receives nothing more.
	DisabledAt     *time.Time
	DisabledReason string
}

// FailedSince is when the run of failures that disabled e began: its
// FailingSince, or when it was disabled if it has none. Enabling e queues
// again the deliveries that run failed (EnableEndpoint). It is for a
// disabled endpoint only (DisabledAt set).
func (e Endpoint) FailedSince() time.Time {
	if e.FailingSince != nil {
		return *e.FailingSince
	}
	return *e.DisabledAt
}

// Wants reports whether e subscribes to t. The Slack and email
// endpoints want the types of today's SlackTypes and EmailTypes (push
// subscriptions those of PushTypes), not the
// list stored when they were created: an endpoint made before a type
// existed (approval_request.escalated, say) gets it with the code that
// handles it, with no data migration, and nobody edits their types.
// audit.checkpoint goes only to a webhook that lists it: it is about the
// log, not a request, and a receiver that took every request's type
// before it existed is not sent a new kind of body unasked.
func (e Endpoint) Wants(t NotifyType) bool {
	if t == NotifyCheckpoint {
		return e.Kind == EndpointWebhook && slices.Contains(e.Events, t)
	}
	switch e.Kind {
	case EndpointSlack:
		return t == NotifyTest || slices.Contains(SlackTypes, t)
	case EndpointEmail:
		return t == NotifyTest || slices.Contains(EmailTypes, t)
	case EndpointPush:
		return WantsPush(t)
	}
	return t == NotifyTest || len(e.Events) == 0 || slices.Contains(e.Events, t)
}

// Limits of an endpoint's fields.
const (
	MaxEndpointURL         = 2048
	MaxEndpointDescription = 500
)

// WebhookInput is what an admin sends to create a webhook endpoint.
type WebhookInput struct {
	URL         string       `json:"url"`
	Events      []NotifyType `json:"events,omitempty"`
	Description string       `json:"description,omitempty"`
}

// Validate refuses a webhook no sender could deliver to: a URL that is not
// absolute http(s) with a host, carries credentials or a fragment, or is
// too long; an unknown or repeated event type; a description too long.
// Where the URL's host resolves to is checked at each connection
// (docs/notifications.md, SSRF).
func (in WebhookInput) Validate() error {
	if len(in.URL) > MaxEndpointURL {
		return Invalid("url", "url is %d bytes; at most %d", len(in.URL), MaxEndpointURL)
	}
	u, err := url.Parse(in.URL)
	switch {
	case err != nil:
		return Invalid("url", "url is not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return Invalid("url", "url must be http:// or https://, not %q", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return Invalid("url", "url needs a host")
	case u.User != nil:
		return Invalid("url", "url must not carry a user or password; authenticate the receiver by the signature")
	case u.Fragment != "" || strings.Contains(in.URL, "#"):
		return Invalid("url", "url must not have a #fragment")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return Invalid("url", "url port %q is not 1..65535", p)
		}
	}
	for i, t := range in.Events {
		if !slices.Contains(NotifyTypes, t) {
			return Invalid("events", "unknown event type %q; use one of %v", t, NotifyTypes)
		}
		if slices.Contains(in.Events[:i], t) {
			return Invalid("events", "event type %q is listed twice", t)
		}
	}
	if err := CheckText("url", in.URL, 1, MaxEndpointURL); err != nil {
		return err
	}
	return CheckText("description", in.Description, 0, MaxEndpointDescription)
}

// NewWebhookSecret returns a fresh signing secret: "whsec_" and 32 random
// bytes in standard base64, as Standard Webhooks libraries read it.
func NewWebhookSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return WebhookSecretPrefix + base64.StdEncoding.EncodeToString(b[:])
}

// DeliveryState is where a delivery stands.
type DeliveryState string

// Delivery states.
const (
	DeliveryPending   DeliveryState = "pending"   // to be attempted at NextAttemptAt
	DeliveryDelivered DeliveryState = "delivered" // the endpoint accepted it
	DeliveryFailed    DeliveryState = "failed"    // every retry failed, or its endpoint was disabled
)

// Delivery is one notification to one endpoint: an event (or a test) and
// its attempts.
type Delivery struct {
	Seq        int64
	ID         string
	EndpointID string
	// EventID is the audit event delivered; 0 for a test.
	EventID int64
	// MessageID is the webhook-id header: the same for every attempt and
	// for every endpoint receiving the same event, so receivers can drop
	// duplicates by it.
	MessageID string
	Type      NotifyType
	RequestID string
	// Payload is the body, fixed when the delivery was queued, so every
	// attempt sends the same bytes.
	Payload       []byte
	State         DeliveryState
	Attempts      []DeliveryAttempt
	CreatedAt     time.Time
	NextAttemptAt time.Time
	// LeaseHolder and LeaseUntil: who is attempting the delivery now, and
	// until when others must leave it alone.
	LeaseHolder string
	LeaseUntil  *time.Time
	// TraceID and SpanID are those of the event delivered (Event.TraceID,
	// SpanID), for the link of the attempt's span to it: set by the
	// fan-out on the deliveries it hands its own workers; not kept by
	// stores, so a delivery leased later is attempted unlinked.
	TraceID, SpanID string
}

// DeliveryAttempt is one try.
type DeliveryAttempt struct {
	At time.Time `json:"at"`
	// Status is the HTTP status the endpoint answered; 0 when none came.
	Status  int           `json:"status,omitempty"`
	Latency time.Duration `json:"latency_ns"`
	Error   string        `json:"error,omitempty"`
}

// MessageIDFor is the webhook-id of ev's deliveries: "msg_" and the
// event's UID, the same for every endpoint and every attempt, and never
// the same for two events, even after a restore from a backup hands
// their sequence numbers out again. Events appended before stores drew
// UIDs keep the webhook-id they had, "msg_" and their ID.
func MessageIDFor(ev Event) string {
	if ev.UID != "" {
		return PrefixMessage + ev.UID
	}
	return PrefixMessage + strconv.FormatInt(ev.ID, 10)
}

// DeliveryOutcome is what an attempt leads to.
type DeliveryOutcome string

// Delivery outcomes.
const (
	OutcomeDelivered DeliveryOutcome = "delivered"
	OutcomeRetry     DeliveryOutcome = "retry"
	OutcomeFailed    DeliveryOutcome = "failed" // no retry left
)

// State is the state a delivery takes after an attempt with outcome o;
// invalid_request for an unknown outcome.
func (o DeliveryOutcome) State() (DeliveryState, error) {
	switch o {
	case OutcomeDelivered:
		return DeliveryDelivered, nil
	case OutcomeFailed:
		return DeliveryFailed, nil
	case OutcomeRetry:
		return DeliveryPending, nil
	}
	return "", Invalid("outcome", "unknown delivery outcome %q", o)
}

// RemindBefore says when a reminder of a pending request is due: Fraction
// of its window, or Before, ahead of its deadline (the larger lead wins
// when both are set).
type RemindBefore struct {
	Fraction float64
	Before   time.Duration
}

// IsZero reports whether no reminder is asked for.
func (r RemindBefore) IsZero() bool { return r.Fraction <= 0 && r.Before <= 0 }

// String writes r as ParseRemindBefore reads it.
func (r RemindBefore) String() string {
	switch {
	case r.Fraction > 0:
		return strconv.FormatFloat(r.Fraction*100, 'f', -1, 64) + "%"
	case r.Before > 0:
		return r.Before.String()
	}
	return ""
}

// Due returns when the reminder of a request created at created with
// deadline deadline is due.
func (r RemindBefore) Due(created, deadline time.Time) time.Time {
	lead := max(r.Before, time.Duration(float64(deadline.Sub(created))*r.Fraction))
	return deadline.Add(-lead)
}

// ParseRemindBefore reads "25%" (a share of each request's window, 1..99)
// or a duration ("10m"); "" or "0" is no reminder.
func ParseRemindBefore(s string) (RemindBefore, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return RemindBefore{}, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f < 1 || f > 99 {
			return RemindBefore{}, fmt.Errorf("remind-before %q: a percentage must be 1%%..99%% of the request's window", s)
		}
		return RemindBefore{Fraction: f / 100}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return RemindBefore{}, fmt.Errorf("remind-before %q: want a duration such as 10m or a percentage such as 25%%", s)
	}
	return RemindBefore{Before: d}, nil
}
