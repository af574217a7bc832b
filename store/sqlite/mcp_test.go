package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlite"
	"github.com/airlockhq/airlock/store/storetest"
)

func TestStoreMCP(t *testing.T) {
	t.Parallel()
	storetest.RunMCP(t, func(t *testing.T, clock airlock.Clock, fault func(string) error) store.Store {
		return open(t, filepath.Join(t.TempDir(), "airlock.db"), sqlite.WithClock(clock), sqlite.WithFaultHook(fault))
	})
}
