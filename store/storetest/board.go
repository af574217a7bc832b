package storetest

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// testBoard checks the work board: ordered columns, items whose version
// grows with every change, and an audit event per change.
func (s *mcpSuite) testBoard(t *testing.T) {
	runAll(t, []test{
		{"columns and items", s.boardColumnsItems},
		{"every change bumps the version", s.boardVersions},
		{"concurrent updates at one version: exactly one wins", s.boardVersionRace},
	})
}

func (s *mcpSuite) boardColumnsItems(t *testing.T) {
	b := s.setup(t)
	board, err := b.board.Board(b.ctx)
	wantOK(t, err)
	if len(board) != 0 {
		t.Fatalf("a new store's board = %s, want empty", show(board))
	}
	todo, doing, done := b.column(t, "todo", "To do"), b.column(t, "doing", "Doing"), b.column(t, "done", "Done ✅")
	if todo.Position != 1 || doing.Position != 2 || done.Position != 3 || done.Name != "Done ✅" || done.Key != "done" {
		t.Fatalf("columns = %s %s %s, want positions 1, 2, 3 in creation order", show(todo), show(doing), show(done))
	}
	_, err = b.board.CreateColumn(b.ctx, airlock.Column{Key: "todo", Name: "Again"}, reviewer)
	wantInvalid(t, err, "key", `column key "todo" is already taken; choose another`)
	for _, bad := range []airlock.Column{{Key: "To Do", Name: "x"}, {Key: "", Name: "x"}, {Key: "ok", Name: ""},
		{Key: strings.Repeat("k", 65), Name: "x"}, {Key: "ok", Name: strings.Repeat("n", 201)}} {
		_, err = b.board.CreateColumn(b.ctx, bad, reviewer)
		wantErr(t, err, airlock.CodeInvalidRequest, "")
	}

	at := b.clock.Advance(time.Second).Truncate(time.Microsecond)
	first := b.item(t, "Write the release notes", "doing")
	if first.Version != 1 || first.ColumnKey != "doing" || !first.CreatedAt.Equal(at) || !first.UpdatedAt.Equal(at) ||
		!strings.HasPrefix(first.ID, airlock.PrefixWorkItem) {
		t.Fatalf("new item = %s, want version 1 in doing, created and updated at %v", show(first), at)
	}
	second := b.item(t, "Ship it 🚀", "doing")
	third := b.item(t, "Plan", "todo")
	_, err = b.board.CreateWorkItem(b.ctx, airlock.WorkItem{Title: "Nowhere", ColumnKey: "missing"}, reviewer)
	wantInvalid(t, err, "column_key", `column "missing" does not exist; see the board for the column keys`)
	_, err = b.board.CreateWorkItem(b.ctx, airlock.WorkItem{Title: "", ColumnKey: "todo"}, reviewer)
	wantErr(t, err, airlock.CodeInvalidRequest, "")

	board, err = b.board.Board(b.ctx)
	wantOK(t, err)
	var keys []string
	for _, c := range board {
		keys = append(keys, c.Key)
	}
	if !slices.Equal(keys, []string{"todo", "doing", "done"}) {
		t.Fatalf("board columns = %v, want in position order", keys)
	}
	if show(board[0].Items) != show([]airlock.WorkItem{third}) || show(board[1].Items) != show([]airlock.WorkItem{first, second}) ||
		len(board[2].Items) != 0 {
		t.Fatalf("board items = %s", show(board))
	}
	got := b.getItem(t, second.ID)
	if show(got) != show(second) {
		t.Fatalf("GetWorkItem = %s, want %s", show(got), show(second))
	}
	_, err = b.board.GetWorkItem(b.ctx, "wi_missing")
	wantErr(t, err, airlock.CodeNotFound, "")
}

func (s *mcpSuite) boardVersions(t *testing.T) {
	b := s.setup(t)
	b.column(t, "todo", "To do")
	b.column(t, "done", "Done")
	w := b.item(t, "Plan", "todo")
	title := "Plan the launch"
	w2, err := b.board.UpdateWorkItem(b.ctx, airlock.WorkItemPatch{ID: w.ID, Title: &title}, reviewer)
	wantOK(t, err)
	if w2.Version != 2 || w2.Title != title || w2.ColumnKey != "todo" {
		t.Fatalf("renamed item = %s, want version 2", show(w2))
	}
	at := b.clock.Advance(time.Minute).Truncate(time.Microsecond)
	done := "done"
	w3, err := b.board.UpdateWorkItem(b.ctx, airlock.WorkItemPatch{ID: w.ID, ColumnKey: &done, IfVersion: 2}, reviewer)
	wantOK(t, err)
	if w3.Version != 3 || w3.ColumnKey != "done" || w3.Title != title || !w3.UpdatedAt.Equal(at) || !w3.CreatedAt.Equal(w.CreatedAt) {
		t.Fatalf("moved item = %s, want version 3 in done, updated at %v", show(w3), at)
	}

	_, err = b.board.UpdateWorkItem(b.ctx, airlock.WorkItemPatch{ID: w.ID, Title: &title, IfVersion: 2}, reviewer)
	wantInvalid(t, err, "if_version", "work item "+w.ID+" is at version 3, not 2: read it again and retry")
	missing := "missing"
	_, err = b.board.UpdateWorkItem(b.ctx, airlock.WorkItemPatch{ID: w.ID, ColumnKey: &missing}, reviewer)
	wantInvalid(t, err, "column_key", `column "missing" does not exist; see the board for the column keys`)
	_, err = b.board.UpdateWorkItem(b.ctx, airlock.WorkItemPatch{ID: "wi_missing", Title: &title}, reviewer)
	wantErr(t, err, airlock.CodeNotFound, "")
	_, err = b.board.UpdateWorkItem(b.ctx, airlock.WorkItemPatch{ID: w.ID}, reviewer)
	wantErr(t, err, airlock.CodeInvalidRequest, "")
	if got := b.getItem(t, w.ID); show(got) != show(w3) {
		t.Fatalf("refused updates changed the item: %s, want %s", show(got), show(w3))
	}

	var board []string
	for _, e := range b.allEvents(t) {
		if e.Subject != "" {
			board = append(board, string(e.Type)+" "+e.Subject+" by "+e.Actor)
		}
	}
	want := []string{
		"column.created todo by " + reviewer, "column.created done by " + reviewer,
		"work_item.created " + w.ID + " by " + reviewer,
		"work_item.updated " + w.ID + " by " + reviewer, "work_item.updated " + w.ID + " by " + reviewer,
	}
	if !slices.Equal(board, want) {
		t.Fatalf("board events:\n got  %v\n want %v", board, want)
	}
}

func (s *mcpSuite) boardVersionRace(t *testing.T) {
	b := s.setup(t)
	b.column(t, "todo", "To do")
	w := b.item(t, "Plan", "todo")
	const writers = 8
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		title := "Plan " + string(rune('A'+i))
		wg.Go(func() {
			_, errs[i] = b.board.UpdateWorkItem(b.ctx, airlock.WorkItemPatch{ID: w.ID, Title: &title, IfVersion: 1}, reviewer)
		})
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		if err == nil {
			wins++
			continue
		}
		wantErr(t, err, airlock.CodeInvalidRequest, "")
	}
	if got := b.getItem(t, w.ID); wins != 1 || got.Version != 2 {
		t.Fatalf("%d of %d writers won, item at version %d; want exactly 1 and version 2", wins, writers, got.Version)
	}
}
