package provider

import (
	"testing"

	"github.com/airlockhq/airlock"
)

// TestBoardAuthorization checks that agents, reviewers and admins read the
// board and only reviewers and admins change it.
func TestBoardAuthorization(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := t.Context()
	if _, err := b.svc.CreateColumn(ctx, b.reviewer, "todo", "To do"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.CreateColumn(ctx, b.admin, "done", "Done"); err != nil {
		t.Fatal(err)
	}
	item, err := b.svc.CreateWorkItem(ctx, b.admin, "Plan", "todo")
	if err != nil {
		t.Fatal(err)
	}
	done := "done"

	_, err = b.svc.CreateColumn(ctx, b.agent, "doing", "Doing")
	wantCode(t, err, airlock.CodeForbidden, "")
	_, err = b.svc.CreateWorkItem(ctx, b.agent, "Sneak", "todo")
	wantCode(t, err, airlock.CodeForbidden, "")
	_, err = b.svc.UpdateWorkItem(ctx, b.agent, airlock.WorkItemPatch{ID: item.ID, ColumnKey: &done})
	wantCode(t, err, airlock.CodeForbidden, "")
	_, err = b.svc.Board(ctx, airlock.Caller{})
	wantCode(t, err, airlock.CodeForbidden, "")

	for _, c := range []airlock.Caller{b.agent, b.reviewer, b.admin} {
		board, err := b.svc.Board(ctx, c)
		if err != nil || len(board) != 2 || len(board[0].Items) != 1 || board[0].Items[0].ID != item.ID {
			t.Fatalf("%s reads the board %+v, %v", c.Role, board, err)
		}
		if got, err := b.svc.WorkItem(ctx, c, item.ID); err != nil || got.ID != item.ID {
			t.Fatalf("%s reads the item: %v", c.Role, err)
		}
	}
	moved, err := b.svc.UpdateWorkItem(ctx, b.reviewer, airlock.WorkItemPatch{ID: item.ID, ColumnKey: &done, IfVersion: 1})
	if err != nil || moved.ColumnKey != "done" || moved.Version != 2 {
		t.Fatalf("reviewer moves the item: %+v, %v", moved, err)
	}
	_, err = b.svc.UpdateWorkItem(ctx, b.admin, airlock.WorkItemPatch{ID: item.ID, ColumnKey: &done, IfVersion: 1})
	wantCode(t, err, airlock.CodeInvalidRequest, "")
	_, err = b.svc.CreateColumn(ctx, b.reviewer, "Bad Key", "x")
	wantCode(t, err, airlock.CodeInvalidRequest, "")
	_, err = b.svc.WorkItem(ctx, b.agent, "wi_missing")
	wantCode(t, err, airlock.CodeNotFound, "")
}
