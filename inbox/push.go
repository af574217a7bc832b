package inbox

import (
	"encoding/json"
	"io/fs"
	"net/http"

	"github.com/airlockhq/airlock"
)

// The installable inbox and Web Push (docs/phone.md). The manifest and
// the service worker are served from the root, so that the worker's
// scope is the whole inbox; the worker keeps only the app shell. A
// signed-in reviewer's "Notify this device" subscribes the browser here,
// with the session's CSRF token, as the REST API's
// POST /v1/push/subscriptions does for a token.

// servePlain serves one embedded static file at a path of its own, with
// a type the file server would not guess and no caching (a browser checks
// a service worker for updates each time it loads one).
func servePlain(name, contentType string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := fs.ReadFile(staticFS, "static/"+name)
		if err != nil {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(b)
	}
}

// pushKey answers the server's VAPID public key, which the browser
// subscribes with.
func (h *handler) pushKey(w http.ResponseWriter, r *http.Request) {
	v, ok := h.signedIn(w, r)
	if !ok {
		return
	}
	k, err := h.svc.VAPIDPublicKey(r.Context(), v.caller)
	if err != nil {
		h.pushError(w, err)
		return
	}
	writePushJSON(w, http.StatusOK, map[string]string{"public_key": k})
}

// pushSubscribe stores this browser's subscription for the signed-in
// caller: form fields csrf and subscription (PushSubscription.toJSON()).
func (h *handler) pushSubscribe(w http.ResponseWriter, r *http.Request) {
	v, ok := h.pushForm(w, r)
	if !ok {
		return
	}
	var in airlock.PushSubscriptionInput
	if err := airlock.DecodeObject([]byte(r.PostForm.Get("subscription")), &in); err != nil {
		h.pushError(w, err)
		return
	}
	s, err := h.svc.CreatePushSubscription(r.Context(), v.caller, in)
	if err != nil {
		h.pushError(w, err)
		return
	}
	writePushJSON(w, http.StatusCreated, s)
}

// pushUnsubscribe deletes one of the caller's subscriptions: form field
// csrf.
func (h *handler) pushUnsubscribe(w http.ResponseWriter, r *http.Request) {
	v, ok := h.pushForm(w, r)
	if !ok {
		return
	}
	err := h.svc.DeletePushSubscription(r.Context(), v.caller, r.PathValue("id"))
	if err != nil && airlock.ErrorCode(err) != airlock.CodeNotFound {
		h.pushError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// pushForm reads a push form posted by the inbox's own script: at most
// 16 KiB, a signed-in session, and the session's CSRF token in field csrf.
// It answers the script itself when ok is false.
func (h *handler) pushForm(w http.ResponseWriter, r *http.Request) (v *view, ok bool) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	v, ok = h.signedIn(w, r)
	if !ok {
		return v, false
	}
	if err := r.ParseForm(); err != nil || !sameSecret(r.PostForm.Get("csrf"), v.sess.csrf) {
		h.pushError(w, airlock.Errorf(airlock.CodeForbidden, "this request did not come from your inbox session; reload the page"))
		return v, false
	}
	return v, true
}

// pushError answers the script with the error's code and message; an
// internal error says only that, and is logged.
func (h *handler) pushError(w http.ResponseWriter, err error) {
	code := airlock.ErrorCode(err)
	status, msg := http.StatusInternalServerError, "internal error"
	switch code {
	case airlock.CodeInvalidRequest:
		status, msg = http.StatusBadRequest, err.Error()
	case airlock.CodeUnauthorized:
		status, msg = http.StatusUnauthorized, err.Error()
	case airlock.CodeForbidden:
		status, msg = http.StatusForbidden, err.Error()
	case airlock.CodeNotFound:
		status, msg = http.StatusNotFound, err.Error()
	case airlock.CodeUnavailable:
		status, msg = http.StatusServiceUnavailable, "the server cannot reach its store now; try again"
	default:
		h.log.Error("inbox: push", "err", err)
		code = "internal"
	}
	writePushJSON(w, status, map[string]string{"code": string(code), "message": msg})
}

func writePushJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
