package main

import (
	"strings"
	"testing"
)

// TestCLIReviewers: an admin links a reviewer to Slack and email, lists
// it, and unlinks it; a bad member ID is refused with the API's reason;
// a reviewer may not link.
func TestCLIReviewers(t *testing.T) {
	t.Parallel()
	srv, c := serveNew(t)
	s := &cliServer{running: srv, api: c, admin: testAdmin}
	reviewer := c.mintToken(testAdmin, "Carol", "reviewer")
	principal := c.call("GET", "/v1/reviewers", testAdmin, "").want(t, 200, "list").Body["items"].([]any)[0].(map[string]any)["principal"].(string)

	out := s.cli(t, testAdmin, "reviewers", "link", principal, "--slack-user", "U0CAROL", "--email", "carol@example.com").want(t, 0, "link").stdout
	if !strings.Contains(out, "Linked reviewer "+principal+": Slack U0CAROL, email carol@example.com") {
		t.Fatalf("link printed:\n%s", out)
	}
	out = s.cli(t, testAdmin, "reviewers", "list").want(t, 0, "list").stdout
	if !strings.Contains(out, "PRINCIPAL") || !strings.Contains(out, "Carol") || !strings.Contains(out, "U0CAROL") || !strings.Contains(out, "carol@example.com") {
		t.Fatalf("list printed:\n%s", out)
	}
	if out := s.cli(t, testAdmin, "reviewers", "list", "--json").want(t, 0, "list --json").stdout; !strings.Contains(out, `"slack_user_id": "U0CAROL"`) {
		t.Fatalf("list --json printed:\n%s", out)
	}
	if r := s.cli(t, testAdmin, "reviewers", "link", principal, "--slack-user", "carol"); r.exit == 0 || !strings.Contains(r.stderr, "slack_user_id") {
		t.Fatalf("a bad member ID: exit %d, stderr:\n%s", r.exit, r.stderr)
	}
	if r := s.cli(t, reviewer, "reviewers", "link", principal, "--email", "x@example.com"); r.exit == 0 {
		t.Fatal("a reviewer linked")
	}
	if out := s.cli(t, testAdmin, "reviewers", "link", principal).want(t, 0, "unlink").stdout; !strings.Contains(out, "Unlinked reviewer "+principal) {
		t.Fatalf("unlink printed:\n%s", out)
	}
	// An OIDC principal holds "//" and "#": the client escapes it in the
	// path once, and the server links that very principal.
	oidc := "oidc:https://accounts.example.com#1815"
	out = s.cli(t, testAdmin, "reviewers", "link", oidc, "--slack-user", "U0ADA").want(t, 0, "link oidc").stdout
	if !strings.Contains(out, "Linked reviewer "+oidc+": Slack U0ADA") {
		t.Fatalf("link of an OIDC principal printed:\n%s", out)
	}
	if out := s.cli(t, testAdmin, "reviewers", "list", "--json").want(t, 0, "list --json").stdout; !strings.Contains(out, `"principal": "`+oidc+`"`) {
		t.Fatalf("list --json after linking an OIDC principal printed:\n%s", out)
	}
}
