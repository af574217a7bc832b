package slackapp_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/slackapp"
)

// TestRenderQuorum: the Slack message of a pending request for a group
// that needs two approvals says who it is for and how far it has come.
func TestRenderQuorum(t *testing.T) {
	t.Parallel()
	r := airlock.Request{ID: "apr_q", Tool: "issue_refund", Arguments: []byte(`{}`), State: airlock.StatePending,
		DeadlineAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), Reviewers: []string{"payments"}, Approvals: 2,
		Votes: []airlock.Vote{{Principal: "ada", Name: "Ada", Status: airlock.StateApproved}}}
	_, blocks := slackapp.Render(r, "https://airlock.example.com")
	js, err := json.Marshal(blocks)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"for *payments* (only its members decide)", "1 of 2 approvals (Ada)"} {
		if !strings.Contains(string(js), want) {
			t.Errorf("message lacks %q: %s", want, js)
		}
	}
}

// TestRenderAgentWords: the message of an MCP request names the agent (and
// its session), not the default instance "mcp", and labels its title and
// description as the agent's claim, in plain text.
func TestRenderAgentWords(t *testing.T) {
	t.Parallel()
	r := airlock.Request{ID: "apr_m", Kind: airlock.KindWorkChange, Title: "Rotate the *keys*", Description: "Security asked.",
		InstanceID: "ses_1", InstanceName: "Release 2.4", OwnerName: "release bot", SessionID: "ses_1",
		State: airlock.StatePending, DeadlineAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	_, blocks := slackapp.Render(r, "https://airlock.example.com")
	b, err := json.Marshal(blocks)
	if err != nil {
		t.Fatal(err)
	}
	msg := string(b)
	for _, want := range []string{`*release bot (session Release 2.4)* asks for a decision`,
		`{"type":"plain_text","text":"The agent's claim (unverified), written by release bot (session Release 2.4):\nRotate the *keys*\nSecurity asked."`} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message lacks %s:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "wants to run") {
		t.Errorf("an MCP request reads as a tool call:\n%s", msg)
	}
}

// TestRenderPurged: the message of a request whose payloads the retention
// purged says so where the arguments were, not "{}".
func TestRenderPurged(t *testing.T) {
	t.Parallel()
	purged := time.Date(2030, 4, 5, 6, 7, 8, 0, time.UTC)
	r := airlock.Request{ID: "apr_p", Tool: "issue_refund", State: airlock.StateApproved, PurgedAt: &purged,
		DeadlineAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	_, blocks := slackapp.Render(r, "https://airlock.example.com")
	js, err := json.Marshal(blocks)
	if err != nil {
		t.Fatal(err)
	}
	if msg := string(js); !strings.Contains(msg, "(arguments purged on 2030-04-05T06:07:08Z under the server's payload retention)") || strings.Contains(msg, `"text":"{}"`) {
		t.Errorf("the purged request's message: %s", msg)
	}
}

// TestRenderEdit: the messages of an edit's two requests say "Approved
// with changes", the original naming its replacement and saying it never
// runs, the replacement naming its original; a pending tool call links to
// the inbox to edit it.
func TestRenderEdit(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	orig := airlock.Request{ID: "apr_o", Kind: airlock.KindToolCall, Tool: "issue_refund", Arguments: []byte(`{"amount":4900}`),
		State: airlock.StateDenied, ReplacedBy: "apr_n", DeadlineAt: at,
		Decision: &airlock.Decision{Status: airlock.StateDenied, DecidedAt: at, DecidedByName: "Carol"}}
	edited := orig
	edited.ID, edited.ReplacedBy, edited.DerivedFrom, edited.State = "apr_n", "", "apr_o", airlock.StateApproved
	edited.Decision = &airlock.Decision{Status: airlock.StateApproved, DecidedAt: at, DecidedByName: "Carol"}
	pending := orig
	pending.ID, pending.ReplacedBy, pending.State, pending.Decision = "apr_p", "", airlock.StatePending, nil
	for _, tc := range []struct {
		r    airlock.Request
		want []string
	}{
		{orig, []string{"Approved with changes", "as request apr_n; this call was denied and never runs", "by Carol"}},
		{edited, []string{"Approved with changes", "edited the arguments of request apr_o"}},
		{pending, []string{"Edit and approve in Airlock", "https://airlock.example.com/requests/apr_p"}},
	} {
		text, blocks := slackapp.Render(tc.r, "https://airlock.example.com")
		js, err := json.Marshal(blocks)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range tc.want {
			if !strings.Contains(text+string(js), want) {
				t.Errorf("%s: the message lacks %q: %s %s", tc.r.ID, want, text, js)
			}
		}
	}
}

// TestRenderAdapterClaims: the message shows the adapter's preview and
// reversibility as its claim, in plain text.
func TestRenderAdapterClaims(t *testing.T) {
	t.Parallel()
	r := airlock.Request{ID: "apr_c", Kind: airlock.KindToolCall, Tool: "run_sql", Arguments: []byte(`{"sql":"DROP TABLE t"}`),
		State: airlock.StatePending, DeadlineAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
		Preview: &airlock.Preview{Type: "text", Content: "drops *t*"}, Reversibility: airlock.Irreversible}
	_, blocks := slackapp.Render(r, "https://airlock.example.com")
	js, err := json.Marshal(blocks)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"plain_text","text":"The adapter's claim (unverified): irreversible. Preview (text): drops *t*"`; !strings.Contains(string(js), want) {
		t.Errorf("the message lacks %s:\n%s", want, js)
	}
}
