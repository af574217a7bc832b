package rest

import (
	"time"

	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"github.com/go-jose/go-jose/v4"
)

// Approval tokens' keys (docs/tokens.md): the public key set anyone may
// fetch to verify a token, and the admins' list and rotation.

// jwksMaxAge is how long a verifier may cache the key set. A token that
// names a key the cached set lacks makes a verifier fetch it again, so a
// rotation needs no wait.
const jwksMaxAge = 300

func (h *handler) jwks(w http.ResponseWriter, r *http.Request, _ airlock.Caller) {
	keys, err := h.svc.PublicKeys(r.Context())
	if err != nil {
		h.problem(w, r, err)
		return
	}
	body, err := json.Marshal(jose.JSONWebKeySet{Keys: keys})
	if err != nil {
		h.problem(w, r, err)
		return
	}
	body = append(body, '\n')
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("Cache-Control", "public, max-age="+strconv.Itoa(jwksMaxAge))
	w.Write(body)
}

func (h *handler) listSigningKeys(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	keys, err := h.svc.SigningKeys(r.Context(), c)
	now := h.svc.Now()
	answerList(h, w, r, err, "items", keys, func(b *bytes.Buffer, k store.SigningKey) { writeSigningKey(b, k, now) })
}

func (h *handler) rotateSigningKey(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	k, err := h.svc.RotateSigningKey(r.Context(), c)
	h.answerOK(w, r, err, func(b *bytes.Buffer) { writeSigningKey(b, k, h.svc.Now()) })
}

// writeSigningKey writes a signing key without its seed, which is never
// served; active says whether it signs at now.
func writeSigningKey(b *bytes.Buffer, k store.SigningKey, now time.Time) {
	o := beginObject(b)
	o.always("id", k.ID)
	o.always("active", k.SignsAt(now))
	if !k.CreatedAt.IsZero() {
		o.time("created_at", k.CreatedAt)
		o.time("activates_at", k.ActivatesAt)
	}
	o.timePtr("retired_at", k.RetiredAt)
	o.timePtr("published_until", k.PublishedUntil)
	o.end()
}

func (h *handler) consumeApprovalToken(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	in, ok := decodeBody[airlock.ConsumeInput](h, w, r)
	if !ok {
		return
	}
	use, err := h.svc.ConsumeApprovalToken(r.Context(), c, in)
	h.answerOK(w, r, err, func(b *bytes.Buffer) {
		o := beginObject(b)
		o.always("request_id", use.RequestID)
		o.always("jti", use.JTI)
		o.time("consumed_at", use.ConsumedAt)
		o.end()
	})
}
