package inbox

import (
	"errors"
	"net/http"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/display"
)

// decide records the reviewer's decision from a request page's forms and
// redirects back to the page, which then says what happened (once). The
// form must carry the session's CSRF token; CrossOriginProtection has
// already refused a form sent from another site.
func (h *handler) decide(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	v, ok := h.signedIn(w, r)
	if !ok {
		return
	}
	if err := r.ParseForm(); err != nil {
		h.errorPage(w, r, http.StatusBadRequest, "Bad form", "The decision form could not be read (too large?); nothing was recorded.")
		return
	}
	if !sameSecret(r.PostForm.Get("csrf"), v.sess.csrf) {
		h.errorPage(w, r, http.StatusForbidden, "Refused",
			"This form did not come from your inbox session (it may be from before you signed in again), so nothing was recorded. Reload the request and decide again.")
		return
	}
	id := r.PathValue("id")
	back := "/requests/" + id
	in := airlock.DecisionInput{Note: r.PostForm.Get("note"), Answer: r.PostForm.Get("answer")}
	switch r.PostForm.Get("action") {
	case "approve":
		in.Status = airlock.StateApproved
		in.ValidFor = r.PostForm.Get("valid_for")
		if g, ok := grantChoice(r.PostForm.Get("grant")); ok {
			in.Grant = g
		} else {
			h.errorPage(w, r, http.StatusBadRequest, "Bad form", "The form asked for a grant this inbox does not offer; nothing was recorded.")
			return
		}
	case "deny":
		in.Status = airlock.StateDenied
		in.Answer = ""
	default:
		h.errorPage(w, r, http.StatusBadRequest, "Bad form", "The form named no decision (approve or deny); nothing was recorded.")
		return
	}
	in.Note = strings.ReplaceAll(in.Note, "\r\n", "\n")
	in.Answer = strings.ReplaceAll(in.Answer, "\r\n", "\n")
	req, grant, err := h.svc.DecideGrant(r.Context(), v.caller, id, in)
	if err != nil {
		var e *airlock.Error
		if !errors.As(err, &e) || e.Code == airlock.CodeInternal || e.Code == airlock.CodeUnavailable {
			h.fail(w, r, err)
			return
		}
		if e.Code == airlock.CodeNotFound {
			h.fail(w, r, err)
			return
		}
		h.setFlash(w, r, v.sess, refusal(e))
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	f := recorded(req)
	if grant != nil {
		f.Message += " The same call is allowed " + grantPhrase(grant) + " (see Grants)."
	}
	h.setFlash(w, r, v.sess, f)
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// recorded says what a successful decision did.
func recorded(r airlock.Request) flash {
	d := r.Decision
	switch {
	case d == nil && r.NeedsQuorum():
		return flash{OK: true, Title: "Your vote is counted.", Message: r.QuorumProgress() + " so far; the request stays pending until enough reviewers approve."}
	case d == nil:
		return flash{OK: true, Title: "Recorded."}
	case d.Status == airlock.StateDenied:
		msg := "The agent will not run this."
		if d.Note != "" {
			msg += " Your note was sent with the decision."
		}
		return flash{OK: true, Title: "Denied.", Message: msg}
	case d.Answer != "":
		return flash{OK: true, Title: "Answered.", Message: "Your answer was sent to the agent: “" + display.Visible(d.Answer) + "”."}
	case r.CommandResult != nil:
		return flash{OK: true, Title: "Approved and applied.", Message: "Airlock ran the command in the same step that recorded your approval."}
	case d.ExpiresAt != nil:
		return flash{OK: true, Title: "Approved.", Message: "The agent may start this exact call once, until " + d.ExpiresAt.UTC().Format("15:04:05 UTC") + "."}
	}
	return flash{OK: true, Title: "Approved."}
}

// refusal says why a decision was not recorded, in a reviewer's words.
func refusal(e *airlock.Error) flash {
	f := flash{Title: "Nothing was recorded."}
	switch e.Code {
	case airlock.CodeNotPending:
		f.Message = "This request is already " + string(e.State) + "."
		if e.State == airlock.StateExpired {
			f.Message = "This request already expired: its deadline passed before your decision."
		}
	case airlock.CodeDeadlinePassed:
		f.Message = "This request already expired: its deadline passed before your decision arrived."
	case airlock.CodeCommandFailed:
		f.Message = "The command could not be applied, so the request is still pending: " + e.Message
	default:
		f.Message = e.Message
	}
	return f
}
