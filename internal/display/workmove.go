package display

import (
	"encoding/json"

	"github.com/airlockhq/airlock"
)

// WorkMove says a work_move in plain words, with the board's
// column names: "Move item “Fix login” from Doing to Done". input and
// observed are the command's Input and Observed; board is the board as it
// is now, or nil when it could not be read. note says when the item is no
// longer where it was when the agent asked, so approving would fail. The
// inbox and the CLI both show a work_move this way.
func WorkMove(input, observed json.RawMessage, board []airlock.Column) (text, note string) {
	mv, err := airlock.ParseWorkMove(input)
	if err != nil {
		return "work_move with input the server cannot read", ""
	}
	var obs airlock.WorkMoveObserved
	_ = json.Unmarshal(observed, &obs) // unreadable: said without its origin
	cols := map[string]string{}
	var current *airlock.WorkItem
	for _, col := range board {
		cols[col.Key] = col.Name
		for i, it := range col.Items {
			if it.ID == mv.ItemID {
				current = &col.Items[i]
			}
		}
	}
	colName := func(key string) string {
		if n := cols[key]; n != "" {
			return n
		}
		return key
	}
	title := obs.ItemTitle
	if title == "" {
		title = mv.ItemID
	}
	text = "Move item “" + title + "” to " + colName(mv.ColumnKey)
	if obs.FromColumnKey != "" {
		text = "Move item “" + title + "” from " + colName(obs.FromColumnKey) + " to " + colName(mv.ColumnKey)
	}
	switch {
	case board == nil:
	case current == nil:
		note = "The item no longer exists on the board: approving will fail and record nothing."
	case obs.FromColumnKey != "" && current.ColumnKey != obs.FromColumnKey:
		note = "The item has moved since the agent asked (it is now in " + colName(current.ColumnKey) + "): approving will fail and record nothing."
	}
	return text, note
}
