package airlock_test

import (
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
