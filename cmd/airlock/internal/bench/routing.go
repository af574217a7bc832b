package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store/postgres"
)

// The scale scenario's routing phase (Config.Groups; docs/performance.md,
// "Scale") measures a create that a policy rule routes to one reviewer
// group (docs/teams.md, "Routing"), with Groups groups of scaleGroupSize
// reviewers each in force. The groups live where a deployment keeps them,
// in the policy file the replicas load: one rule a group, each matching
// its own tool, so that a create for the last group is judged by every
// rule before it. The reviewers are reviewer tokens with the principals
// the file lists, seeded through the store contract (CreateToken), as
// `airlock tokens create --principal` would leave them.

// Routing phase parameters.
const (
	// scaleGroupSize is the reviewers in each group: 500 groups make
	// 10,000 reviewers.
	scaleGroupSize = 20
	// MaxGroups bounds Config.Groups: a policy file lists at most 1,000
	// groups and 1,000 rules (docs/policy.md, "Limits").
	MaxGroups = 1000
)

// ScaleRouting is what the routing phase measured.
type ScaleRouting struct {
	// Groups of scaleGroupSize Reviewers each, one policy Rule each.
	Groups    int `json:"groups"`
	Reviewers int `json:"reviewers"`
	Rules     int `json:"rules"`
	// SeedS is how long seeding the reviewers' tokens took.
	SeedS float64 `json:"seed_s"`
	// Create is POST …/approval-requests for a random group's tool: an
	// answer that is not pending and for that group alone is an error.
	Create ScaleRead `json:"create"`
	// OutsiderRefused: a reviewer in no group was refused a decision on a
	// routed request; MemberDecided: a member of its group then approved it.
	OutsiderRefused bool `json:"outsider_refused"`
	MemberDecided   bool `json:"member_decided"`
}

// groupName is group k's name in the policy file, and groupTool the tool
// its rule routes to it.
func groupName(k int) string { return fmt.Sprintf("g%04d", k) }
func groupTool(k int) string { return "team." + groupName(k) }

// groupPrincipal is reviewer j of group k.
func groupPrincipal(k, j int) string { return fmt.Sprintf("reviewer-%s-%02d", groupName(k), j) }

// writeGroupsPolicy writes the routing phase's policy file into a new
// temporary directory, and returns its path and how to remove it.
func writeGroupsPolicy(groups int) (string, func(), error) {
	var b strings.Builder
	b.WriteString("rules:\n")
	for k := range groups {
		fmt.Fprintf(&b, "  - name: team %s\n    match: request.tool == %q\n    action: ask\n    reviewers: %s\n", groupName(k), groupTool(k), groupName(k))
	}
	b.WriteString("groups:\n")
	for k := range groups {
		fmt.Fprintf(&b, "  %s: [", groupName(k))
		for j := range scaleGroupSize {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(groupPrincipal(k, j))
		}
		b.WriteString("]\n")
	}
	dir, err := os.MkdirTemp("", "airlock-bench-groups-")
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

// measureRouting seeds the groups' reviewers, then for half of
// cfg.Duration times creates routed to random groups from cfg.Clients
// clients across the replicas, and last checks the routing holds for a
// decision: refused to a reviewer in no group, taken from a member.
func measureRouting(ctx context.Context, cfg Config, t *target, x *ScaleReport) error {
	g := cfg.Groups
	r := &ScaleRouting{Groups: g, Reviewers: g * scaleGroupSize, Rules: g}
	x.Routing = r
	setup, cancel := context.WithTimeout(ctx, time.Minute+time.Duration(r.Reviewers)*time.Second/scaleSeedRate)
	defer cancel()
	fmt.Fprintf(cfg.Progress, "scale: seeding %d reviewers in %d groups\n", r.Reviewers, g)
	start := time.Now()
	member, err := seedReviewers(setup, t, g)
	if err != nil {
		return err
	}
	r.SeedS = round(time.Since(start).Seconds(), 1)
	inst, err := t.newInstance(setup, t.urls[0], "bench scale routing")
	if err != nil {
		return err
	}

	run := randomHex(4)
	var seq atomic.Int64
	var mu sync.Mutex
	var routed string // one request routed to group 0, for the decisions
	half := cfg.Duration / 2
	fmt.Fprintf(cfg.Progress, "scale: creates routed to one of %d groups, %d clients over %d replicas, %s\n", g, cfg.Clients, len(t.urls), half)
	r.Create = measureReads(ctx, cfg, half, func(ctx context.Context, i int, rnd *rand.Rand) error {
		k, n := rnd.IntN(g), seq.Add(1)
		body := strings.Replace(requestBody(n, "24h"), `"payments.refund"`, `"`+groupTool(k)+`"`, 1)
		var a struct {
			ID        string   `json:"id"`
			State     string   `json:"state"`
			Reviewers []string `json:"reviewers"`
		}
		err := t.call(ctx, "POST", t.base(i), "/v1/instances/"+inst+"/approval-requests", t.agent, body, &a, "Idempotency-Key", fmt.Sprintf("route-%s-%d", run, n))
		if err != nil {
			return err
		}
		if a.State != string(airlock.StatePending) || !slices.Equal(a.Reviewers, []string{groupName(k)}) {
			return fmt.Errorf("%w: a create for %s answered %s for %v", errWrongRead, groupName(k), a.State, a.Reviewers)
		}
		if k == 0 {
			mu.Lock()
			routed = a.ID
			mu.Unlock()
		}
		return nil
	})
	if routed == "" {
		// No create drew group 0: make one, outside the timing.
		body := strings.Replace(requestBody(0, "24h"), `"payments.refund"`, `"`+groupTool(0)+`"`, 1)
		c, err := t.create(setup, t.urls[0], inst, "route-"+run+"-0", body)
		if err != nil {
			return err
		}
		routed = c.ID
	}
	var he *httpError
	_, err = t.decide(setup, t.urls[0], routed, "approved")
	r.OutsiderRefused = errors.As(err, &he) && he.status == http.StatusForbidden
	var d apiRequest
	err = t.call(setup, "POST", t.urls[len(t.urls)-1], "/v1/approval-requests/"+routed+"/decision", member, `{"status":"approved"}`, &d)
	r.MemberDecided = err == nil && d.State == string(airlock.StateApproved)
	fmt.Fprintf(cfg.Progress, "scale: routed create p50 %.2f ms, p99 %.2f ms (%d creates, %d errors); outsider refused %t, member decided %t\n",
		r.Create.LatencyMS.P50, r.Create.LatencyMS.P99, r.Create.Reads, r.Create.Errors, r.OutsiderRefused, r.MemberDecided)
	return nil
}

// seedReviewers creates a reviewer token for each principal the groups
// policy lists, through the store contract from scaleWriters writers, and
// returns the secret of group 0's first reviewer; the others' secrets are
// not kept.
func seedReviewers(ctx context.Context, t *target, groups int) (string, error) {
	st, err := postgres.Open(ctx, t.spec.Postgres, postgres.WithSchema(t.spec.Schema), postgres.WithMaxConns(scaleWriters))
	if err != nil {
		return "", fmt.Errorf("open the run's store to seed reviewers: %w", err)
	}
	defer st.Close()
	n := groups * scaleGroupSize
	member := airlock.NewTokenSecret()
	err = seedEach(ctx, 0, n, func(ctx context.Context, i int) error {
		secret := member
		if i > 0 {
			secret = airlock.NewTokenSecret()
		}
		k, j := i/scaleGroupSize, i%scaleGroupSize
		err := st.CreateToken(ctx, airlock.Token{
			ID: airlock.NewID(airlock.PrefixToken), Name: "bench " + groupPrincipal(k, j), Role: airlock.RoleReviewer,
			Principal: groupPrincipal(k, j), Hash: airlock.HashSecret(secret), CreatedAt: time.Now(), CreatedBy: "system:bench",
		})
		if err != nil {
			return fmt.Errorf("seed reviewer %s: %w", groupPrincipal(k, j), err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return member, ctx.Err()
}
