package bench

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/policy"
)

// TestScale runs the scale scenario tiny on PostgreSQL, over two
// replicas: 2,000 pending requests over two instances, then the first
// page and the instance reads, whose answers the scenario checks against
// what it seeded (a wrong page or pending count is an error); then 200
// more due together, whose expiry the replicas' sweeps must finish.
func TestScale(t *testing.T) {
	t.Parallel()
	db := testkit.PostgresURL(t)
	rep := run(t, Config{Scenario: Scale, DB: db, Replicas: 2, Clients: 2, Count: 2000, Duration: 2 * time.Second})
	x := rep.Scale
	if x == nil {
		t.Fatal("no scale report")
	}
	if x.Pending != 2000 || x.Instances != 2 || x.PerInstance != scalePerInstance || x.PageSize != inboxPageSize || x.SeededPerS <= 0 || !strings.Contains(x.Seeding, "CreateRequest") {
		t.Errorf("scale report %+v", x)
	}
	if e := x.Expiry; e == nil || e.Due != 200 || e.Backlog != 2000 || e.StillPending != 0 || e.ExpiredPerS <= 0 || e.Sweeps == 0 || e.MaxSweepRows == 0 || e.SweepMS.Max <= 0 {
		t.Errorf("expiry over the backlog %+v", e)
	}
	if rep.Replicas != 2 || rep.Store != "postgres" {
		t.Errorf("ran on %d replicas of %s, want 2 of postgres", rep.Replicas, rep.Store)
	}
	for name, r := range map[string]ScaleRead{"first page": x.FirstPage, "instance read": x.InstanceRead} {
		if r.Reads == 0 || r.Errors != 0 || r.PerS <= 0 || r.LatencyMS.P50 <= 0 || r.LatencyMS.P99 < r.LatencyMS.P50 {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if rep.Errors != 0 || rep.Ops != x.FirstPage.Reads+x.InstanceRead.Reads {
		t.Errorf("result %+v", rep.Result)
	}
	for _, name := range []string{"first_page", "pending_count"} {
		// Which index the planner picks depends on the table's size (at
		// 2,000 rows, half of them one instance's, a scan of the table
		// is right): only that the plan was taken is checked here.
		if !strings.Contains(x.Plans[name], "Execution Time") || x.Indexes[name] == nil {
			t.Errorf("%s: indexes %v, plan\n%s", name, x.Indexes[name], x.Plans[name])
		}
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	for _, want := range []string{"first page of 200", "instance + pending count", "pending_count reads", "200 more due together"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, table.String())
		}
	}
}

// TestScaleRouting runs the scale scenario's routing phase tiny: 3 groups
// of 20 reviewers, whose creates must each answer pending and routed to
// the one group its tool's rule names (anything else is an error), and
// whose routing must hold for a decision: refused to a reviewer in no
// group, taken from a member.
func TestScaleRouting(t *testing.T) {
	t.Parallel()
	db := testkit.PostgresURL(t)
	rep := run(t, Config{Scenario: Scale, DB: db, Replicas: 2, Clients: 2, Count: 300, Groups: 3, Duration: 2 * time.Second})
	g := rep.Scale.Routing
	if g == nil {
		t.Fatal("no routing report")
	}
	if g.Groups != 3 || g.Reviewers != 3*scaleGroupSize || g.Rules != 3 {
		t.Errorf("routing over %d reviewers in %d groups, %d rules; want 60, 3, 3", g.Reviewers, g.Groups, g.Rules)
	}
	if c := g.Create; c.Reads == 0 || c.Errors != 0 || c.LatencyMS.P99 < c.LatencyMS.P50 || c.LatencyMS.P50 <= 0 {
		t.Errorf("routed creates %+v", c)
	}
	if !g.OutsiderRefused || !g.MemberDecided {
		t.Errorf("outsider refused %t, member decided %t; want both", g.OutsiderRefused, g.MemberDecided)
	}
	if rep.Errors != 0 || rep.Ops != rep.Scale.FirstPage.Reads+rep.Scale.InstanceRead.Reads+g.Create.Reads {
		t.Errorf("result %+v", rep.Result)
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	if want := "create routed to 1 of 3 groups"; !strings.Contains(table.String(), want) {
		t.Errorf("the table lacks %q:\n%s", want, table.String())
	}
}

// TestGroupsPolicyLoads checks that the routing phase's policy file at
// its largest loads: the policy's limits (1,000 groups and rules, 1 MiB)
// would refuse a run that passed them.
func TestGroupsPolicyLoads(t *testing.T) {
	t.Parallel()
	path, remove, err := writeGroupsPolicy(MaxGroups)
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	if _, err := policy.NewEngine(path, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("%d groups: %v", MaxGroups, err)
	}
}
