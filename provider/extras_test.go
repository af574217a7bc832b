package provider

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/airlockhq/airlock/internal/logtest"
	"github.com/airlockhq/airlock/store/sqlite"
)

// TestNewLogsStoreExtras: the provider says once, when it is built, which
// optional parts of its store it runs with; over SQLite, the token stamp
// alone.
func TestNewLogsStoreExtras(t *testing.T) {
	t.Parallel()
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	var rec logtest.Recorder
	if _, err := New(Config{Store: store, Logger: rec.Logger()}); err != nil {
		t.Fatal(err)
	}
	want := []string{"store extras token_stamp=true token_check=false change_feed=false event_watch=true"}
	if got := rec.Take(); !slices.Equal(got, want) {
		t.Errorf("New logged %q, want %q", got, want)
	}
}
