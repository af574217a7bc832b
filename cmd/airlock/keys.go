package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/approvaltoken"
	"github.com/airlockhq/airlock/client"
)

// The keys approval tokens are signed with (docs/tokens.md), for admins.

func runKeysList(ctx context.Context, a *App, args []string) error {
	return listAction(a, "keys", args, nil,
		func(c *client.Client) ([]client.SigningKey, error) { return c.ListSigningKeys(ctx) },
		"ID\tACTIVE\tCREATED\tSIGNS FROM\tRETIRED\tPUBLISHED UNTIL", func(k client.SigningKey, now time.Time) []string {
			from, retired, until := "-", "-", "-"
			if !k.ActivatesAt.IsZero() {
				from = k.ActivatesAt.Format(time.RFC3339)
			}
			if k.RetiredAt != nil {
				retired = k.RetiredAt.Format(time.RFC3339)
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
			return []string{k.ID, active, created, from, retired, until}
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
	fmt.Fprintf(r.out, "Key %s is published now and signs approval tokens from %s.\n", k.ID, k.ActivatesAt.Format(time.RFC3339))
	fmt.Fprintln(r.out, "The old key signs until then and never after; GET /.well-known/jwks.json lists it until its last token has expired.")
	return nil
}

// runTokensVerify checks an approval token offline, as a tool server
// would: against the server's key set (fetched from --jwks, a URL or a
// file; by default the server's /.well-known/jwks.json), for the tool and
// the arguments given. Exit 0 when it verifies, 1 with the reason when not.
func runTokensVerify(ctx context.Context, a *App, args []string) error {
	s, _ := findSubcommand("tokens", "verify")
	fs := flag.NewFlagSet("tokens verify", flag.ContinueOnError)
	token := fs.String("token", "", "the approval token (execution.approval_token) [$AIRLOCK_APPROVAL_TOKEN]")
	tool := fs.String("tool", "", "the tool about to run (required)")
	argsFile := fs.String("args", "", "a file holding the arguments about to be passed, as JSON; - for stdin (required)")
	jwks := fs.String("jwks", "", "the key set: a URL or a file (default $AIRLOCK_URL/.well-known/jwks.json)")
	audience := fs.String("audience", "", "the audience this tool server is, when its instance registered one")
	at := fs.String("at", "", "check as of this time (RFC 3339), such as when a logged call ran (default now)")
	a.setSubcommandUsage(fs, "tokens verify", s.synopsis, s.summary,
		"\nExit codes: 0 the token approves this call, 1 it does not (the reason on stderr), 2 usage.\n")
	if err := a.parseFlags(fs, args); err != nil {
		return err
	}
	if *token == "" {
		*token, _ = a.env("AIRLOCK_APPROVAL_TOKEN")
	}
	if *token == "" || *tool == "" || *argsFile == "" {
		return usageErrorf("tokens verify needs --token, --tool and --args")
	}
	var now time.Time
	if *at != "" {
		var err error
		if now, err = time.Parse(time.RFC3339, *at); err != nil {
			return usageErrorf("--at %q is not an RFC 3339 time such as 2026-12-06T09:30:00Z", *at)
		}
	}
	callArgs, err := readArgsFile(a, *argsFile)
	if err != nil {
		return err
	}
	set, err := loadKeySet(ctx, a, *jwks)
	if err != nil {
		return err
	}
	c, err := set.Verify(*token, approvaltoken.Expect{Tool: *tool, Args: callArgs, Audience: *audience, Now: now})
	if err != nil {
		return fmt.Errorf("not approved (%s): %w", approvaltoken.Reason(err), err)
	}
	names := make([]string, len(c.DecidedBy))
	for i, d := range c.DecidedBy {
		names[i] = cmp.Or(d.Name, d.Principal)
	}
	fmt.Fprintf(a.Stdout, "Approved: %s may run for request %s (%s: %s), until %s.\n", c.Tool, c.Subject,
		c.DecisionSource, strings.Join(names, ", "), time.Unix(c.Expiry, 0).UTC().Format(time.RFC3339))
	return nil
}

// readArgsFile reads the call's arguments from a file, or stdin for "-",
// up to the largest body the server takes.
func readArgsFile(a *App, path string) ([]byte, error) {
	var r io.Reader
	if path == "-" {
		r = a.Stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, usageErrorf("--args: %v", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, airlock.MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--args: %w", err)
	}
	if len(data) > airlock.MaxBodyBytes {
		return nil, usageErrorf("--args: larger than %d bytes, more than any approved call", airlock.MaxBodyBytes)
	}
	return data, nil
}

// loadKeySet reads the key set from a URL or a file, or from the server
// of $AIRLOCK_URL when src is empty.
func loadKeySet(ctx context.Context, a *App, src string) (*approvaltoken.KeySet, error) {
	if src == "" {
		base, ok := a.env("AIRLOCK_URL")
		if !ok {
			base = defaultURL
		}
		src = strings.TrimRight(base, "/") + "/.well-known/jwks.json"
	}
	var data []byte
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
		if err != nil {
			return nil, usageErrorf("--jwks %s: %v", src, err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("fetch the key set: %w", err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("fetch the key set: %s answered %s", src, res.Status)
		}
		if data, err = io.ReadAll(io.LimitReader(res.Body, 1<<20)); err != nil {
			return nil, fmt.Errorf("fetch the key set: %w", err)
		}
	} else {
		var err error
		if data, err = os.ReadFile(src); err != nil {
			return nil, usageErrorf("--jwks: %v", err)
		}
	}
	set, err := approvaltoken.ParseKeySet(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	return set, nil
}
