package display_test

import (
	"encoding/json"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/display"
)

// TestWorkMove: a work_move in plain words with the columns'
// names, and a note when approving would fail.
func TestWorkMove(t *testing.T) {
	in := json.RawMessage(`{"itemId":"wi_1","columnKey":"done"}`)
	obs := json.RawMessage(`{"fromColumnKey":"doing","itemTitle":"Fix login"}`)
	board := func(itemIn string) []airlock.Column {
		cols := []airlock.Column{{Key: "doing", Name: "Doing"}, {Key: "done", Name: "Done"}}
		for i := range cols {
			if cols[i].Key == itemIn {
				cols[i].Items = []airlock.WorkItem{{ID: "wi_1", Title: "Fix login", ColumnKey: itemIn}}
			}
		}
		return cols
	}
	for _, c := range []struct {
		name       string
		obs        json.RawMessage
		board      []airlock.Column
		text, note string
	}{
		{"where it was", obs, board("doing"), "Move item “Fix login” from Doing to Done", ""},
		{"moved since", obs, board("done"), "Move item “Fix login” from Doing to Done", "The item has moved since the agent asked (it is now in Done): approving will fail and record nothing."},
		{"gone", obs, board(""), "Move item “Fix login” from Doing to Done", "The item no longer exists on the board: approving will fail and record nothing."},
		{"board unknown", obs, nil, "Move item “Fix login” from doing to done", ""},
		{"nothing observed", nil, board("doing"), "Move item “wi_1” to Done", ""},
	} {
		text, note := display.WorkMove(in, c.obs, c.board)
		if text != c.text || note != c.note {
			t.Errorf("%s: got %q, %q; want %q, %q", c.name, text, note, c.text, c.note)
		}
	}
	if text, _ := display.WorkMove(json.RawMessage(`{"itemId":1}`), nil, nil); text != "work_move with input the server cannot read" {
		t.Errorf("bad input: %q", text)
	}
}
