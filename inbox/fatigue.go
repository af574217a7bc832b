package inbox

import (
	"fmt"
	"net/http"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/fatigue"
	"github.com/airlockhq/airlock/provider"
)

// The fatigue page (docs/inbox.md, "Fatigue"): each decider's approvals,
// denials, times to decision and fast approvals over the last 30 days,
// and, for admins, the calls people keep approving with the rule to
// paste. An admin sees every decider; a reviewer their own row.

// fatigueBody is the fatigue page.
type fatigueBody struct {
	Admin       bool
	Days        int
	Stats       []statRow
	Suggestions []fatigue.Suggestion
	// Floor says the fast-approval rule in words.
	Floor string
}

// statRow is one decider's row, formatted.
type statRow struct {
	DecidedBy, Kind, Rate, P50, P90 string
	Decisions, Approvals, Denials   int
	Fast                            int
	FastShare                       string
}

func (h *handler) fatiguePage(w http.ResponseWriter, r *http.Request) {
	v, release, ok := h.signedInHeavy(w, r)
	if !ok {
		return
	}
	defer release()
	c := v.caller
	body := fatigueBody{Admin: c.Role == airlock.RoleAdmin, Days: int(provider.DefaultHistoryAge / (24 * time.Hour)),
		Floor: "sooner than max(2 s, 2 s per KiB of arguments) after the request was made"}
	who := ""
	if !body.Admin {
		who = c.ID
	}
	stats, err := h.svc.DeciderStats(r.Context(), c, who, provider.DefaultHistoryAge)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for _, s := range stats {
		row := statRow{DecidedBy: s.DecidedBy, Kind: s.Kind, Decisions: s.Decisions, Approvals: s.Approvals, Denials: s.Denials,
			Rate: fmt.Sprintf("%.0f%%", 100*s.ApprovalRate), P50: roundDur(s.P50), P90: roundDur(s.P90), Fast: s.FastApprovals}
		if s.Approvals > 0 {
			row.FastShare = fmt.Sprintf("%.0f%%", 100*float64(s.FastApprovals)/float64(s.Approvals))
		}
		body.Stats = append(body.Stats, row)
	}
	if body.Admin {
		if body.Suggestions, err = h.svc.Suggestions(r.Context(), c, fatigue.DefaultMinApprovals, provider.DefaultHistoryAge); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	h.render(w, r, http.StatusOK, v, "fatigue", "Fatigue", body)
}

// roundDur writes d for people: to the tenth of a second under a minute,
// to the second above.
func roundDur(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return d.Round(time.Second).String()
}
