package postgres_test

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/store/storetest"
)

// TestWebSessionIDNotStored: the store keeps a web session's ID only as
// its SHA-256; no column of the row holds the raw ID.
func TestWebSessionIDNotStored(t *testing.T) {
	t.Parallel()
	s, schema := openFresh(t)
	id := storetest.SignIn(t, s)
	var (
		hash []byte
		row  string
	)
	if err := conn(t, schema).QueryRow(t.Context(), `SELECT id_hash, row_to_json(ws)::text FROM web_sessions ws`).Scan(&hash, &row); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte(id)); !bytes.Equal(hash, sum[:]) {
		t.Fatalf("id_hash = %x, want the SHA-256 of the ID, %x", hash, sum)
	}
	if strings.Contains(row, id) {
		t.Fatalf("the row holds the raw session ID: %s", row)
	}
}
