package sqlcore

import "testing"

// TestRepeatRows repeats an INSERT's one VALUES row with numbered
// parameters, and refuses a statement whose row is not parameters alone.
func TestRepeatRows(t *testing.T) {
	t.Parallel()
	const insert = `INSERT INTO t (a, b) VALUES (@a, @b)
ON CONFLICT (a) DO NOTHING`
	got, err := repeatRows(insert, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := `INSERT INTO t (a, b) VALUES (@a_0, @b_0), (@a_1, @b_1), (@a_2, @b_2)
ON CONFLICT (a) DO NOTHING`
	if got.sql != want {
		t.Errorf("repeatRows = %s\nwant %s", got.sql, want)
	}
	if names := []string{"a_0", "b_0", "a_1", "b_1", "a_2", "b_2"}; len(got.names) != len(names) {
		t.Errorf("names = %v, want %v", got.names, names)
	} else {
		for i := range names {
			if got.names[i] != names[i] {
				t.Errorf("names = %v, want %v", got.names, names)
				break
			}
		}
	}
	for _, bad := range []string{
		`INSERT INTO t (a) SELECT 1`,
		`INSERT INTO t (a, b) VALUES (@a, 1)`,
		`INSERT INTO t (a, b) VALUES (@a, lower(@b))`,
		`INSERT INTO t (a) VALUES (@a`,
	} {
		if _, err := repeatRows(bad, 2); err == nil {
			t.Errorf("repeatRows(%q) = nil error, want one", bad)
		}
	}
}
