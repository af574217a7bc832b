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
