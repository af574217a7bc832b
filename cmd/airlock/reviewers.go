package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

func runReviewersList(ctx context.Context, a *App, args []string) error {
	return listAction(a, "reviewers", args, nil,
		func(c *client.Client) ([]client.Reviewer, error) { return c.ListReviewers(ctx) },
		"PRINCIPAL\tNAME\tTOKENS\tSLACK\tEMAIL\tGROUPS", func(rv client.Reviewer, _ time.Time) []string {
			return []string{clip(rv.Principal, 48), dash(clip(rv.Name, 32)), fmt.Sprint(rv.Tokens), dash(rv.SlackUserID), dash(rv.Email),
				dash(clip(strings.Join(rv.Groups, ","), 40))}
		})
}

func runReviewersLink(ctx context.Context, a *App, args []string) error {
	fs, r := a.apiFlagSet("reviewers", "link")
	slack := fs.String("slack-user", "", "the Slack member ID (U…; profile → Copy member ID)")
	email := fs.String("email", "", "the email address notifications go to")
	pos, c, err := a.clientArgs(fs, r, args, "<principal>")
	if err != nil {
		return err
	}
	rv, err := c.LinkReviewer(ctx, pos[0], airlock.ReviewerLinkInput{SlackUserID: *slack, Email: *email})
	if err != nil {
		return apiError(err)
	}
	if r.json {
		return r.printJSON(rv)
	}
	if *slack == "" && *email == "" {
		fmt.Fprintf(r.out, "Unlinked reviewer %s.\n", rv.Principal)
		return nil
	}
	fmt.Fprintf(r.out, "Linked reviewer %s: Slack %s, email %s.\n", rv.Principal, dash(rv.SlackUserID), dash(rv.Email))
	if rv.Tokens == 0 && rv.SignedInAt == nil {
		fmt.Fprintf(r.out, "Note: %s has no live reviewer token and has not signed in with OIDC, so it decides nothing until it does.\n", rv.Principal)
	}
	return nil
}

func runReviewersEndSessions(ctx context.Context, a *App, args []string) error {
	fs, r := a.apiFlagSet("reviewers", "end-sessions")
	pos, c, err := a.clientArgs(fs, r, args, "<principal>")
	if err != nil {
		return err
	}
	n, err := c.EndReviewerSessions(ctx, pos[0])
	if err != nil {
		return apiError(err)
	}
	if r.json {
		return r.printJSON(map[string]any{"principal": pos[0], "ended": n})
	}
	fmt.Fprintf(r.out, "Ended %d inbox session(s) of %s, on every replica.\n", n, pos[0])
	return nil
}
