package airlock_test

import (
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// TestArgumentsDiff: an edit's diff keeps the lines both sides share and
// marks exactly the changed ones, in order.
func TestArgumentsDiff(t *testing.T) {
	t.Parallel()
	d := airlock.ArgumentsDiff([]byte(`{"sql":"DROP TABLE users","db":"prod"}`), []byte(`{"sql":"SELECT 1","db":"prod"}`))
	var got []string
	for _, l := range d {
		got = append(got, string(l.Op)+l.Text)
	}
	want := []string{" {", `-  "sql": "DROP TABLE users",`, `+  "sql": "SELECT 1",`, `   "db": "prod"`, " }"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("diff:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !airlock.Changed(d) || airlock.Changed(airlock.ArgumentsDiff([]byte(`{"a":1}`), []byte(`{ "a": 1 }`))) {
		t.Fatal("Changed is wrong")
	}
}
