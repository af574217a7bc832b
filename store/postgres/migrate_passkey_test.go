package postgres_test

import (
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
	s, schema := openFresh(t)
	m.Before(t, s)
	s.Close()
	if _, err := conn(t, schema).Exec(t.Context(), `ALTER TABLE passkey_decisions DROP COLUMN public_key, DROP COLUMN args_digest, DROP COLUMN rp_id;
DELETE FROM schema_migrations WHERE version >= 31`); err != nil {
		t.Fatal(err)
	}
	m.After(t, open(t, schema))
}
