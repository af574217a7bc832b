package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

// scopes collects repeated --scope flags.
type scopes []string

func (s *scopes) String() string     { return strings.Join(*s, ",") }
func (s *scopes) Set(v string) error { *s = append(*s, v); return nil }

func runTokensCreate(ctx context.Context, a *App, args []string) error {
	fs, r := a.apiFlagSet("tokens", "create")
	name := fs.String("name", "", "what the token is for, such as \"release bot\" (required)")
	role := fs.String("role", "", "agent, reviewer or admin (required)")
	principal := fs.String("principal", "", "who holds it; a reviewer cannot decide requests of a token with the same principal (default: the token's ID)")
	var sc scopes
	fs.Var(&sc, "scope", "a finer permission, such as work:write (repeat for more)")
	if _, err := a.parseAPIArgs(fs, r, args); err != nil {
		return err
	}
	if *name == "" || *role == "" {
		return usageErrorf("tokens create needs --name and --role")
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	t, err := c.CreateToken(ctx, client.CreateTokenInput{Name: *name, Role: airlock.Role(*role), Scopes: sc, Principal: *principal})
	if err != nil {
		return apiError(err)
	}
	if r.json {
		return r.printJSON(t)
	}
	fmt.Fprintf(r.out, "Created %s token %s (%s).\n", t.Role, t.ID, clip(t.Name, 60))
	fmt.Fprintf(r.out, "Secret (shown once; only its hash is stored):\n%s\n", t.Secret)
	return nil
}

func runTokensList(ctx context.Context, a *App, args []string) error {
	return listAction(a, "tokens", args, nil,
		func(c *client.Client) ([]client.Token, error) { return c.ListTokens(ctx) },
		"ID\tNAME\tROLE\tSCOPES\tPRINCIPAL\tCREATED\tREVOKED", func(t client.Token, now time.Time) []string {
			revoked := "-"
			if t.RevokedAt != nil {
				revoked = since(now, *t.RevokedAt)
			}
			return []string{t.ID, clip(t.Name, 32), string(t.Role), dash(strings.Join(t.Scopes, ",")), dash(clip(t.Principal, 24)), since(now, t.CreatedAt), revoked}
		})
}

func runTokensRevoke(ctx context.Context, a *App, args []string) error {
	return idAction(ctx, a, "tokens", "revoke", args,
		func(c *client.Client, id string) (*client.Token, error) { return c.RevokeToken(ctx, id) },
		func(w io.Writer, _ string, t *client.Token) {
			fmt.Fprintf(w, "Revoked %s (%s): it stops working at its next request.\n", t.ID, clip(t.Name, 60))
		})
}

// dash stands in for an empty table cell.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
