package postgres_test

import (
	"os"
	"testing"

	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/storetest"
)

// TestSlackEndpointGainsReminders: migration 0011 gives a Slack endpoint
// created before reminders reached Slack approval_request.reminder.
func TestSlackEndpointGainsReminders(t *testing.T) {
	t.Parallel()
	schema := testkit.SchemaName(t, "t_")
	s := open(t, schema)
	storetest.SlackReminders.Before(t, s)
	s.Close()
	// Run the migration's SQL again: the migrator applies only versions
	// after the newest applied, so deleting its row would not re-run it
	// once later migrations exist.
	migration, err := os.ReadFile("migrations/0011_slack_reminders.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn(t, schema).Exec(t.Context(), string(migration)); err != nil {
		t.Fatal(err)
	}
	storetest.SlackReminders.After(t, open(t, schema))
}
