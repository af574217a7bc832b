package postgres_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/internal/testkit/callers"
	"github.com/airlockhq/airlock/policy"
	"github.com/airlockhq/airlock/provider"
)

// BenchmarkQuorumLifecycle is the provider's benchmark of the same name
// on PostgreSQL: a request one approval decides and one that needs two
// (create, the votes, the claim), alternating at one client, with their
// lifecycles per second and their ratio.
func BenchmarkQuorumLifecycle(b *testing.B) {
	path := filepath.Join(b.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte("groups: {payments: [dave, erin]}\nrules:\n  - {name: two, match: 'request.tool == \"two\"', action: ask, reviewers: payments, approvals: 2}\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pol, err := policy.NewEngine(path, log)
	if err != nil {
		b.Fatal(err)
	}
	svc, err := provider.New(provider.Config{Store: open(b, testkit.SchemaName(b, "t_")), Logger: log, Policy: pol, Groups: pol})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	admin := callers.Admin(b, svc, "admin secret for the quorum benchmark")
	mint := func(principal string, role airlock.Role) airlock.Caller {
		c, _ := callers.Mint(b, svc, admin, airlock.NewTokenInput{Name: principal, Role: role, Principal: principal})
		return c
	}
	agent, dave, erin := mint("agent", airlock.RoleAgent), mint("dave", airlock.RoleReviewer), mint("erin", airlock.RoleReviewer)
	inst, err := svc.RegisterInstance(ctx, agent, airlock.InstanceInput{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	lifecycle := func(tool string, voters ...airlock.Caller) time.Duration {
		start := time.Now()
		r, _, err := svc.CreateRequest(ctx, agent, inst.ID, airlock.NewID("key_"), airlock.CreateRequestInput{
			Tool: tool, Arguments: json.RawMessage(`{"amount":4900}`), Timeout: "10m"})
		if err != nil {
			b.Fatal(err)
		}
		for _, v := range voters {
			if r, err = svc.Decide(ctx, v, r.ID, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
				b.Fatal(err)
			}
		}
		if r.State != airlock.StateApproved {
			b.Fatalf("after %d approvals: %s", len(voters), r.State)
		}
		if _, err := svc.Claim(ctx, agent, r.ID); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	testkit.Alternate(b, "1-vote/s", func() time.Duration { return lifecycle("one", dave) },
		"2-vote/s", func() time.Duration { return lifecycle("two", dave, erin) })
}
