package airlock_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

func ptr(s string) *string { return &s }

// TestBoardValidation checks the work board's input rules; each refusal
// names the field.
func TestBoardValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		err   error
		field string // "" when valid
	}{
		{"a column", airlock.Column{Key: "in-progress_2", Name: "In progress"}.Validate(), ""},
		{"a column key is required", airlock.Column{Name: "x"}.Validate(), "key"},
		{"a column key is lowercase", airlock.Column{Key: "Done", Name: "x"}.Validate(), "key"},
		{"a column key has no spaces", airlock.Column{Key: "to do", Name: "x"}.Validate(), "key"},
		{"a column key of 64", airlock.Column{Key: strings.Repeat("k", 64), Name: "x"}.Validate(), ""},
		{"a column key of 65", airlock.Column{Key: strings.Repeat("k", 65), Name: "x"}.Validate(), "key"},
		{"a column name is required", airlock.Column{Key: "k"}.Validate(), "name"},
		{"a column name of 201 bytes", airlock.Column{Key: "k", Name: strings.Repeat("n", 201)}.Validate(), "name"},
		{"an item", airlock.WorkItem{Title: "Ship it", ColumnKey: "done"}.Validate(), ""},
		{"an item title is required", airlock.WorkItem{ColumnKey: "done"}.Validate(), "title"},
		{"an item title of 201 bytes", airlock.WorkItem{Title: strings.Repeat("t", 201), ColumnKey: "done"}.Validate(), "title"},
		{"an item's column is required", airlock.WorkItem{Title: "t"}.Validate(), "column_key"},
		{"an item's column is a key", airlock.WorkItem{Title: "t", ColumnKey: "Done"}.Validate(), "column_key"},
		{"a patch of the title", airlock.WorkItemPatch{ID: "wi_1", Title: ptr("t")}.Validate(), ""},
		{"a patch of the column at a version", airlock.WorkItemPatch{ID: "wi_1", ColumnKey: ptr("done"), IfVersion: 3}.Validate(), ""},
		{"a patch changes something", airlock.WorkItemPatch{ID: "wi_1"}.Validate(), ""},
		{"a patch's title is not empty", airlock.WorkItemPatch{ID: "wi_1", Title: ptr("")}.Validate(), "title"},
		{"a patch's column is a key", airlock.WorkItemPatch{ID: "wi_1", ColumnKey: ptr("no way")}.Validate(), "column_key"},
		{"a patch's version is not negative", airlock.WorkItemPatch{ID: "wi_1", Title: ptr("t"), IfVersion: -1}.Validate(), "if_version"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.name == "a patch changes something" {
				if airlock.ErrorCode(tc.err) != airlock.CodeInvalidRequest {
					t.Fatalf("an empty patch = %v, want invalid_request", tc.err)
				}
				return
			}
			if tc.field == "" {
				if tc.err != nil {
					t.Fatalf("err = %v, want valid", tc.err)
				}
				return
			}
			var e *airlock.Error
			if !errors.As(tc.err, &e) || e.Code != airlock.CodeInvalidRequest || e.Field != tc.field {
				t.Fatalf("err = %#v, want invalid_request naming %q", tc.err, tc.field)
			}
		})
	}
}

// TestBoardPermissions checks who reads and who writes the board.
func TestBoardPermissions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		c           airlock.Caller
		read, write bool
	}{
		{airlock.Caller{Token: airlock.Token{ID: "tok_a", Role: airlock.RoleAgent}}, true, false},
		{airlock.Caller{Token: airlock.Token{ID: "tok_r", Role: airlock.RoleReviewer}}, true, true},
		{airlock.Caller{Token: airlock.Token{ID: "tok_x", Role: airlock.RoleAdmin}}, true, true},
		{airlock.Caller{}, false, false},
		{airlock.Caller{Token: airlock.Token{ID: "tok_z", Role: "ghost"}}, false, false},
	} {
		if got := airlock.CanReadBoard(tc.c); got != tc.read {
			t.Errorf("CanReadBoard(%s %s) = %v, want %v", tc.c.Role, tc.c.ID, got, tc.read)
		}
		if got := airlock.CanWriteBoard(tc.c); got != tc.write {
			t.Errorf("CanWriteBoard(%s %s) = %v, want %v", tc.c.Role, tc.c.ID, got, tc.write)
		}
	}
}

// TestDescribeWorkMove: a work_move in plain words with the columns'
// names, and a note when approving would fail.
func TestDescribeWorkMove(t *testing.T) {
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
		text, note := airlock.DescribeWorkMove(in, c.obs, c.board)
		if text != c.text || note != c.note {
			t.Errorf("%s: got %q, %q; want %q, %q", c.name, text, note, c.text, c.note)
		}
	}
	if text, _ := airlock.DescribeWorkMove(json.RawMessage(`{"itemId":1}`), nil, nil); text != "work_move with input the server cannot read" {
		t.Errorf("bad input: %q", text)
	}
}
