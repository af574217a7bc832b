package sqlite_test

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlockhq/airlock/store/storetest"
)

// TestWebSessionIDNotStored: the store keeps a web session's ID only as
// its SHA-256. The row holds the hash, and neither the database file nor
// its log holds the raw ID anywhere.
func TestWebSessionIDNotStored(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "airlock.db")
	id := storetest.SignIn(t, open(t, path))

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var hash []byte
	var n int
	if err := db.QueryRow(`SELECT id_hash, (SELECT count(*) FROM web_sessions) FROM web_sessions`).Scan(&hash, &n); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte(id)); n != 1 || !bytes.Equal(hash, sum[:]) {
		t.Fatalf("web_sessions holds %d rows, id_hash %x; want one, the SHA-256 of the ID %x", n, hash, sum)
	}
	for _, f := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(id)) {
			t.Fatalf("%s holds the raw session ID", filepath.Base(f))
		}
	}
}
