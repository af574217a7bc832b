// Package migrate reads a store driver's numbered SQL migrations. Each
// driver embeds its own files and applies them in its own dialect (one
// transaction each, recorded in schema_migrations); what they share is the
// rule for naming and ordering the files, kept here once so that the two
// drivers cannot drift apart on it.
package migrate

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Migration is one numbered SQL file.
type Migration struct {
	Version int    // the file's number: 1 for 0001_init.sql
	Name    string // the file's base name, recorded in schema_migrations
	SQL     string // the file's text
}

// Load reads the files dir/*.sql of fsys in version order. A file is named
// NNNN_what.sql; versions must run 1, 2, 3… without gaps or repeats, so
// that a mis-numbered file fails every test rather than silently
// reordering the schema's history.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must look like 0001_what.sql", base)
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: base, SQL: string(body)})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d", m.Name, i+1)
		}
	}
	return ms, nil
}
