package migrate_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/airlockhq/airlock/internal/migrate"
)

func TestLoadOrdersByVersion(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"migrations/0010_ten.sql":   {Data: []byte("-- ten")},
		"migrations/0002_two.sql":   {Data: []byte("-- two")},
		"migrations/0001_init.sql":  {Data: []byte("CREATE TABLE t (x int);")},
		"migrations/README.md":      {Data: []byte("not a migration")},
		"other/0003_elsewhere.sql":  {Data: []byte("-- not in dir")},
		"migrations/0003_three.sql": {Data: []byte("-- three")},
	}
	for v := 4; v <= 9; v++ {
		fsys[fmt.Sprintf("migrations/%04d_n.sql", v)] = &fstest.MapFile{Data: []byte("-- n")}
	}
	ms, err := migrate.Load(fsys, "migrations")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(ms) != 10 {
		t.Fatalf("Load = %d migrations, want 10", len(ms))
	}
	for i, m := range ms {
		if m.Version != i+1 {
			t.Fatalf("migration %d is version %d (%s), want %d: numeric order, not the order of names", i, m.Version, m.Name, i+1)
		}
	}
	if first := ms[0]; first.Name != "0001_init.sql" || first.SQL != "CREATE TABLE t (x int);" {
		t.Fatalf("first migration = %+v, want 0001_init.sql with its text", first)
	}
	if ms[9].Name != "0010_ten.sql" {
		t.Fatalf("last migration = %s, want 0010_ten.sql", ms[9].Name)
	}
}

func TestLoadRefusesMisnumberedFiles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		files []string
		want  string
	}{
		{"a gap", []string{"0001_a.sql", "0003_c.sql"}, "migration 0003_c.sql: expected version 2"},
		{"a repeat", []string{"0001_a.sql", "0001_b.sql"}, "expected version 2"},
		{"not starting at 1", []string{"0002_b.sql"}, "migration 0002_b.sql: expected version 1"},
		{"no number", []string{"0001_a.sql", "init.sql"}, "migration init.sql: name must look like 0001_what.sql"},
		{"no underscore", []string{"0001.sql"}, "migration 0001.sql: name must look like 0001_what.sql"},
		{"version 0", []string{"0000_zero.sql"}, "migration 0000_zero.sql: name must look like 0001_what.sql"},
		{"a negative version", []string{"-001_neg.sql"}, "name must look like 0001_what.sql"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fsys := fstest.MapFS{}
			for _, f := range tc.files {
				fsys["m/"+f] = &fstest.MapFile{Data: []byte("-- sql")}
			}
			ms, err := migrate.Load(fsys, "m")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load(%v) = %d migrations, %v; want an error saying %q", tc.files, len(ms), err, tc.want)
			}
		})
	}
}

func TestLoadEmpty(t *testing.T) {
	t.Parallel()
	ms, err := migrate.Load(fstest.MapFS{}, "migrations")
	if err != nil || len(ms) != 0 {
		t.Fatalf("Load of no files = %v, %v; want none and no error", ms, err)
	}
}

// sharedFrom is the first version both stores' migrations share a name
// at: before it, SQLite's history had one migration more than
// PostgreSQL's, and PostgreSQL's 0015 is the empty step that brought them
// level.
const sharedFrom = 16

// TestDialectsShareVersions checks the rule that keeps the two stores'
// migrations in step: both end at the same version, and from sharedFrom
// on each version has the same name in both, so one number names one
// change of the schema whichever store runs it.
func TestDialectsShareVersions(t *testing.T) {
	t.Parallel()
	load := func(dir string) []migrate.Migration {
		t.Helper()
		ms, err := migrate.Load(os.DirFS(dir), "migrations")
		if err != nil || len(ms) == 0 {
			t.Fatalf("%s: %d migrations, %v", dir, len(ms), err)
		}
		return ms
	}
	sqlite, postgres := load("../../store/sqlite"), load("../../store/postgres")
	if len(sqlite) != len(postgres) {
		t.Fatalf("SQLite's migrations end at version %d, PostgreSQL's at %d: a change both stores need takes the same number in both", len(sqlite), len(postgres))
	}
	for i := sharedFrom - 1; i < len(sqlite); i++ {
		if sqlite[i].Name != postgres[i].Name {
			t.Errorf("version %d is %s in SQLite and %s in PostgreSQL: name one change alike in both", i+1, sqlite[i].Name, postgres[i].Name)
		}
	}
}
