package airlock

import (
	"errors"
	"unicode/utf8"

	"github.com/airlockhq/airlock/internal/strictjson"
)

// MaxJSONDepth is the deepest nesting of objects and arrays accepted anywhere.
const MaxJSONDepth = strictjson.MaxDepth

// Member is one key of a JSON object with its raw value, in document order.
type Member = strictjson.Member

// ParseObject checks that data is one strict JSON object and returns its
// top-level members with their raw values.
//
// Go's encoding/json matches keys case-insensitively, keeps the last of
// duplicate keys and replaces invalid UTF-8 silently. A reviewer must see
// exactly what will run, so anywhere in the document this rejects duplicate
// keys, keys that differ only in case, invalid UTF-8, unpaired surrogate
// escapes, NUL (raw or escaped), nesting deeper than MaxJSONDepth and
// numbers a 64-bit float cannot hold (internal/strictjson). A refusal is
// invalid_request, its field the path that holds the fault.
func ParseObject(data []byte) ([]Member, error) {
	members, err := strictjson.ParseObject(data)
	return members, jsonError(err)
}

// CheckJSON checks that data is one strict JSON value of any type, under the
// rules of ParseObject; path names it in errors.
func CheckJSON(path string, data []byte) error {
	return jsonError(strictjson.Check(path, data))
}

// Canonical returns a canonical encoding of a strict JSON value: object keys
// sorted, no insignificant space, numbers as written. Two documents with the
// same meaning have the same canonical bytes, which makes them safe to hash.
// It refuses what CheckJSON refuses: encoding/json, given duplicate keys,
// keeps the last one and it ignores data after the first value, so two
// different documents would hash alike.
func Canonical(data []byte) ([]byte, error) {
	c, err := strictjson.Canonical(data)
	return c, jsonError(err)
}

// EncodeJSON encodes v as compact JSON without HTML escaping: <, > and &
// stay as they are, so text goes out as its author wrote it.
func EncodeJSON(v any) ([]byte, error) { return strictjson.Encode(v) }

// jsonError is where the strict parser's refusals become the domain's:
// invalid_request, its field the path of the fault, its message the
// parser's (the path, then the reason). Other errors pass as they are.
func jsonError(err error) error {
	var e *strictjson.Error
	if errors.As(err, &e) {
		return Invalid(e.Path, "%s", e.Error())
	}
	return err
}

// Clip shortens a text for an error message: a body may hold keys or
// values of a megabyte, and echoing them back helps nobody.
func Clip(s string) string {
	const shown = 64
	if len(s) <= shown {
		return s
	}
	cut := shown - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
