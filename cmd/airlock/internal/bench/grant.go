package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The grant scenario's call: one tool with the same arguments every time,
// which is what a same_arguments grant made from a decision covers.
const (
	grantTool = "payments.refund"
	grantArgs = `{"payment_id":"pay_bench","amount":4900,"currency":"GBP"}`
	// maxGrantUses is the most uses the API lets a grant have; a run that
	// could need more gets a grant without a limit.
	maxGrantUses = 1_000_000
)

// errNotGranted is an operation whose create the grant did not approve:
// it is counted as an error, never measured as a success.
var errNotGranted = errors.New("not approved by the grant")

// GrantReport is what the grant scenario's grants counted.
type GrantReport struct {
	// Grants is how many grants the measured run made: one per client,
	// each covering the calls on that client's instance.
	Grants int `json:"grants"`
	// UsesCounted is the uses the server counted on those grants (uses
	// less uses_left, read after the run): one per create it approved.
	// Absent when the grants had no limit of uses (a count bound above
	// what a grant may have).
	UsesCounted *int64 `json:"uses_counted,omitempty"`
}

// apiGrant is the part of a Grant the scenario reads.
type apiGrant struct {
	ID       string `json:"id"`
	Uses     *int64 `json:"uses"`
	UsesLeft *int64 `json:"uses_left"`
}

// prepareGrant makes client i's op of the grant scenario: an instance of
// its own, and a reviewer's grant covering the scenario's call on it for
// the whole run. Each op creates a request and claims its execution, as
// an adapter's gate does; a create the grant did not approve is an error
// (errNotGranted). done deletes the instance, which ends the grant and
// cancels a request left pending by such an error. It returns the
// grant's ID beside them, to read the grant after the run.
func prepareGrant(ctx context.Context, cfg Config, t *target, i int, run string, phase int) (clientOp, func(), string, error) {
	base := t.base(i)
	inst, err := t.newInstance(ctx, base, fmt.Sprintf("bench %s-%d client %d", run, phase, i))
	if err != nil {
		return nil, nil, "", err
	}
	done := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		t.call(ctx, "DELETE", base, "/v1/instances/"+inst, t.agent, "", nil)
	}
	tool := grantTool
	if cfg.grantTool != "" {
		tool = cfg.grantTool
	}
	uses := ""
	switch {
	case cfg.grantUses > 0:
		uses = fmt.Sprintf(`,"uses":%d`, cfg.grantUses)
	case cfg.Count <= maxGrantUses:
		// Each client issues at most Count operations.
		uses = fmt.Sprintf(`,"uses":%d`, cfg.Count)
	}
	var g apiGrant
	body := fmt.Sprintf(`{"tool":%q,"match":"same_arguments","arguments":%s,"instance_id":%q,"expires_in":"720h"%s}`, tool, grantArgs, inst, uses)
	if err := t.call(ctx, "POST", base, "/v1/grants", t.reviewer, body, &g); err != nil {
		done()
		return nil, nil, "", fmt.Errorf("make the run's grant: %w", err)
	}
	by := "grant:" + g.ID
	return func(ctx context.Context, n int64) error {
		key := fmt.Sprintf("bench-%s-%d-%d", run, phase, n)
		r, err := t.create(ctx, base, inst, key, grantBody(n))
		if err != nil {
			return err
		}
		if r.State != "approved" || r.Decision == nil || r.Decision.DecidedBy != by {
			decided := ""
			if r.Decision != nil {
				decided = " by " + r.Decision.DecidedBy
			}
			return fmt.Errorf("created %s is %s%s, want approved by %s: %w", r.ID, r.State, decided, by, errNotGranted)
		}
		var c apiRequest
		if err := t.call(ctx, "POST", base, "/v1/approval-requests/"+r.ID+"/execution", t.agent, "", &c); err != nil {
			return fmt.Errorf("claim %s: %w", r.ID, err)
		}
		if c.Execution == nil || c.Execution.Status != "claimed" {
			return fmt.Errorf("claimed %s, but its execution is %+v, want claimed", r.ID, c.Execution)
		}
		return nil
	}, done, g.ID, nil
}

// grantBody is the grant scenario's create: the same call every time.
func grantBody(n int64) string {
	return fmt.Sprintf(`{"tool":%q,"arguments":%s,"timeout":"1h","agent_reasoning":"Refund %d of the bench.","context":{"bench":true}}`, grantTool, grantArgs, n)
}

// grantReport reads a phase's grants after it: the uses the server
// counted on them.
func grantReport(ctx context.Context, t *target, grants []string) (*GrantReport, error) {
	rep := &GrantReport{Grants: len(grants)}
	var counted int64
	for _, id := range grants {
		var g apiGrant
		if err := t.call(ctx, "GET", t.urls[0], "/v1/grants/"+id, t.reviewer, "", &g); err != nil {
			return nil, fmt.Errorf("read the run's grant %s: %w", id, err)
		}
		if g.Uses == nil || g.UsesLeft == nil {
			return rep, nil
		}
		counted += *g.Uses - *g.UsesLeft
	}
	rep.UsesCounted = &counted
	return rep, nil
}
