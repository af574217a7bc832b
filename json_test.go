package airlock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/strictjson"
)

// Errors from the strict parser are invalid_request and name the path in
// Field, so the API can point at it.
func TestParseObjectErrorNamesField(t *testing.T) {
	t.Parallel()
	_, err := airlock.ParseObject([]byte(`{"arguments":{"list":[0,{"x":"\u0000"}]}}`))
	var e *airlock.Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v, want *airlock.Error", err)
	}
	if e.Code != airlock.CodeInvalidRequest || e.Field != "arguments.list[1].x" {
		t.Fatalf("code %q field %q, want invalid_request at arguments.list[1].x", e.Code, e.Field)
	}
	if !strings.HasPrefix(e.Message, "arguments.list[1].x: ") {
		t.Fatalf("message %q does not start with the path", e.Message)
	}
}

// Every refusal of the strict parser reaches callers of the domain as
// invalid_request, its field the parser's path and its message the
// parser's words, whichever function they call; accepted documents pass
// through unchanged.
func TestJSONRefusalsAreInvalidRequest(t *testing.T) {
	t.Parallel()
	calls := map[string]struct {
		domain func([]byte) error
		parser func([]byte) error
	}{
		"ParseObject": {
			func(b []byte) error { _, err := airlock.ParseObject(b); return err },
			func(b []byte) error { _, err := strictjson.ParseObject(b); return err }},
		"CheckJSON": {
			func(b []byte) error { return airlock.CheckJSON("context", b) },
			func(b []byte) error { return strictjson.Check("context", b) }},
		"Canonical": {
			func(b []byte) error { _, err := airlock.Canonical(b); return err },
			func(b []byte) error { _, err := strictjson.Canonical(b); return err }},
	}
	for _, doc := range []string{
		`{"tool":"ls","TOOL":"rm -rf /"}`, `{"a":{"b":[1,{"c":"\ud800"}]}}`, "{\"a\":\"\xff\"}", `{"n":1e400}`,
		`{} {}`, `[]`, ``, strings.Repeat("[", 65) + strings.Repeat("]", 65),
	} {
		for name, c := range calls {
			err, perr := c.domain([]byte(doc)), c.parser([]byte(doc))
			var pe *strictjson.Error
			if !errors.As(perr, &pe) {
				if err != nil || perr != nil {
					t.Errorf("%s(%q): domain %v, parser %v; want both to accept", name, doc, err, perr)
				}
				continue
			}
			var e *airlock.Error
			if !errors.As(err, &e) || e.Code != airlock.CodeInvalidRequest || e.Field != pe.Path || e.Message != pe.Error() {
				t.Errorf("%s(%q) = %#v; want invalid_request at %q saying %q", name, doc, err, pe.Path, pe.Error())
			}
		}
	}
	if members, err := airlock.ParseObject([]byte(`{"a":1}`)); err != nil || len(members) != 1 || members[0].Key != "a" {
		t.Errorf("a plain object: %v %v", members, err)
	}
}
