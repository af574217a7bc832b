package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/airlockhq/airlock/client"
)

var grantsCommand = command{
	name:    "grants",
	args:    "list|revoke [flags]",
	summary: "List and revoke grants, the standing approvals reviewers give (reviewers and admins), on a running server.",
	run:     runGrants,
}

// grantSubcommands is filled in init (see requestSubcommands).
var grantSubcommands []subcommand

func init() {
	grantSubcommands = []subcommand{
		{"list", "[--all] [--tool T]", "list the live grants (every grant with --all), newest first, with their uses left", runGrantsList},
		{"revoke", "<id>", "revoke a grant: it approves nothing more", runGrantsRevoke},
	}
}

func runGrants(ctx context.Context, a *App, args []string) error {
	return runSubcommand(ctx, a, "grants", "Grants on a running server, for reviewers and admins (docs/policy.md).", grantSubcommands, args)
}

func runGrantsList(ctx context.Context, a *App, args []string) error {
	var all *bool
	var tool *string
	flags := func(fs *flag.FlagSet) {
		all = fs.Bool("all", false, "list every grant, ended ones too")
		tool = fs.String("tool", "", "only the grants of this tool")
	}
	return listAction(a, "grants", grantSubcommands, args, flags,
		func(c *client.Client) ([]client.Grant, error) { return c.ListGrants(ctx, !*all, *tool) },
		"ID\tTOOL\tMATCH\tSCOPE\tUSES LEFT\tSTATE\tEXPIRES\tBY", func(g client.Grant, now time.Time) []string {
			left := "unlimited"
			if g.UsesLeft != nil {
				left = strconv.Itoa(*g.UsesLeft) + " of " + strconv.Itoa(*g.Uses)
			}
			scope := "instance " + g.InstanceID
			if g.Agent != "" {
				scope = "agent " + g.Agent
			}
			return []string{g.ID, g.Tool, clip(g.Match, 40), scope, left, string(g.State), until(now, g.ExpiresAt), g.CreatedBy}
		})
}

func runGrantsRevoke(ctx context.Context, a *App, args []string) error {
	return idAction(ctx, a, "grants", grantSubcommands, "revoke", args,
		func(c *client.Client, id string) (*client.Grant, error) { return c.RevokeGrant(ctx, id) },
		func(w io.Writer, _ string, g *client.Grant) {
			fmt.Fprintf(w, "Revoked %s (%s): it approves nothing more.\n", g.ID, g.Tool)
		})
}
