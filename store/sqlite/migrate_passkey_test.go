package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/airlockhq/airlock/store/storetest"
)

// TestPasskeyDecisionsGainKeys: migration 0031 gives the passkey-signed
// decisions kept before it their passkey's public key where the passkey
// still exists. The columns it adds are dropped and its row forgotten, so
// that it runs on rows kept without them.
func TestPasskeyDecisionsGainKeys(t *testing.T) {
	t.Parallel()
	m := storetest.PasskeyDecisionKeys()
	path := filepath.Join(t.TempDir(), "airlock.db")
	s := open(t, path)
	m.Before(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`ALTER TABLE passkey_decisions DROP COLUMN public_key`, `ALTER TABLE passkey_decisions DROP COLUMN args_digest`,
		`ALTER TABLE passkey_decisions DROP COLUMN rp_id`, `DELETE FROM schema_migrations WHERE version = 31`} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	m.After(t, open(t, path))
}
