package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCLIGrants: `requests approve --grant` makes a grant that approves
// the next same call; `grants list` shows its uses left; `grants revoke`
// ends it; the flags that need --grant refuse without it.
func TestCLIGrants(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	call := `{"tool":"issue_refund","arguments":{"amount":4900}}`
	id := s.create(t, call)
	s.cli(t, s.reviewer, "requests", "approve", id, "--grant-uses", "2", "--yes").want(t, exitUsage, "--grant-uses without --grant")
	out := s.cli(t, s.reviewer, "requests", "approve", id, "--grant", "1h", "--grant-uses", "2", "--yes").want(t, 0, "approve --grant").stdout
	if !strings.Contains(out, "approved "+id) || !strings.Contains(out, "Granted grt_") || !strings.Contains(out, "2 more calls of issue_refund") {
		t.Fatalf("approve --grant said:\n%s", out)
	}
	gid := out[strings.Index(out, "grt_"):]
	gid = gid[:strings.IndexAny(gid, ": ")]

	next := s.api.call("POST", "/v1/instances/"+s.instance+"/approval-requests", s.agent, call, "Idempotency-Key", "cli-grant-2").want(t, 201, "create")
	if next.Str("state") != "approved" {
		t.Fatalf("the next same call is %s", next.Str("state"))
	}

	list := s.cli(t, s.reviewer, "grants", "list").want(t, 0, "grants list").stdout
	if !strings.Contains(list, gid) || !strings.Contains(list, "1 of 2") || !strings.Contains(list, "live") {
		t.Fatalf("grants list:\n%s", list)
	}
	var page struct {
		Items []struct {
			ID       string `json:"id"`
			UsesLeft int    `json:"uses_left"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(s.cli(t, s.reviewer, "grants", "list", "--json").want(t, 0, "list --json").stdout), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || page.Items[0].ID != gid || page.Items[0].UsesLeft != 1 {
		t.Fatalf("grants list --json: %+v", page)
	}
	s.cli(t, s.agent, "grants", "list").want(t, exitAuth, "an agent listing grants")
	if out := s.cli(t, s.reviewer, "grants", "revoke", gid).want(t, 0, "revoke").stdout; !strings.Contains(out, "Revoked "+gid) {
		t.Fatalf("revoke said %q", out)
	}
	if list := s.cli(t, s.reviewer, "grants", "list").want(t, 0, "list after revoke").stdout; strings.Contains(list, gid) {
		t.Fatalf("a revoked grant is listed as live:\n%s", list)
	}
	if list := s.cli(t, s.reviewer, "grants", "list", "--all").want(t, 0, "list --all").stdout; !strings.Contains(list, "revoked") {
		t.Fatalf("grants list --all:\n%s", list)
	}
	s.cli(t, s.reviewer, "grants", "revoke", "grt_nope").want(t, exitNotFound, "revoke an unknown grant")
}
