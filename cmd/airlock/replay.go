package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/fatigue"
)

// replayRule is one rule's row of `airlock policy replay --json`.
type replayRule struct {
	Rule           string   `json:"rule"`
	Action         string   `json:"action"`
	Allow          int      `json:"allow"`
	Deny           int      `json:"deny"`
	Ask            int      `json:"ask"`
	Shadow         int      `json:"shadow_matches"`
	Approved       int      `json:"approved"`
	Denied         int      `json:"denied"`
	Expired        int      `json:"expired"`
	Cancelled      int      `json:"cancelled"`
	Pending        int      `json:"pending"`
	AllowedDenied  []string `json:"allowed_but_denied"`
	DeniedApproved int      `json:"denied_but_approved"`
}

// replayReport is `airlock policy replay --json`.
type replayReport struct {
	PolicySHA256   string       `json:"policy_sha256"`
	Since          time.Time    `json:"since"`
	Requests       int          `json:"requests"`
	Skipped        int          `json:"skipped_commands"`
	Rules          []replayRule `json:"rules"`
	AllowedDenied  int          `json:"allowed_but_denied"`
	DeniedApproved int          `json:"denied_but_approved"`
}

// runPolicyReplay runs a candidate policy file over the requests created
// in the window, read from a server, and prints per rule what it would
// have done beside what happened (docs/policy.md, "Replay").
func runPolicyReplay(ctx context.Context, a *App, args []string) error {
	fs, r := a.apiFlagSet("policy", "replay")
	sinceFlag := fs.String("since", "7d", "replay the requests created in this window before now: whole days (7d) or a duration (12h)")
	pos, err := a.parseAPIArgs(fs, r, args, "FILE")
	if err != nil {
		return err
	}
	window, err := fatigue.ParseSince(*sinceFlag)
	if err != nil {
		return usageErrorf("--since: %v", err)
	}
	set, err := loadPolicy(pos[0])
	if err != nil {
		return err
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	since := time.Now().Add(-window)
	rp := fatigue.NewReplayer(set)
	instances := map[string]airlock.Instance{}
	instance := func(id string) func(context.Context) (airlock.Instance, error) {
		return func(ctx context.Context) (airlock.Instance, error) {
			if in, ok := instances[id]; ok {
				return in, nil
			}
			got, err := c.GetInstance(ctx, id)
			if err != nil {
				return airlock.Instance{}, err
			}
			in := airlock.Instance{ID: got.ID, Name: got.Name, Metadata: got.Metadata}
			instances[id] = in
			return in, nil
		}
	}
	opts := client.ListRequestsOptions{Limit: 200}
pages:
	for {
		page, err := c.ListRequests(ctx, opts)
		if err != nil {
			return apiError(err)
		}
		for _, q := range page.Items { // newest first
			if q.CreatedAt.Before(since) {
				break pages
			}
			rp.Add(ctx, replayInput(q, instance(q.InstanceID)))
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	rows := rp.Rows()
	rep := replayReport{PolicySHA256: set.Hash, Since: since.UTC(), Requests: rp.Requests, Skipped: rp.Skipped}
	for _, row := range rows {
		rep.Rules = append(rep.Rules, replayRule{Rule: row.Rule, Action: string(row.Action), Allow: row.Allow, Deny: row.Deny, Ask: row.Ask,
			Shadow: row.Shadow, Approved: row.Approved, Denied: row.Denied, Expired: row.Expired, Cancelled: row.Cancelled,
			Pending: row.Pending, AllowedDenied: append([]string{}, row.AllowedDenied...), DeniedApproved: row.DeniedApproved})
		rep.AllowedDenied += len(row.AllowedDenied)
		rep.DeniedApproved += row.DeniedApproved
	}
	if r.json {
		return r.printJSON(rep)
	}
	fmt.Fprintf(r.out, "Replayed %d requests created since %s against %s (sha256 %.12s…)", rep.Requests, rep.Since.Format(time.RFC3339), pos[0], set.Hash)
	if rep.Skipped > 0 {
		fmt.Fprintf(r.out, "; %d command proposals skipped (no policy judges them)", rep.Skipped)
	}
	fmt.Fprintln(r.out, ".")
	var table2 [][]string
	n := strconv.Itoa
	for _, row := range rep.Rules {
		table2 = append(table2, []string{clip(row.Rule, 40), row.Action, n(row.Allow), n(row.Deny), n(row.Ask), n(row.Shadow),
			n(row.Approved), n(row.Denied), n(row.Expired), n(row.Cancelled), n(row.Pending), n(len(row.AllowedDenied)), n(row.DeniedApproved)})
	}
	table(r.out, "RULE\tACTION\tWOULD: ALLOW\tDENY\tASK\tSHADOW\tWAS: APPROVED\tDENIED\tEXPIRED\tCANCELLED\tPENDING\tALLOW BUT DENIED\tDENY BUT APPROVED", table2)
	fmt.Fprintf(r.out, "Disagreements: %d would have been allowed but were denied; %d would have been denied but were approved.\n",
		rep.AllowedDenied, rep.DeniedApproved)
	for _, row := range rep.Rules {
		for _, id := range row.AllowedDenied {
			fmt.Fprintf(r.out, "  allowed by %q, denied: %s\n", clip(row.Rule, 60), id)
		}
	}
	return nil
}

// replayInput is what a rule would have seen of q at its creation: its
// call, its window and its instance (read only when a rule looks). The
// agent's token is not in the history: agent.id is the request's
// creator's name, and agent.principal and agent.scopes are empty.
func replayInput(q client.ApprovalRequest, instance func(context.Context) (airlock.Instance, error)) airlock.PolicyInput {
	req := airlock.Request{ID: q.ID, InstanceID: q.InstanceID, State: q.State, Kind: q.Kind, Tool: q.Tool, Arguments: q.Arguments,
		Context: q.Context, Timeout: q.Timeout, Title: q.Title, CreatedAt: q.CreatedAt, DeadlineAt: q.DeadlineAt}
	if q.Question != nil {
		req.Question = &airlock.Question{}
	}
	if p := q.Proposal; p != nil {
		req.Proposal = &airlock.Proposal{Mode: p.Mode}
		if p.Command != nil {
			req.Proposal.Command = &airlock.Command{Method: p.Command.Method, Input: p.Command.Input}
		}
	}
	return airlock.PolicyInput{Request: req, Window: q.DeadlineAt.Sub(q.CreatedAt), Instance: instance,
		Agent: airlock.Token{Name: q.CreatedByName}}
}
