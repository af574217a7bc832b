package main

import (
	"context"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/client"
)

// The keys approval tokens are signed with (docs/tokens.md), for admins.

func runKeysList(ctx context.Context, a *App, args []string) error {
	return listAction(a, "keys", args, nil,
		func(c *client.Client) ([]client.SigningKey, error) { return c.ListSigningKeys(ctx) },
		"ID\tACTIVE\tCREATED\tRETIRED\tPUBLISHED UNTIL", func(k client.SigningKey, now time.Time) []string {
			retired, until := "-", "-"
			if k.RetiredAt != nil {
				retired = since(now, *k.RetiredAt)
			}
			if k.PublishedUntil != nil {
				until = k.PublishedUntil.Format(time.RFC3339)
			}
			active := "no"
			if k.Active {
				active = "yes"
			}
			created := "-"
			if !k.CreatedAt.IsZero() {
				created = since(now, k.CreatedAt)
			}
			return []string{k.ID, active, created, retired, until}
		})
}

func runKeysRotate(ctx context.Context, a *App, args []string) error {
	fs, r := a.apiFlagSet("keys", "rotate")
	_, c, err := a.clientArgs(fs, r, args)
	if err != nil {
		return err
	}
	k, err := c.RotateSigningKey(ctx)
	if err != nil {
		return apiError(err)
	}
	if r.json {
		return r.printJSON(k)
	}
	fmt.Fprintf(r.out, "Approval tokens are now signed with key %s.\n", k.ID)
	fmt.Fprintln(r.out, "The old key never signs again; GET /.well-known/jwks.json lists it until its last token has expired.")
	return nil
}
