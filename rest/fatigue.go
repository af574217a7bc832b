package rest

import (
	"bytes"
	"net/http"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/fatigue"
	"github.com/airlockhq/airlock/provider"
)

// since reads the window named by the query parameter since (30d, 12h,
// PT12H), or the default; ok is false, the problem answered, when it is
// not one.
func (h *handler) since(w http.ResponseWriter, r *http.Request) (time.Duration, bool) {
	s := r.URL.Query().Get("since")
	if s == "" {
		return provider.DefaultHistoryAge, true
	}
	d, err := fatigue.ParseSince(s)
	if err != nil {
		h.problem(w, r, airlock.Invalid("since", "%v", err))
		return 0, false
	}
	return d, true
}

// reviewerStats answers one decider's statistics (docs/policy.md,
// "Fatigue, measured").
func (h *handler) reviewerStats(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	age, ok := h.since(w, r)
	if !ok {
		return
	}
	who := r.PathValue("principal")
	if who == "" {
		h.problem(w, r, airlock.Invalid("principal", "name a decider"))
		return
	}
	st, err := h.svc.DeciderStats(r.Context(), c, who, age)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	s := fatigue.Stats{DecidedBy: who, Kind: fatigue.KindOf(who)}
	if len(st) == 1 {
		s = st[0]
	}
	reply(w, http.StatusOK, func(b *bytes.Buffer) { writeStats(b, s, age) })
}

// writeStats writes a DeciderStats resource.
func writeStats(b *bytes.Buffer, s fatigue.Stats, age time.Duration) {
	o := beginObject(b)
	o.always("decided_by", s.DecidedBy)
	o.always("kind", s.Kind)
	o.always("window_seconds", int64(age/time.Second))
	o.always("decisions", s.Decisions)
	o.always("approvals", s.Approvals)
	o.always("denials", s.Denials)
	o.always("approval_rate", s.ApprovalRate)
	o.always("p50_seconds", s.P50.Seconds())
	o.always("p90_seconds", s.P90.Seconds())
	o.always("fast_approvals", s.FastApprovals)
	o.end()
}

// suggestions answers the patterns people keep approving, with the rules
// that would have approved them (docs/policy.md, "Suggestions").
func (h *handler) suggestions(w http.ResponseWriter, r *http.Request, c airlock.Caller) {
	age, ok := h.since(w, r)
	if !ok {
		return
	}
	min, ok := h.queryInt64(w, r, "min", fatigue.DefaultMinApprovals, false)
	if !ok {
		return
	}
	if min < 1 || min > 1_000_000 {
		h.problem(w, r, airlock.Invalid("min", "min is 1 to 1000000, not %d", min))
		return
	}
	ss, err := h.svc.Suggestions(r.Context(), c, int(min), age)
	if err != nil {
		h.problem(w, r, err)
		return
	}
	reply(w, http.StatusOK, func(b *bytes.Buffer) {
		o := beginObject(b)
		o.always("min", int(min))
		o.always("window_seconds", int64(age/time.Second))
		o.key("items")
		writeArray(b, ss, writeSuggestion)
		o.end()
	})
}

// writeSuggestion writes a Suggestion resource.
func writeSuggestion(b *bytes.Buffer, s fatigue.Suggestion) {
	o := beginObject(b)
	o.always("pattern", s.Pattern)
	o.always("tool", s.Tool)
	o.raw("arguments", s.Arguments)
	if s.Pattern == fatigue.PatternConstantKeys {
		o.always("varying_keys", nonNil(s.Varying))
	}
	o.always("approvals", s.Approvals)
	o.always("request_ids", nonNil(s.RequestIDs))
	o.always("approvers", nonNil(s.Approvers))
	o.always("match", s.Match)
	o.always("rule", s.Rule)
	if g := s.Grant; g != nil {
		o.key("grant")
		g2 := beginObject(b)
		g2.always("tool", g.Tool)
		g2.always("match", g.Match)
		g2.always("instance_id", g.InstanceID)
		g2.always("expires_in", g.ExpiresIn)
		g2.end()
	}
	o.end()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
