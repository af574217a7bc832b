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

// eventTypes collects repeated --event flags.
type eventTypes []airlock.NotifyType

func (e *eventTypes) String() string {
	s := make([]string, len(*e))
	for i, t := range *e {
		s[i] = string(t)
	}
	return strings.Join(s, ",")
}

func (e *eventTypes) Set(v string) error {
	for t := range strings.SplitSeq(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			*e = append(*e, airlock.NotifyType(t))
		}
	}
	return nil
}

func runWebhooksCreate(ctx context.Context, a *App, args []string) error {
	fs, r := a.apiFlagSet("webhooks", "create")
	desc := fs.String("description", "", "what the endpoint is for")
	var events eventTypes
	fs.Var(&events, "event", "an event type to receive, such as approval_request.created (repeat, or comma-separate; default all)")
	pos, c, err := a.clientArgs(fs, r, args, "<receiver-url>")
	if err != nil {
		return err
	}
	w, err := c.CreateWebhook(ctx, airlock.WebhookInput{URL: pos[0], Events: events, Description: *desc})
	if err != nil {
		return apiError(err)
	}
	if r.json {
		return r.printJSON(w)
	}
	fmt.Fprintf(r.out, "Created webhook %s → %s (%s).\n", w.ID, w.URL, eventsText(w.Events))
	fmt.Fprintf(r.out, "Signing secret (shown once; verify webhook-signature with it):\n%s\n", w.Secret)
	return nil
}

func eventsText(ts []airlock.NotifyType) string {
	if len(ts) == 0 {
		return "all events"
	}
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

func webhookState(w client.Webhook) string {
	switch {
	case !w.Enabled:
		return "disabled"
	case w.FailingSince != nil:
		return "failing"
	}
	return "enabled"
}

func runWebhooksList(ctx context.Context, a *App, args []string) error {
	return listAction(a, "webhooks", args, nil,
		func(c *client.Client) ([]client.Webhook, error) { return c.ListWebhooks(ctx) },
		"ID\tURL\tEVENTS\tSTATE\tCREATED", func(w client.Webhook, now time.Time) []string {
			return []string{w.ID, clip(w.URL, 48), clip(eventsText(w.Events), 40), webhookState(w), since(now, w.CreatedAt)}
		})
}

func runWebhooksShow(ctx context.Context, a *App, args []string) error {
	return idAction(ctx, a, "webhooks", "show", args,
		func(c *client.Client, id string) (*client.Webhook, error) { return c.GetWebhook(ctx, id) },
		func(out io.Writer, _ string, w *client.Webhook) {
			fmt.Fprintf(out, "%s → %s\n  events: %s\n  state: %s\n", w.ID, w.URL, eventsText(w.Events), webhookState(*w))
			if w.Description != "" {
				fmt.Fprintf(out, "  description: %s\n", w.Description)
			}
			if w.FailingSince != nil {
				fmt.Fprintf(out, "  failing since: %s\n", w.FailingSince.Format(time.RFC3339))
			}
			if w.DisabledAt != nil {
				fmt.Fprintf(out, "  disabled at %s: %s\n", w.DisabledAt.Format(time.RFC3339), w.DisabledReason)
			}
		})
}

func runWebhooksDelete(ctx context.Context, a *App, args []string) error {
	return idAction(ctx, a, "webhooks", "delete", args,
		func(c *client.Client, id string) (map[string]string, error) {
			return map[string]string{"deleted": id}, c.DeleteWebhook(ctx, id)
		},
		func(out io.Writer, id string, _ map[string]string) {
			fmt.Fprintf(out, "Deleted webhook %s and its deliveries.\n", id)
		})
}

func runWebhooksDeliveries(ctx context.Context, a *App, args []string) error {
	fs, r := a.apiFlagSet("webhooks", "deliveries")
	limit := fs.Int("limit", 20, "how many of the newest deliveries to show (1..500)")
	rest, c, err := a.clientArgs(fs, r, args, "<id>")
	if err != nil {
		return err
	}
	p, err := c.ListDeliveries(ctx, rest[0], "", *limit)
	if err != nil {
		return apiError(err)
	}
	if r.json {
		return r.printJSON(p)
	}
	now := time.Now()
	var rows [][]string
	for _, d := range p.Items {
		last := "-"
		if n := len(d.Attempts); n > 0 {
			a := d.Attempts[n-1]
			last = fmt.Sprintf("%s %.0fms", dash(nonZero(a.Status)), a.LatencyMS)
			if a.Error != "" {
				last += " " + clip(a.Error, 48)
			}
		}
		rows = append(rows, []string{d.ID, d.MessageID, d.Type, string(d.State), fmt.Sprint(len(d.Attempts)), last, since(now, d.CreatedAt)})
	}
	table(r.out, "ID\tWEBHOOK-ID\tTYPE\tSTATE\tATTEMPTS\tLAST\tQUEUED", rows)
	return nil
}

// nonZero is n, or "" for 0.
func nonZero(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}

func runWebhooksTest(ctx context.Context, a *App, args []string) error {
	return idAction(ctx, a, "webhooks", "test", args,
		func(c *client.Client, id string) (*client.Delivery, error) { return c.TestWebhook(ctx, id) },
		func(out io.Writer, id string, d *client.Delivery) {
			fmt.Fprintf(out, "Queued test delivery %s (webhook-id %s); see `airlock webhooks deliveries %s`.\n", d.ID, d.MessageID, id)
		})
}

func runWebhooksEnable(ctx context.Context, a *App, args []string) error {
	return idAction(ctx, a, "webhooks", "enable", args,
		func(c *client.Client, id string) (*client.Webhook, error) { return c.EnableWebhook(ctx, id) },
		func(out io.Writer, id string, w *client.Webhook) {
			fmt.Fprintf(out, "Enabled webhook %s → %s; deliveries its failures failed are attempted again (see `airlock webhooks deliveries %s`).\n", w.ID, w.URL, id)
		})
}
