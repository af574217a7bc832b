package postgres_test

import (
	"testing"

	"github.com/airlockhq/airlock/store/storetest"
)

// TestSlackEndpointGainsReminders: migration 0011 gives a Slack endpoint
// created before reminders reached Slack approval_request.reminder. The
// migrator applies versions above the newest recorded, so every one from
// 11 on is forgotten, and those after 11 must be safe to run again.
func TestSlackEndpointGainsReminders(t *testing.T) {
	t.Parallel()
	s, schema := openFresh(t)
	storetest.SlackReminders.Before(t, s)
	s.Close()
	if _, err := conn(t, schema).Exec(t.Context(), `DELETE FROM schema_migrations WHERE version >= 11`); err != nil {
		t.Fatal(err)
	}
	storetest.SlackReminders.After(t, open(t, schema))
}
