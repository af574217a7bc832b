package airlock_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

func TestStoredWorkMove(t *testing.T) {
	t.Parallel()
	request := func(input, observed string) airlock.Request {
		cmd := &airlock.Command{Method: airlock.MethodWorkMove, Input: json.RawMessage(input)}
		if observed != "" {
			cmd.Observed = json.RawMessage(observed)
		}
		return airlock.Request{ID: "apr_1", InstanceID: "ins_1", OwnerID: "tok_agent",
			Proposal: &airlock.Proposal{Mode: airlock.ProposalCommand, Command: cmd},
			Decision: &airlock.Decision{Status: airlock.StateApproved, DecidedBy: "tok_reviewer"}}
	}

	m, err := request(`{"itemId":"wi_1","columnKey":"done"}`, `{"fromColumnKey":"doing","itemTitle":"Ship"}`).StoredWorkMove()
	if err != nil || m.Input.ItemID != "wi_1" || m.Input.ColumnKey != "done" || m.Observed.FromColumnKey != "doing" {
		t.Fatalf("StoredWorkMove = %+v, %v; want wi_1 from doing to done", m, err)
	}
	moved := airlock.WorkItem{ID: "wi_1", ColumnKey: "done", Version: 4}
	if d := m.Detail(moved); d != "moved work item wi_1 from doing to done (now version 4)" {
		t.Fatalf("Detail = %q", d)
	}
	if e := m.Event(moved); e.Type != airlock.EventWorkItemMoved || e.Actor != "tok_reviewer" || e.RequestID != "apr_1" ||
		e.InstanceID != "ins_1" || e.Subject != "wi_1" {
		t.Fatalf("Event = %+v, want work_item.moved of wi_1 by the approving reviewer", e)
	}

	// A request that records nothing to check the move against cannot
	// apply; the reviewer is told, and may deny it.
	_, err = request(`{"itemId":"wi_1","columnKey":"done"}`, "").StoredWorkMove()
	if airlock.ErrorCode(err) != airlock.CodeCommandFailed || !strings.Contains(err.Error(), "no observed state of item wi_1") {
		t.Fatalf("StoredWorkMove without an observation = %v, want command_failed", err)
	}
	// Stored JSON that does not decode is a store's bug, not the
	// reviewer's to fix: a plain error, internal to callers.
	for _, r := range []airlock.Request{request(`{"itemId":`, `{}`), request(`{}`, `[1]`)} {
		_, err := r.StoredWorkMove()
		if _, isDomain := errors.AsType[*airlock.Error](err); err == nil || isDomain {
			t.Fatalf("StoredWorkMove of undecodable JSON = %v, want a plain error", err)
		}
	}
}

func TestWorkItemPatchLost(t *testing.T) {
	t.Parallel()
	done := "done"
	cur := airlock.WorkItem{ID: "wi_1", ColumnKey: "todo", Version: 3}
	for _, tc := range []struct {
		p    airlock.WorkItemPatch
		code airlock.Code
		says string
	}{
		{airlock.WorkItemPatch{ID: "wi_1", ColumnKey: &done, IfVersion: 2}, airlock.CodeInvalidRequest, "at version 3, not 2"},
		{airlock.WorkItemPatch{ID: "wi_1", ColumnKey: &done, IfVersion: 3}, airlock.CodeInvalidRequest, `column "done" does not exist`},
		{airlock.WorkItemPatch{ID: "wi_1", ColumnKey: &done}, airlock.CodeInvalidRequest, `column "done" does not exist`},
		{airlock.WorkItemPatch{ID: "wi_1"}, airlock.CodeNotFound, "created while it was being updated"},
	} {
		err := tc.p.Lost(cur)
		if err.Code != tc.code || !strings.Contains(err.Message, tc.says) {
			t.Errorf("Lost(%+v) = %s: %q, want %s saying %q", tc.p, err.Code, err.Message, tc.code, tc.says)
		}
	}
}
