package inbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/display"
)

// confirmedField marks a decision form the reviewer has confirmed: the
// confirmation page's form carries it, and so does a request page's form
// once the script's dialog was confirmed. A form without it records
// nothing; it gets the confirmation page, which restates the call.
const confirmedField = "confirmed"

// decide records the reviewer's decision from a request page's forms and
// redirects back to the page, which then says what happened (once). The
// form must carry the session's CSRF token; CrossOriginProtection has
// already refused a form sent from another site. A form not yet confirmed
// (a browser without JavaScript has shown no dialog) gets the confirmation
// page instead, and nothing is recorded.
func (h *handler) decide(w http.ResponseWriter, r *http.Request) {
	// An edit's form carries arguments of up to a mebibyte, which form
	// encoding may triple.
	r.Body = http.MaxBytesReader(w, r.Body, 3*airlock.MaxBodyBytes+64<<10)
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
	case "edit":
		in.Status = airlock.StateApproved
		in.ValidFor = r.PostForm.Get("valid_for")
		in.Answer = ""
		in.Arguments = json.RawMessage(bytes.TrimSpace([]byte(r.PostForm.Get("arguments"))))
		req, err := h.svc.Request(r.Context(), v.caller, id, 0)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if err := checkEdited(req, in.Arguments); err != nil {
			h.setFlash(w, r, v.sess, flash{Title: "Nothing was recorded.", Message: err.Error() + "."})
			http.Redirect(w, r, back, http.StatusSeeOther)
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
	in.Review = reviewClaim(r.PostForm.Get("review_seen_fraction"), r.PostForm.Get("review_seconds_open"))
	if raw := r.PostForm.Get("passkey"); raw != "" && !in.Edits() {
		a, err := h.decisionAssertion(r, raw)
		if e, ok := errors.AsType[*airlock.Error](err); ok {
			h.setFlash(w, r, v.sess, refusal(e))
			http.Redirect(w, r, back, http.StatusSeeOther)
			return
		} else if err != nil {
			h.fail(w, r, err)
			return
		}
		in.Passkey = a
	}
	if r.PostForm.Get(confirmedField) != "yes" {
		h.confirm(w, r, v, id, in)
		return
	}
	var (
		req   airlock.Request
		grant *airlock.Grant
		err   error
	)
	if in.Edits() {
		var edited airlock.Request
		if _, edited, err = h.svc.Edit(r.Context(), v.caller, id, in); err == nil {
			h.setFlash(w, r, v.sess, recordedEdit(edited))
			http.Redirect(w, r, "/requests/"+edited.ID, http.StatusSeeOther)
			return
		}
	} else {
		req, grant, err = h.svc.DecideGrant(r.Context(), v.caller, id, in)
	}
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

// recordedEdit says what an edit did, on the page of the request it
// approved.
func recordedEdit(r airlock.Request) flash {
	f := flash{OK: true, Title: airlock.ApprovedWithChanges + "."}
	switch d := r.Decision; {
	case d == nil:
		f.Message = "This is the new request, with your arguments; your vote is counted (" + r.QuorumProgress() + "). The original request was denied and never runs."
	case d.ExpiresAt != nil:
		f.Message = "This is the new request, with your arguments: the agent may start it once, until " + d.ExpiresAt.UTC().Format("15:04:05 UTC") +
			". The original request was denied and never runs."
	}
	return f
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

// confirmBody is the confirmation page's data: the request as its page
// shows it, what the form asks to record, and the form's fields to send
// again with the confirmation.
type confirmBody struct {
	requestBody
	Approve  bool
	Heading  string
	OK       string // the confirm button's label
	Answer   []display.Segment
	Validity []display.Segment
	Grant    []display.Segment
	Note     []display.Segment
	Fields   []hiddenField
	// Diff, for an edit, is the original arguments against the edited.
	Diff []diffRow
	// Seen says whether the arguments were seen in full on the request
	// page, as the page's script measured it (review_seen_fraction).
	Seen string
}

// hiddenField is one field the confirmation sends again as it came.
type hiddenField struct{ Name, Value string }

// confirm shows what a decision form asks to record, with the call
// restated as the request page shows it (tool or title, the arguments
// whole, their size and digest), and a form that records it. A request no
// longer pending goes back to its page, which says so.
func (h *handler) confirm(w http.ResponseWriter, r *http.Request, v *view, id string, in airlock.DecisionInput) {
	req, err := h.svc.Request(r.Context(), v.caller, id, 0)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	back := "/requests/" + id
	if req.State != airlock.StatePending {
		h.setFlash(w, r, v.sess, refusal(req.DecisionConflict()))
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	b := confirmBody{requestBody: h.requestBody(r.Context(), v, req), Approve: in.Status == airlock.StateApproved, Note: display.Text(in.Note)}
	if !b.CanDecide {
		// The request page offered no form: there is nothing to confirm.
		h.setFlash(w, r, v.sess, flash{Title: "Nothing was recorded.", Message: "You cannot decide this request: it is for other reviewers, or you are not signed in as a reviewer."})
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	form := r.PostForm
	for _, name := range []string{"csrf", "action", "answer", "valid_for", "grant", "note", "arguments", "review_seen_fraction", "review_seconds_open"} {
		if form.Has(name) {
			b.Fields = append(b.Fields, hiddenField{Name: name, Value: form.Get(name)})
		}
	}
	b.Fields = append(b.Fields, hiddenField{Name: confirmedField, Value: "yes"})
	b.Seen = seenPhrase(form.Get("review_seen_fraction"))
	switch {
	case !b.Approve && b.IsQuestion:
		b.Heading, b.OK = "Decline to answer?", "Decline"
	case !b.Approve:
		b.Heading, b.OK = "Deny this request?", "Deny"
	case b.IsQuestion:
		b.Heading, b.OK = "Send this answer?", "Send answer"
		b.Answer = display.Text(in.Answer)
	case b.IsCommand:
		b.Heading, b.OK = "Approve and apply this command?", "Approve and apply"
	case in.Edits():
		b.Heading, b.OK = "Approve with these changes?", "Approve with changes"
		b.Diff = diffRows(req.Arguments, in.Arguments)
		b.Validity = display.Line(in.ValidFor)
		for _, o := range b.Validities {
			if o.Value == in.ValidFor {
				b.Validity = o.Label
			}
		}
	default:
		b.Heading, b.OK = "Approve this request?", "Approve"
		b.Validity = display.Line(in.ValidFor)
		for _, o := range b.Validities {
			if o.Value == in.ValidFor {
				b.Validity = o.Label
			}
		}
		if in.Grant != nil {
			for _, o := range grantChoices {
				if o.Value == form.Get("grant") {
					b.Grant = o.Label
				}
			}
		}
	}
	h.render(w, r, http.StatusOK, v, "confirm", b.Heading, b)
}

// seenPhrase says whether the arguments were seen in full, from the
// fraction the request page's script measured ("" when none ran).
func seenPhrase(fraction string) string {
	f, err := strconv.ParseFloat(fraction, 64)
	switch {
	case fraction == "" || err != nil || f < 0 || f > 1:
		return "not measured: no script ran on the request page (the arguments are shown whole above)"
	case f >= 1:
		return "yes"
	}
	return fmt.Sprintf("no: %d %% of the arguments were on your screen", int(f*100))
}

// reviewClaim reads what the request page's script measured, sent with
// the decision (review_seen_fraction, review_seconds_open): the
// reviewer's client's claim, recorded with the decision. Without a script
// there is none; a malformed one is dropped rather than refusing the
// decision, since it is a claim and never a condition.
func reviewClaim(fraction, seconds string) *airlock.ReviewClaim {
	f, ferr := strconv.ParseFloat(fraction, 64)
	n, nerr := strconv.Atoi(seconds)
	rc := &airlock.ReviewClaim{SeenFraction: f, SecondsOpen: n}
	if ferr != nil || nerr != nil || rc.Check() != nil {
		return nil
	}
	return rc
}
