package mailapp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/mailapp"
)

// TestComposeQuorum: the mail of a request for a group that needs two
// approvals says who it is for and how far it has come.
func TestComposeQuorum(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	r := airlock.Request{ID: "apr_q", Tool: "issue_refund", Arguments: []byte(`{}`), State: airlock.StatePending, DeadlineAt: now.Add(time.Hour),
		Reviewers: []string{"payments"}, Approvals: 2,
		Votes: []airlock.Vote{{Principal: "ada", Name: "Ada", Status: airlock.StateApproved, At: now}}}
	m := string(mailapp.Compose(r, airlock.Delivery{MessageID: "m1", Type: airlock.NotifyCreated}, "airlock@example.com", "https://airlock.example.com", now))
	for _, want := range []string{"For: payments (only its members decide)", "Needs: 1 of 2 approvals (Ada) so far, from different reviewers"} {
		if !strings.Contains(m, want) {
			t.Errorf("mail lacks %q:\n%s", want, m)
		}
	}
}
