package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/airlockhq/airlock"
)

// Webhook is a webhook endpoint as listed (never with its secret).
type Webhook struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	// Events are the types it receives; empty means all.
	Events      []airlock.NotifyType `json:"events"`
	Description string               `json:"description,omitempty"`
	CreatedAt   time.Time            `json:"created_at"`
	CreatedBy   string               `json:"created_by,omitempty"`
	// Enabled is false once the endpoint was disabled for failing too
	// long; it then receives nothing more.
	Enabled        bool       `json:"enabled"`
	FailingSince   *time.Time `json:"failing_since,omitempty"`
	DisabledAt     *time.Time `json:"disabled_at,omitempty"`
	DisabledReason string     `json:"disabled_reason,omitempty"`
}

// CreatedWebhook is a new webhook endpoint with its signing secret, which
// the server shows only in this answer.
type CreatedWebhook struct {
	Webhook
	Secret string `json:"secret"`
}

// Delivery is one notification to one webhook endpoint, with its attempts.
type Delivery struct {
	ID        string `json:"id"`
	WebhookID string `json:"webhook_id"`
	// MessageID is the webhook-id header, the receivers' key to drop
	// duplicates by.
	MessageID     string                `json:"message_id"`
	Type          string                `json:"type"`
	EventID       int64                 `json:"event_id,omitempty"`
	RequestID     string                `json:"request_id,omitempty"`
	State         airlock.DeliveryState `json:"state"`
	CreatedAt     time.Time             `json:"created_at"`
	NextAttemptAt *time.Time            `json:"next_attempt_at,omitempty"`
	Attempts      []DeliveryAttempt     `json:"attempts"`
}

// DeliveryAttempt is one try of a delivery.
type DeliveryAttempt struct {
	At time.Time `json:"at"`
	// Status is the HTTP status the endpoint answered; 0 when none came.
	Status    int     `json:"status,omitempty"`
	LatencyMS float64 `json:"latency_ms"`
	Error     string  `json:"error,omitempty"`
}

// DeliveryPage is one page of deliveries, newest first.
type DeliveryPage struct {
	Items []Delivery `json:"items"`
	// NextCursor fetches the next page; empty on the last.
	NextCursor string `json:"next_cursor,omitempty"`
}

// CreateWebhook creates a webhook endpoint (admins). The signing secret is
// in this answer only. It is not retried on network errors, which could
// create two.
func (c *Client) CreateWebhook(ctx context.Context, in airlock.WebhookInput) (*CreatedWebhook, error) {
	body, err := airlock.EncodeJSON(in)
	if err != nil {
		return nil, fmt.Errorf("create webhook: %w", err)
	}
	var w CreatedWebhook
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/webhooks", body: body, want: []int{http.StatusCreated}}, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// ListWebhooks lists the webhook endpoints, oldest first (admins).
func (c *Client) ListWebhooks(ctx context.Context) ([]Webhook, error) {
	return fetchItems[Webhook](ctx, c, call{method: http.MethodGet, path: "/v1/webhooks", retry: true})
}

// GetWebhook reads one webhook endpoint (admins).
func (c *Client) GetWebhook(ctx context.Context, id string) (*Webhook, error) {
	var w Webhook
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/webhooks/" + url.PathEscape(id), retry: true}, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// DeleteWebhook deletes a webhook endpoint and its deliveries (admins).
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: "/v1/webhooks/" + url.PathEscape(id), want: []int{http.StatusNoContent}}, nil)
	return err
}

// ListDeliveries lists one page of a webhook endpoint's deliveries, newest
// first (admins): the first page for cursor "", then NextCursor's. limit 0
// takes the server's default.
func (c *Client) ListDeliveries(ctx context.Context, id, cursor string, limit int) (*DeliveryPage, error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var p DeliveryPage
	cl := call{method: http.MethodGet, path: "/v1/webhooks/" + url.PathEscape(id) + "/deliveries", query: q, retry: true}
	if _, err := c.do(ctx, cl, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// EnableWebhook enables an endpoint disabled for failing (admins); the
// deliveries its last failures failed are attempted again. Enabling an
// enabled endpoint changes nothing, so it is retried.
func (c *Client) EnableWebhook(ctx context.Context, id string) (*Webhook, error) {
	var w Webhook
	cl := call{method: http.MethodPost, path: "/v1/webhooks/" + url.PathEscape(id) + "/enable", retry: true}
	if _, err := c.do(ctx, cl, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// TestWebhook queues a webhook.test delivery to the endpoint (admins).
func (c *Client) TestWebhook(ctx context.Context, id string) (*Delivery, error) {
	var d Delivery
	cl := call{method: http.MethodPost, path: "/v1/webhooks/" + url.PathEscape(id) + "/test", want: []int{http.StatusAccepted}}
	if _, err := c.do(ctx, cl, &d); err != nil {
		return nil, err
	}
	return &d, nil
}
