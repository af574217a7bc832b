package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
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
	role := fs.String("role", "", "agent, reviewer, admin, verifier or auditor (required)")
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

// runTokensConsume has the server verify an approval token and record its
// single use (docs/tokens.md, "Single use"), with a verifier's (or an
// admin's) token: what a tool server does before it runs a call. Exit 0
// the first time; 1 with the reason when the token was used before or
// does not verify.
func runTokensConsume(ctx context.Context, a *App, args []string) error {
	// The flags of the API commands, but --token is the approval token:
	// the verifier's own token comes from AIRLOCK_TOKEN only.
	s, _ := findSubcommand("tokens", "consume")
	r := &remote{out: a.Stdout, tty: isTerminal(a.Stdout)}
	fs := flag.NewFlagSet("tokens consume", flag.ContinueOnError)
	fs.StringVar(&r.url, "url", defaultURL, "the Airlock server [$AIRLOCK_URL]")
	fs.BoolVar(&r.json, "json", false, "print JSON (the API's resources) for scripts instead of text for people")
	token := fs.String("token", "", "the approval token (execution.approval_token) [$AIRLOCK_APPROVAL_TOKEN]; the verifier's own token is $AIRLOCK_TOKEN")
	tool := fs.String("tool", "", "the tool about to run; with --args, the token must approve exactly this call")
	argsFile := fs.String("args", "", "a file holding the arguments about to be passed, as JSON; - for stdin")
	audience := fs.String("audience", "", "the audience this tool server is, when its instance registered one")
	a.setSubcommandUsage(fs, "tokens consume", s.synopsis, s.summary,
		"\nExit codes: 0 consumed now, 1 the token does not verify, 2 usage, 4 already used, 5 auth (AIRLOCK_TOKEN missing, unknown or not a verifier's).\n")
	if _, ok := a.env("AIRLOCK_TOKEN"); !ok && !slices.Contains(args, "-h") && !slices.Contains(args, "--help") && !slices.Contains(args, "-help") {
		return usageErrorf("no token: set AIRLOCK_TOKEN to a verifier token (an admin mints one: airlock tokens create --role verifier)")
	}
	if _, err := a.parseAPIArgs(fs, r, args); err != nil {
		return err
	}
	if *token == "" {
		*token, _ = a.env("AIRLOCK_APPROVAL_TOKEN")
	}
	if *token == "" || (*tool == "") != (*argsFile == "") {
		return usageErrorf("tokens consume needs --token, and --tool and --args together or neither")
	}
	in := client.ConsumeInput{Token: *token, Tool: *tool, Audience: *audience}
	if *argsFile != "" {
		callArgs, err := readArgsFile(a, *argsFile)
		if err != nil {
			return err
		}
		in.Args = callArgs
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	use, err := c.ConsumeApprovalToken(ctx, in)
	if err != nil {
		return apiError(err)
	}
	if r.json {
		return r.printJSON(use)
	}
	fmt.Fprintf(r.out, "Consumed: the approval of request %s (jti %s) is used, at %s; run the call once.\n",
		use.RequestID, use.JTI, use.ConsumedAt.UTC().Format(time.RFC3339Nano))
	return nil
}
