package main

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestFatigueOverHTTP: over a real server, a reviewer's decisions show in
// their statistics (their own, and an admin's view; another's is 403), the
// call they approved three times unchanged is suggested to an admin with
// min=3 (not to a reviewer), and `airlock policy replay` runs a candidate
// over the history: per rule, what it would have done beside what
// happened, with the denied call it would have allowed named.
func TestFatigueOverHTTP(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	read := `{"tool":"read_file","arguments":{"path":"/srv/docs/README.md"}}`
	var approved []string
	for range 3 {
		id := s.create(t, read)
		s.api.call("POST", "/v1/approval-requests/"+id+"/decision", s.reviewer, `{"status":"approved"}`).want(t, 200, "approve")
		approved = append(approved, id)
	}
	rm := s.create(t, `{"tool":"shell","arguments":{"cmd":"rm -rf /"}}`)
	s.api.call("POST", "/v1/approval-requests/"+rm+"/decision", s.reviewer, `{"status":"denied"}`).want(t, 200, "deny")
	pending := s.create(t, `{"tool":"shell","arguments":{"cmd":"ls"}}`)

	me := s.api.call("GET", "/v1/tokens", s.admin, "").want(t, 200, "tokens")
	var toks struct {
		Items []struct{ ID, Name string } `json:"items"`
	}
	if err := json.Unmarshal([]byte(me.Raw), &toks); err != nil {
		t.Fatal(err)
	}
	var reviewerID string
	for _, tk := range toks.Items {
		if tk.Name == "cli reviewer" {
			reviewerID = tk.ID
		}
	}
	var st struct {
		DecidedBy     string  `json:"decided_by"`
		Kind          string  `json:"kind"`
		Decisions     int     `json:"decisions"`
		Approvals     int     `json:"approvals"`
		Denials       int     `json:"denials"`
		ApprovalRate  float64 `json:"approval_rate"`
		FastApprovals int     `json:"fast_approvals"`
	}
	for _, who := range []string{s.reviewer, s.admin} {
		r := s.api.call("GET", "/v1/reviewers/"+url.PathEscape(reviewerID)+"/stats?since=1d", who, "").want(t, 200, "stats")
		if err := json.Unmarshal([]byte(r.Raw), &st); err != nil {
			t.Fatal(err)
		}
		// Decided by a test within a second of creation: every approval
		// is faster than its arguments could be read.
		if st.DecidedBy != reviewerID || st.Kind != "person" || st.Decisions != 4 || st.Approvals != 3 || st.Denials != 1 ||
			st.ApprovalRate != 0.75 || st.FastApprovals != 3 {
			t.Fatalf("stats = %+v; want 4 decisions, 3 approvals, all fast", st)
		}
	}
	// The same, counted by the metrics since the server started.
	metrics := s.api.call("GET", "/metrics", "", "").want(t, 200, "metrics").Raw
	for _, line := range []string{"\nairlock_fast_approvals_total 3\n", "\nairlock_time_to_decision_seconds_count{decider=\"person\"} 4\n",
		"\nairlock_time_to_decision_seconds_count{decider=\"policy\"} 0\n"} {
		if !strings.Contains(metrics, line) {
			t.Fatalf("/metrics lacks %q:\n%s", line, metrics)
		}
	}
	other := s.api.mintToken(s.admin, "other reviewer", "reviewer")
	s.api.call("GET", "/v1/reviewers/"+url.PathEscape(reviewerID)+"/stats", other, "").want(t, 403, "another reviewer's stats")
	s.api.call("GET", "/v1/reviewers/x/stats?since=soon", s.admin, "").want(t, 400, "a bad window")

	var sg struct {
		Items []struct {
			Pattern    string   `json:"pattern"`
			Tool       string   `json:"tool"`
			Approvals  int      `json:"approvals"`
			RequestIDs []string `json:"request_ids"`
			Rule       string   `json:"rule"`
			Grant      *struct {
				Match      string `json:"match"`
				InstanceID string `json:"instance_id"`
			} `json:"grant"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(s.api.call("GET", "/v1/suggestions?min=3&since=30d", s.admin, "").want(t, 200, "suggestions").Raw), &sg); err != nil {
		t.Fatal(err)
	}
	slices.Sort(approved)
	if len(sg.Items) != 1 || sg.Items[0].Tool != "read_file" || sg.Items[0].Pattern != "same_arguments" || sg.Items[0].Approvals != 3 ||
		!slices.Equal(sg.Items[0].RequestIDs, approved) || sg.Items[0].Grant == nil || sg.Items[0].Grant.InstanceID != s.instance ||
		!strings.Contains(sg.Items[0].Rule, "shadow: true") {
		t.Fatalf("suggestions = %+v; want read_file's three approvals", sg.Items)
	}
	suggested := sg.Items[0].Rule
	if err := json.Unmarshal([]byte(s.api.call("GET", "/v1/suggestions", s.admin, "").want(t, 200, "suggestions").Raw), &sg); err != nil || len(sg.Items) != 0 {
		t.Fatalf("suggestions with the default min of 10 = %+v, %v; want none", sg.Items, err)
	}
	s.api.call("GET", "/v1/suggestions", s.reviewer, "").want(t, 403, "a reviewer's suggestions")
	s.api.call("GET", "/v1/suggestions?min=0", s.admin, "").want(t, 400, "min 0")

	// The suggested rule, pasted into a policy file, replays as what the
	// reviewer did; a careless rule would have allowed the rm -rf.
	file := filepath.Join(t.TempDir(), "candidate.yaml")
	policyText := "rules:\n" + strings.ReplaceAll(suggested, "shadow: true", "shadow: false") + `- name: any shell
  match: request.tool == "shell"
  action: allow
`
	if err := os.WriteFile(file, []byte(policyText), 0o600); err != nil {
		t.Fatal(err)
	}
	out := s.cli(t, s.reviewer, "policy", "replay", "--since", "1d", file).want(t, 0, "replay").stdout
	if !strings.Contains(out, "Replayed 5 requests") || !strings.Contains(out, "Disagreements: 1 would have been allowed but were denied; 0") ||
		!strings.Contains(out, `allowed by "any shell", denied: `+rm) {
		t.Fatalf("policy replay said:\n%s", out)
	}
	var rep replayReport
	if err := json.Unmarshal([]byte(s.cli(t, s.reviewer, "policy", "replay", "--json", file).want(t, 0, "replay --json").stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 5 || len(rep.Rules) != 3 || rep.AllowedDenied != 1 ||
		rep.Rules[0].Allow != 3 || rep.Rules[0].Approved != 3 ||
		rep.Rules[1].Rule != "any shell" || rep.Rules[1].Allow != 2 || rep.Rules[1].Denied != 1 || rep.Rules[1].Pending != 1 ||
		!slices.Equal(rep.Rules[1].AllowedDenied, []string{rm}) || rep.Rules[2].Ask != 0 {
		t.Fatalf("policy replay --json = %+v (pending %s)", rep, pending)
	}
	s.cli(t, "", "policy", "replay", file).want(t, exitUsage, "no token")
	s.cli(t, s.reviewer, "policy", "replay", "--since", "soon", file).want(t, exitUsage, "a bad --since")
}
