package rest

import (
	"bytes"
	"net/http"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

func (h *handler) createGrant(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	in, ok := decodeBody[airlock.GrantInput](h, w, r)
	if !ok {
		return
	}
	g, err := h.svc.CreateGrant(r.Context(), c, in)
	h.answerCreated(w, r, err, "/v1/grants/"+g.ID, func(b *bytes.Buffer) { writeGrant(b, g) })
}

func (h *handler) listGrants(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	q := r.URL.Query()
	f := store.GrantFilter{Tool: q.Get("tool"), Limit: store.MaxListLimit}
	switch q.Get("state") {
	case "", "all":
	case "live":
		f.Live = true
	default:
		h.problem(w, r, airlock.Invalid("state", "state must be live or all"))
		return
	}
	gs, err := h.svc.Grants(r.Context(), c, f)
	answerList(h, w, r, err, "items", gs, writeGrant)
}

func (h *handler) getGrant(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	g, err := h.svc.Grant(r.Context(), c, r.PathValue("id"))
	h.answerOK(w, r, err, func(b *bytes.Buffer) { writeGrant(b, g) })
}

func (h *handler) revokeGrant(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	g, err := h.svc.RevokeGrant(r.Context(), c, r.PathValue("id"))
	h.answerOK(w, r, err, func(b *bytes.Buffer) { writeGrant(b, g) })
}

// writeGrant writes a Grant resource. match is "same_arguments" or the
// CEL expression, as it was submitted.
func writeGrant(b *bytes.Buffer, g airlock.Grant) {
	o := beginObject(b)
	writeGrantMembers(o, g)
	o.end()
}

func writeGrantMembers(o *object, g airlock.Grant) {
	o.always("id", g.ID)
	o.always("tool", g.Tool)
	if g.Match.Kind == airlock.MatchCEL {
		o.always("match", g.Match.Expression)
	} else {
		o.always("match", string(g.Match.Kind))
	}
	o.str("instance_id", g.InstanceID)
	o.str("agent", g.AgentID)
	if g.Uses != nil {
		o.always("uses", *g.Uses)
	}
	if g.UsesLeft != nil {
		o.always("uses_left", *g.UsesLeft)
	}
	o.always("valid_for", g.Validity.String())
	o.always("state", string(g.State))
	o.time("created_at", g.CreatedAt)
	o.time("expires_at", g.ExpiresAt)
	o.always("created_by", g.CreatedBy)
	o.str("request_id", g.RequestID)
	o.timePtr("revoked_at", g.RevokedAt)
	o.str("revoked_by", g.RevokedBy)
}
