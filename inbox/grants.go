package inbox

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/display"
	"github.com/airlockhq/airlock/store"
)

// Grants in the inbox (docs/policy.md, "Grants"): the "approve and allow
// the same for …" choice of a tool call's decision form, and the grants
// page, with uses left and a revoke button.

// grantChoices are the decision form's grant choices: value
// "<expires_in>/<uses>" (uses empty for no limit), "" for none.
var grantChoices = []option{
	{Value: "", Label: display.Line("No: only this call"), Selected: true},
	{Value: "1h/5", Label: display.Line("for 1 hour, 5 more times")},
	{Value: "1h/", Label: display.Line("for 1 hour")},
	{Value: "8h/", Label: display.Line("for 8 hours")},
}

// grantChoice reads a decision form's grant field: nil for none, false
// for a value the form does not offer.
func grantChoice(v string) (*airlock.DecisionGrant, bool) {
	if v == "" {
		return nil, true
	}
	for _, c := range grantChoices {
		if c.Value == v {
			expires, uses, _ := strings.Cut(v, "/")
			g := &airlock.DecisionGrant{ExpiresIn: expires}
			if uses != "" {
				n, err := strconv.Atoi(uses)
				if err != nil {
					return nil, false
				}
				g.Uses = &n
			}
			return g, true
		}
	}
	return nil, false
}

// grantPhrase says how long and how often a grant allows its calls.
func grantPhrase(g *airlock.Grant) string {
	s := "until " + g.ExpiresAt.UTC().Format("15:04 UTC")
	if g.UsesLeft != nil {
		s += fmt.Sprintf(", %d more times", *g.UsesLeft)
	}
	return s
}

// grantRow is one grant on the grants page.
type grantRow struct {
	ID, Tool, Match, Scope, State, UsesLeft, By, RequestID string
	Expires                                                time.Time
	Live                                                   bool
}

func (h *handler) grantsPage(w http.ResponseWriter, r *http.Request) {
	v, ok := h.signedIn(w, r)
	if !ok {
		return
	}
	gs, err := h.svc.Grants(r.Context(), v.caller, store.GrantFilter{Limit: store.MaxListLimit})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rows := make([]grantRow, 0, len(gs))
	for _, g := range gs {
		row := grantRow{ID: g.ID, Tool: g.Tool, Match: "same arguments", State: string(g.State), UsesLeft: "no limit",
			By: g.CreatedBy, RequestID: g.RequestID, Expires: g.ExpiresAt, Live: g.State == airlock.GrantLive}
		if g.Match.Kind == airlock.MatchCEL {
			row.Match = g.Match.Expression
		}
		row.Scope = "instance " + g.InstanceID
		if g.AgentID != "" {
			row.Scope = "agent " + g.AgentID
		}
		if g.UsesLeft != nil {
			row.UsesLeft = fmt.Sprintf("%d of %d", *g.UsesLeft, *g.Uses)
		}
		rows = append(rows, row)
	}
	h.render(w, r, http.StatusOK, v, "grants", "Grants", rows)
}

// revokeGrant revokes a grant from the grants page's form, which must
// carry the session's CSRF token, and goes back to the page.
func (h *handler) revokeGrant(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	v, ok := h.signedIn(w, r)
	if !ok {
		return
	}
	if err := r.ParseForm(); err != nil || !sameSecret(r.PostForm.Get("csrf"), v.sess.csrf) {
		h.errorPage(w, r, http.StatusForbidden, "Refused",
			"This form did not come from your inbox session, so nothing was revoked. Reload the grants page and try again.")
		return
	}
	g, err := h.svc.RevokeGrant(r.Context(), v.caller, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.setFlash(w, r, v.sess, flash{OK: true, Title: "Revoked.", Message: "Grant " + g.ID + " approves nothing more."})
	http.Redirect(w, r, "/grants", http.StatusSeeOther)
}
