package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"

	"github.com/airlockhq/airlock"
)

// TestSlackEndpointGainsReminders: a Slack endpoint created before
// reminders reached Slack (its types listed without
// approval_request.reminder) takes them after migration 0012; a webhook
// listing the same types is left as it is.
func TestSlackEndpointGainsReminders(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "airlock.db")
	s := open(t, path)
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
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(context.Background(), `DELETE FROM schema_migrations WHERE version = 12`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s = open(t, path)
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
