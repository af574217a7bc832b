package provider

import (
	"context"
	"encoding/json"
	"time"

	"github.com/airlockhq/airlock"
)

// Webhook endpoints (docs/notifications.md), managed by admins. The
// provider stores them and queues test deliveries; the notify engine
// delivers.

func adminOnly(c airlock.Caller) error {
	if c.Role != airlock.RoleAdmin {
		return forbidden("only admin tokens manage webhooks")
	}
	return nil
}

// CreateWebhook stores a webhook endpoint (admins only) with a fresh
// signing secret, which the caller shows this once.
func (s *Service) CreateWebhook(ctx context.Context, c airlock.Caller, in airlock.WebhookInput) (airlock.Endpoint, error) {
	if err := adminOnly(c); err != nil {
		return airlock.Endpoint{}, err
	}
	if err := in.Validate(); err != nil {
		return airlock.Endpoint{}, err
	}
	if s.checkWebhookURL != nil {
		if err := s.checkWebhookURL(in.URL); err != nil {
			return airlock.Endpoint{}, err
		}
	}
	return s.storeFor(c).CreateEndpoint(ctx, airlock.Endpoint{
		ID: airlock.NewID(airlock.PrefixEndpoint), Kind: airlock.EndpointWebhook, URL: in.URL, Events: in.Events,
		Description: in.Description, Secret: airlock.NewWebhookSecret(), CreatedBy: c.ID,
	})
}

// Webhooks lists the webhook endpoints (admins only), oldest first.
func (s *Service) Webhooks(ctx context.Context, c airlock.Caller) ([]airlock.Endpoint, error) {
	if err := adminOnly(c); err != nil {
		return nil, err
	}
	return s.storeFor(c).ListEndpoints(ctx, airlock.EndpointWebhook)
}

// Webhook reads one webhook endpoint (admins only); not_found.
func (s *Service) Webhook(ctx context.Context, c airlock.Caller, id string) (airlock.Endpoint, error) {
	if err := adminOnly(c); err != nil {
		return airlock.Endpoint{}, err
	}
	e, err := s.storeFor(c).GetEndpoint(ctx, id)
	if err == nil && e.Kind != airlock.EndpointWebhook {
		return airlock.Endpoint{}, airlock.NotFound("webhook", id)
	}
	return e, err
}

// DeleteWebhook deletes a webhook endpoint and its deliveries (admins
// only); not_found.
func (s *Service) DeleteWebhook(ctx context.Context, c airlock.Caller, id string) error {
	if _, err := s.Webhook(ctx, c, id); err != nil {
		return err
	}
	return s.storeFor(c).DeleteEndpoint(ctx, id, c.ID)
}

// EnableWebhook enables a webhook endpoint disabled for failing (admins
// only): the deliveries its last run of failures failed are attempted
// again at once; events committed while it was disabled are not
// delivered to it. An enabled endpoint is returned unchanged; not_found.
func (s *Service) EnableWebhook(ctx context.Context, c airlock.Caller, id string) (airlock.Endpoint, error) {
	if _, err := s.Webhook(ctx, c, id); err != nil {
		return airlock.Endpoint{}, err
	}
	e, err := s.storeFor(c).EnableEndpoint(ctx, id, c.ID)
	if err == nil && s.deliveryQueued != nil {
		s.deliveryQueued()
	}
	return e, err
}

// DeliveryPage is one page of an endpoint's deliveries, newest first.
type DeliveryPage struct {
	Deliveries []airlock.Delivery
	// Next is the cursor of the next page; 0 when there is none.
	Next int64
}

// WebhookDeliveries lists a webhook endpoint's deliveries with their
// attempts (admins only), newest first, before the cursor when it is
// positive.
func (s *Service) WebhookDeliveries(ctx context.Context, c airlock.Caller, id string, before int64, limit int) (DeliveryPage, error) {
	if _, err := s.Webhook(ctx, c, id); err != nil {
		return DeliveryPage{}, err
	}
	ds, more, err := s.storeFor(c).ListDeliveries(ctx, id, before, limit)
	if err != nil {
		return DeliveryPage{}, err
	}
	p := DeliveryPage{Deliveries: ds}
	if more && len(ds) > 0 {
		p.Next = ds[len(ds)-1].Seq
	}
	return p, nil
}

// TestWebhook queues a webhook.test delivery to the endpoint (admins
// only), signed and retried like any other.
func (s *Service) TestWebhook(ctx context.Context, c airlock.Caller, id string) (airlock.Delivery, error) {
	if _, err := s.Webhook(ctx, c, id); err != nil {
		return airlock.Delivery{}, err
	}
	now := s.clock.Now()
	body, err := json.Marshal(map[string]any{
		"type": airlock.NotifyTest, "timestamp": now.UTC().Format(time.RFC3339Nano),
		"data": map[string]string{"webhook_id": id, "message": "A test from Airlock: this endpoint receives and verifies its webhooks."},
	})
	if err != nil {
		return airlock.Delivery{}, err
	}
	d, err := s.storeFor(c).AddDelivery(ctx, airlock.Delivery{
		ID: airlock.NewID(airlock.PrefixDelivery), EndpointID: id, MessageID: airlock.NewID(airlock.PrefixMessage),
		Type: airlock.NotifyTest, Payload: body,
	})
	if err == nil && s.deliveryQueued != nil {
		s.deliveryQueued()
	}
	return d, err
}
