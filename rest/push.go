package rest

import (
	"bytes"
	"net/http"

	"github.com/airlockhq/airlock"
)

// Web Push (docs/phone.md): a reviewer's browser reads the server's VAPID
// public key, subscribes with it, and hands the subscription here.

func (h *handler) vapidPublicKey(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	k, err := h.svc.VAPIDPublicKey(r.Context(), c)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	reply(w, http.StatusOK, func(b *bytes.Buffer) {
		o := beginObject(b)
		o.always("public_key", k)
		o.end()
	})
}

func (h *handler) createPushSubscription(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	in, ok := decodeBody[airlock.PushSubscriptionInput](h, w, r)
	if !ok {
		return
	}
	s, err := h.svc.CreatePushSubscription(r.Context(), c, in)
	h.answerCreated(w, r, err, "/v1/push/subscriptions/"+s.ID, func(b *bytes.Buffer) { writePushSubscription(b, s) })
}

func (h *handler) deletePushSubscription(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	if err := h.svc.DeletePushSubscription(r.Context(), c, r.PathValue("id")); err != nil {
		h.problem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// writePushSubscription writes a PushSubscription resource: never its keys.
func writePushSubscription(b *bytes.Buffer, s airlock.PushSubscription) {
	o := beginObject(b)
	o.always("id", s.ID)
	o.always("endpoint", s.Endpoint)
	o.time("created_at", s.CreatedAt)
	o.end()
}
