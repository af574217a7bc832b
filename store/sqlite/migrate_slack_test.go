package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/airlockhq/airlock/store/storetest"
)

// TestSlackEndpointGainsReminders: migration 0012 gives a Slack endpoint
// created before reminders reached Slack approval_request.reminder.
func TestSlackEndpointGainsReminders(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "airlock.db")
	s := open(t, path)
	storetest.SlackReminders.Before(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), `DELETE FROM schema_migrations WHERE version = 12`); err != nil {
		t.Fatal(err)
	}
	storetest.SlackReminders.After(t, open(t, path))
}
