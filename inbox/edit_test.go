package inbox

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestEditSeed: the editor's seed writes every hidden character of the
// arguments as its JSON escape and keeps everything else, so it shows
// what it edits and is the same JSON document.
func TestEditSeed(t *testing.T) {
	t.Parallel()
	args := "{\"cmd\": \"ls \u202e\u200b\U000E0041 é\",\n  \"n\": 1}"
	seed := editSeed([]byte(args))
	if want := "{\"cmd\": \"ls \\u202e\\u200b\\udb40\\udc41 é\",\n  \"n\": 1}"; seed != want {
		t.Fatalf("seed %q, want %q", seed, want)
	}
	var a, b any
	if json.Unmarshal([]byte(args), &a) != nil || json.Unmarshal([]byte(seed), &b) != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("the seed is not the same document: %v vs %v", a, b)
	}
	if strings.ContainsAny(seed, "\u202e\u200b") {
		t.Fatal("a hidden character reached the seed raw")
	}
}
