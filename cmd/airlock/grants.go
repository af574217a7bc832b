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

func runGrantsList(ctx context.Context, a *App, args []string) error {
	var all *bool
	var tool *string
	flags := func(fs *flag.FlagSet) {
		all = fs.Bool("all", false, "list every grant, ended ones too")
		tool = fs.String("tool", "", "only the grants of this tool")
	}
	return listAction(a, "grants", args, flags,
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
	return idAction(ctx, a, "grants", "revoke", args,
		func(c *client.Client, id string) (*client.Grant, error) { return c.RevokeGrant(ctx, id) },
		func(w io.Writer, _ string, g *client.Grant) {
			fmt.Fprintf(w, "Revoked %s (%s): it approves nothing more.\n", g.ID, g.Tool)
		})
}
