package rest

import (
	"bytes"
	"net/http"
	"strconv"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// RequestJSON writes a request as the API shows it: a webhook's data.
func RequestJSON(r airlock.Request) []byte {
	var b bytes.Buffer
	writeRequest(&b, r)
	return b.Bytes()
}

func (h *handler) createWebhook(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	body, err := h.readJSON(w, r)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	var in airlock.WebhookInput
	if err := airlock.DecodeObject(body, &in); err != nil {
		h.problem(w, r, err)
		return
	}
	e, err := h.svc.CreateWebhook(r.Context(), c, in)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	reply(w, http.StatusCreated, func(b *bytes.Buffer) { writeWebhook(b, e, true) })
}

func (h *handler) listWebhooks(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	es, err := h.svc.Webhooks(r.Context(), c)
	answerList(h, w, r, err, "items", es, func(b *bytes.Buffer, e airlock.Endpoint) { writeWebhook(b, e, false) })
}

func (h *handler) getWebhook(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	e, err := h.svc.Webhook(r.Context(), c, r.PathValue("id"))
	if err != nil {
		h.problem(w, r, err)
		return
	}
	reply(w, http.StatusOK, func(b *bytes.Buffer) { writeWebhook(b, e, false) })
}

func (h *handler) deleteWebhook(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	if err := h.svc.DeleteWebhook(r.Context(), c, r.PathValue("id")); err != nil {
		h.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) listDeliveries(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	q := r.URL.Query()
	var before int64
	if s := q.Get("cursor"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			h.problem(w, r, airlock.Invalid("cursor", "cursor must be a next_cursor this endpoint returned"))
			return
		}
		before = n
	}
	var limit int
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > store.MaxListLimit {
			h.problem(w, r, airlock.Invalid("limit", "limit must be a whole number between 1 and %d", store.MaxListLimit))
			return
		}
		limit = n
	}
	page, err := h.svc.WebhookDeliveries(r.Context(), c, r.PathValue("id"), before, limit)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	reply(w, http.StatusOK, func(b *bytes.Buffer) {
		o := beginObject(b)
		o.key("items")
		writeArray(b, page.Deliveries, writeDelivery)
		if page.Next > 0 {
			o.str("next_cursor", strconv.FormatInt(page.Next, 10))
		}
		o.end()
	})
}

func (h *handler) testWebhook(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	d, err := h.svc.TestWebhook(r.Context(), c, r.PathValue("id"))
	if err != nil {
		h.problem(w, r, err)
		return
	}
	reply(w, http.StatusAccepted, func(b *bytes.Buffer) { writeDelivery(b, d) })
}

func (h *handler) enableWebhook(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	e, err := h.svc.EnableWebhook(r.Context(), c, r.PathValue("id"))
	if err != nil {
		h.problem(w, r, err)
		return
	}
	reply(w, http.StatusOK, func(b *bytes.Buffer) { writeWebhook(b, e, false) })
}

// writeWebhook writes a Webhook resource; the secret only when withSecret,
// which is once, at creation.
func writeWebhook(b *bytes.Buffer, e airlock.Endpoint, withSecret bool) {
	o := beginObject(b)
	o.always("id", e.ID)
	o.always("url", e.URL)
	events := e.Events
	if events == nil {
		events = []airlock.NotifyType{}
	}
	o.always("events", events)
	o.str("description", e.Description)
	o.time("created_at", e.CreatedAt)
	o.str("created_by", e.CreatedBy)
	o.always("enabled", e.DisabledAt == nil)
	o.timePtr("failing_since", e.FailingSince)
	o.timePtr("disabled_at", e.DisabledAt)
	o.str("disabled_reason", e.DisabledReason)
	if withSecret {
		o.always("secret", e.Secret)
	}
	o.end()
}

// writeDelivery writes a Delivery resource with its attempts.
func writeDelivery(b *bytes.Buffer, d airlock.Delivery) {
	o := beginObject(b)
	o.always("id", d.ID)
	o.always("webhook_id", d.EndpointID)
	o.always("message_id", d.MessageID)
	o.always("type", string(d.Type))
	if d.EventID != 0 {
		o.always("event_id", d.EventID)
	}
	o.str("request_id", d.RequestID)
	o.always("state", string(d.State))
	o.time("created_at", d.CreatedAt)
	if d.State == airlock.DeliveryPending {
		o.time("next_attempt_at", d.NextAttemptAt)
	}
	o.key("attempts")
	writeArray(b, d.Attempts, func(b *bytes.Buffer, a airlock.DeliveryAttempt) {
		ao := beginObject(b)
		ao.time("at", a.At)
		if a.Status != 0 {
			ao.always("status", a.Status)
		}
		ao.always("latency_ms", float64(a.Latency.Microseconds())/1000)
		ao.str("error", a.Error)
		ao.end()
	})
	o.end()
}
