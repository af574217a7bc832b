package main

import (
	"context"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/client"
)

func runInstancesList(ctx context.Context, a *App, args []string) error {
	fs, r := a.apiFlagSet("instances", "list")
	if _, err := a.parseAPIArgs(fs, r, args); err != nil {
		return err
	}
	if _, err := r.client(); err != nil { // checks --url
		return err
	}
	// The Go client has no list method yet: GET /v1/instances directly.
	var page struct {
		Items []client.Instance `json:"items"`
	}
	if err := r.getJSON(ctx, "/v1/instances", &page); err != nil {
		return err
	}
	if r.json {
		if page.Items == nil {
			page.Items = []client.Instance{}
		}
		return r.printJSON(page)
	}
	if len(page.Items) == 0 {
		fmt.Fprintln(r.out, "No instances.")
		return nil
	}
	now := time.Now()
	var rows [][]string
	for _, in := range page.Items {
		rows = append(rows, []string{in.ID, clip(in.Name, 40), fmt.Sprint(in.PendingCount), since(now, in.CreatedAt)})
	}
	table(r.out, "ID\tNAME\tPENDING\tCREATED", rows)
	return nil
}

func runInstancesDelete(ctx context.Context, a *App, args []string) error {
	id, r, c, err := a.idCommand("instances", "delete", args)
	if err != nil {
		return err
	}
	n, err := c.DeleteInstance(ctx, id)
	if err != nil {
		return apiError(err)
	}
	if r.json {
		return r.printJSON(map[string]any{"id": id, "cancelled": n})
	}
	fmt.Fprintf(r.out, "Deleted %s; cancelled %d pending request(s).\n", id, n)
	return nil
}
