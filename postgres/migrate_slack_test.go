package postgres_test

import (
	"slices"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
)

// TestSlackEndpointGainsReminders: a Slack endpoint created before
// reminders reached Slack (its types listed without
// approval_request.reminder) takes them after migration 0011; a webhook
// listing the same types is left as it is.
func TestSlackEndpointGainsReminders(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := testkit.SchemaName(t, "t_")
	s := open(t, schema)
	old := []airlock.NotifyType{airlock.NotifyCreated, airlock.NotifyApproved, airlock.NotifyDenied, airlock.NotifyExpired, airlock.NotifyCancelled}
	for _, e := range []airlock.Endpoint{
		{ID: airlock.SlackEndpointID, Kind: airlock.EndpointSlack, URL: "slack:C0X"},
		{ID: airlock.NewID(airlock.PrefixEndpoint), Kind: airlock.EndpointWebhook, URL: "https://example.com/h"},
	} {
		e.Events, e.Secret, e.CreatedBy = old, airlock.NewWebhookSecret(), "tok_admin"
		if _, err := s.CreateEndpoint(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if _, err := conn(t, schema).Exec(ctx, `DELETE FROM schema_migrations WHERE version = 11`); err != nil {
		t.Fatal(err)
	}
	s = open(t, schema)
	eps, err := s.ListEndpoints(ctx, "")
	if err != nil || len(eps) != 2 {
		t.Fatalf("ListEndpoints = %v, %v", eps, err)
	}
	for _, e := range eps {
		reminded := slices.Contains(e.Events, airlock.NotifyReminder)
		if reminded != (e.Kind == airlock.EndpointSlack) || len(e.Events) != len(old)+map[bool]int{true: 1}[reminded] {
			t.Errorf("%s (%s) takes %v after the migration", e.ID, e.Kind, e.Events)
		}
	}
}
