package inbox

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/display"
)

// batchItem is one selected request as the batch page shows it: the call
// in full (tool, arguments, their size and digest, the deadline) and,
// after the decision, its result.
type batchItem struct {
	ID         string
	Found      bool
	Headline   []display.Segment
	Tool       []display.Segment
	Kind       airlock.Kind
	IsCommand  bool
	From       []display.Segment
	Arguments  []jsonPiece
	Purged     bool
	ArgsSize   string
	Digest     string
	Deadline   time.Time
	Left       string
	State      airlock.State
	Pending    bool
	CanDecide  bool
	AgentWrote bool
	For        []display.Segment
	Quorum     string
	// Result, after the decision, says what it did to this request.
	Result *flash
}

// batchBody is the batch page's data: the review (every selected call,
// one decision form) or, after the decision, the result of each.
type batchBody struct {
	Items      []batchItem
	IDs        []string
	Validities []option
	Decided    bool
	Approve    bool
	Problem    string
	// Decidable counts the items the reviewer may decide now; Decided
	// pages count those recorded.
	Decidable, Recorded int
}

// readBatchIDs reads the selected ids of a batch (id, repeated): at least
// one, at most airlock.MaxBatchIDs, none twice.
func readBatchIDs(ids []string) ([]string, string) {
	var out []string
	seen := map[string]bool{}
	for _, id := range ids {
		id = strings.TrimSpace(id)
		if id == "" || seen[id] {
			continue // a request ticked twice (two tabs) is one request
		}
		seen[id] = true
		out = append(out, id)
	}
	switch {
	case len(out) == 0:
		return nil, "No request was selected: tick the requests to decide in the pending list, then Review selected."
	case len(out) > airlock.MaxBatchIDs:
		return nil, "At most 100 requests are decided at once; select fewer."
	}
	return out, ""
}

// batchItems reads each id as the caller may see it, with its arguments
// when withArgs. It reports tooLarge, and stops, once the arguments read
// pass what one list page may hold (provider.Service.ListPageBytes), so
// that a review of 100 large calls costs no more memory than a list.
func (h *handler) batchItems(r *http.Request, v *view, ids []string, withArgs bool) (items []batchItem, tooLarge bool) {
	now := h.now()
	budget, total := h.svc.ListPageBytes(), 0
	names := h.names(r.Context(), v.caller)
	items = make([]batchItem, 0, len(ids))
	for _, id := range ids {
		it := batchItem{ID: id}
		req, err := h.svc.Request(r.Context(), v.caller, id, 0)
		if err != nil {
			items = append(items, it)
			continue
		}
		rw := h.row(req.Summary(), names, now)
		it.Found = true
		it.Headline, it.Tool, it.Kind, it.IsCommand, it.From = rw.Headline, rw.Tool, req.Kind, rw.IsCommand, rw.From
		it.AgentWrote, it.For, it.Quorum = rw.AgentWrote, rw.For, rw.Quorum
		it.Deadline, it.Left, it.State = req.DeadlineAt, rw.Left, req.State
		it.Pending = req.State == airlock.StatePending
		it.CanDecide = it.Pending && h.svc.MayDecide(v.caller, req) && req.Question == nil
		it.Purged = req.PurgedAt != nil
		if len(req.Arguments) > 0 {
			if withArgs {
				if total += len(req.Arguments); total > budget {
					return nil, true
				}
				it.Arguments = jsonPieces(req.Arguments)
			}
			it.ArgsSize = byteCount(len(req.Arguments))
			it.Digest = argsDigest(req.Arguments)
		}
		items = append(items, it)
	}
	return items, false
}

// batchReview is GET /batch?id=…&id=…: every selected call in full, in a
// table, and one form that decides them all, each as its own decision
// (docs/inbox.md, "Deciding several at once"). It records nothing.
func (h *handler) batchReview(w http.ResponseWriter, r *http.Request) {
	v, release, ok := h.signedInHeavy(w, r)
	if !ok {
		return
	}
	defer release()
	if v.caller.Role != airlock.RoleReviewer {
		h.errorPage(w, r, http.StatusForbidden, "Refused", "Only reviewers decide requests.")
		return
	}
	ids, problem := readBatchIDs(r.URL.Query()["id"])
	if problem != "" {
		h.setFlash(w, r, v.sess, flash{Title: "Nothing to review.", Message: problem})
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	items, tooLarge := h.batchItems(r, v, ids, true)
	if tooLarge {
		h.setFlash(w, r, v.sess, flash{Title: "Too much to review at once.",
			Message: "The selected requests' arguments are larger than one page may show in full (" + byteCount(h.svc.ListPageBytes()) + "). Select fewer, or open the large ones on their own pages."})
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	b := batchBody{Items: items, Validities: h.validities()}
	for _, it := range b.Items {
		if it.CanDecide {
			b.Decidable++
			b.IDs = append(b.IDs, it.ID)
		}
	}
	h.render(w, r, http.StatusOK, v, "batch", "Review selected", b)
}

// batchDecide is POST /batch: the review page's one confirmation. It
// decides each id as its own decision (provider.Service.DecideBatch) and
// shows what became of each.
func (h *handler) batchDecide(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	v, release, ok := h.signedInHeavy(w, r)
	if !ok {
		return
	}
	defer release()
	if err := r.ParseForm(); err != nil {
		h.errorPage(w, r, http.StatusBadRequest, "Bad form", "The decision form could not be read; nothing was recorded.")
		return
	}
	if !sameSecret(r.PostForm.Get("csrf"), v.sess.csrf) {
		h.errorPage(w, r, http.StatusForbidden, "Refused",
			"This form did not come from your inbox session (it may be from before you signed in again), so nothing was recorded. Review the selection again.")
		return
	}
	ids, problem := readBatchIDs(r.PostForm["id"])
	if problem != "" {
		h.setFlash(w, r, v.sess, flash{Title: "Nothing was recorded.", Message: problem})
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	in := airlock.BatchDecisionInput{IDs: ids, Note: strings.ReplaceAll(r.PostForm.Get("note"), "\r\n", "\n")}
	switch r.PostForm.Get("action") {
	case "approve":
		in.Status = airlock.StateApproved
		in.ValidFor = r.PostForm.Get("valid_for")
	case "deny":
		in.Status = airlock.StateDenied
	default:
		h.errorPage(w, r, http.StatusBadRequest, "Bad form", "The form named no decision (approve or deny); nothing was recorded.")
		return
	}
	results, err := h.svc.DecideBatch(r.Context(), v.caller, in)
	if err != nil {
		var e *airlock.Error
		if !errors.As(err, &e) || e.Code == airlock.CodeInternal || e.Code == airlock.CodeUnavailable {
			h.fail(w, r, err)
			return
		}
		h.setFlash(w, r, v.sess, flash{Title: "Nothing was recorded.", Message: e.Message})
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	// The results name each call with its size and digest; its arguments
	// were on the review page, and are on its own page.
	items, _ := h.batchItems(r, v, ids, false)
	b := batchBody{Items: items, Decided: true, Approve: in.Status == airlock.StateApproved}
	for i, res := range results {
		var f flash
		var e *airlock.Error
		switch {
		case res.Err == nil:
			f = recorded(res.Request)
			b.Recorded++
		case errors.As(res.Err, &e) && e.Code != airlock.CodeInternal && e.Code != airlock.CodeUnavailable:
			f = refusal(e)
		default:
			h.log.Error("inbox: batch decision", "request", res.ID, "err", res.Err)
			f = flash{Title: "Nothing was recorded.", Message: "The server could not record this one; it has been logged. Try it again on its page."}
		}
		b.Items[i].Result = &f
	}
	title := "Decided"
	h.render(w, r, http.StatusOK, v, "batch", title, b)
}

// validities are the approval validities a decision form offers, the
// server's default first.
func (h *handler) validities() []option {
	lim := h.svc.Limits()
	def := lim.ApprovalValidity
	out := []option{{Value: "", Label: display.Line("Default (" + shortDuration(def) + ")"), Selected: true}}
	for _, d := range []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour} {
		if d <= lim.MaxApprovalValidity && d != def {
			out = append(out, option{Value: shortDuration(d), Label: display.Line(shortDuration(d))})
		}
	}
	return out
}
