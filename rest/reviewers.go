package rest

import (
	"bytes"
	"net/http"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/provider"
)

func (h *handler) listReviewers(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	rs, err := h.svc.Reviewers(r.Context(), c)
	answerList(h, w, r, err, "items", rs, writeReviewer)
}

func (h *handler) linkReviewer(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	body, err := h.readJSON(w, r)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	var in airlock.ReviewerLinkInput
	if err := airlock.DecodeObject(body, &in); err != nil {
		h.problem(w, r, err)
		return
	}
	rv, err := h.svc.LinkReviewer(r.Context(), c, r.PathValue("principal"), in)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	reply(w, http.StatusOK, func(b *bytes.Buffer) { writeReviewer(b, rv) })
}

// endReviewerSessions ends a principal's inbox sessions on every replica
// (docs/teams.md, "Revoking a reviewer"). The principal is in the body, not
// the path: an OIDC principal holds "//" and "#".
func (h *handler) endReviewerSessions(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	body, err := h.readJSON(w, r)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	var in struct {
		Principal string `json:"principal"`
	}
	if err := airlock.DecodeObject(body, &in); err != nil {
		h.problem(w, r, err)
		return
	}
	n, err := h.svc.EndReviewerSessions(r.Context(), c, in.Principal)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	reply(w, http.StatusOK, func(b *bytes.Buffer) {
		o := beginObject(b)
		o.always("principal", in.Principal)
		o.always("ended", n)
		o.end()
	})
}

// writeReviewer writes a Reviewer resource.
func writeReviewer(b *bytes.Buffer, rv provider.Reviewer) {
	o := beginObject(b)
	o.always("principal", rv.Principal)
	o.str("name", rv.Name)
	o.always("tokens", rv.Tokens)
	o.str("slack_user_id", rv.SlackUserID)
	o.str("email", rv.Email)
	o.timePtr("linked_at", rv.LinkedAt)
	o.str("linked_by", rv.LinkedBy)
	if rv.Groups != nil {
		o.always("groups", rv.Groups)
	}
	o.timePtr("signed_in_at", rv.SignedInAt)
	o.end()
}

// slackInteractions hands Slack's requests to the Slack handler, which
// verifies their signature (docs/notifications.md, "Slack").
func (h *handler) slackInteractions(w http.ResponseWriter, r *http.Request, _ airlock.Caller) {
	if h.slack == nil {
		h.problem(w, r, airlock.NotFound("route", "POST /slack/interactions (the server runs without --slack-signing-secret)"))
		return
	}
	h.slack.ServeHTTP(w, r)
}
