package sqlcore_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/airlockhq/airlock/store/sqlcore"
)

// TestLoadStatements reads blocks into their fields, drops comments and
// the blank lines at a block's ends, and puts fragments in where named,
// from the files and from Go.
func TestLoadStatements(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"sql/a.sql": {Data: []byte(`-- The file's own comment.

-- name: cols
-- cols are the columns.
t.id, t.name

-- name: Tokens.ByID
-- ByID reads one token.
SELECT {{cols}} FROM tokens t
	-- a comment inside
WHERE t.id = @id

`)},
		"sql/b.sql": {Data: []byte("-- name: Tokens.List\n{{tick}}\nSELECT {{cols}}, {{clock}} FROM tokens t\n")},
		"sql/c.sql": {Data: []byte("-- name: tick\nWITH tick AS (SELECT 1)\n")},
	}
	q, err := sqlcore.LoadStatements(fsys, "sql/*.sql", map[string]string{"clock": "tick.now"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "SELECT t.id, t.name FROM tokens t\nWHERE t.id = @id"; q.Tokens.ByID != want {
		t.Errorf("ByID = %q, want %q", q.Tokens.ByID, want)
	}
	if want := "WITH tick AS (SELECT 1)\nSELECT t.id, t.name, tick.now FROM tokens t"; q.Tokens.List != want {
		t.Errorf("List = %q, want %q", q.Tokens.List, want)
	}
	if q.Tokens.Create != "" {
		t.Errorf("Create = %q, want it left out", q.Tokens.Create)
	}
}

// TestLoadStatementsRefuses names the file, the block and what is wrong.
func TestLoadStatementsRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file string
		fragments  map[string]string
		want       string
	}{
		{"a concern that does not exist", "-- name: Nothing.ByID\nSELECT 1", nil, "sql/x.sql:1: block Nothing.ByID: Statements has no concern Nothing"},
		{"a statement that does not exist", "-- name: Tokens.Nothing\nSELECT 1", nil, "sql/x.sql:1: block Tokens.Nothing: TokenSQL has no statement Nothing"},
		{"a name given twice", "-- name: Tokens.ByID\nSELECT 1\n-- name: Tokens.ByID\nSELECT 2", nil, "sql/x.sql:3: block Tokens.ByID is named twice (first at sql/x.sql:1)"},
		{"a name of neither kind", "-- name: tokens.byID\nSELECT 1", nil, `block name "tokens.byID" is neither`},
		{"a reference to no fragment", "-- name: Tokens.ByID\nSELECT {{cols}}", nil, "block Tokens.ByID refers to {{cols}}, which is no fragment"},
		{"a reference to a statement", "-- name: Tokens.ByID\nSELECT 1\n-- name: Tokens.List\n{{Tokens.ByID}}", nil, "refers to {{Tokens.ByID}}, which is no fragment"},
		{"a fragment nobody uses", "-- name: Tokens.ByID\nSELECT 1", map[string]string{"cols": "t.id"}, "fragments: fragment cols is never used"},
		{"fragments in a circle", "-- name: a\n{{b}}\n-- name: b\n{{a}}\n-- name: Tokens.ByID\n{{a}}", nil, "sql/x.sql:1: fragments refer to each other in a circle: a → b → a"},
		{"SQL before the first name", "SELECT 1\n-- name: Tokens.ByID\nSELECT 1", nil, "sql/x.sql:1: SQL before the first -- name: line"},
	} {
		_, err := sqlcore.LoadStatements(fstest.MapFS{"sql/x.sql": {Data: []byte(tc.file)}}, "sql/*.sql", tc.fragments)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := sqlcore.LoadStatements(fstest.MapFS{}, "sql/*.sql", nil); err == nil || !strings.Contains(err.Error(), "no file") {
		t.Errorf("no file: err = %v, want one saying so", err)
	}
}
