package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// CreateMCPRequest creates the request of an MCP approval_request call,
// idempotently per caller and idempotencyKey: created is false for a
// replay. With a sessionId the request belongs to that session (one of the
// caller's open sessions); without, to the caller's default MCP instance.
// A command proposal is checked now (the caller holds work:write, the item
// and the destination column exist) and records what the provider saw, so
// the approval applies it only while the item is still where it was.
func (s *Service) CreateMCPRequest(ctx context.Context, c airlock.Caller, in MCPRequestInput) (airlock.Request, bool, error) {
	if c.Role != airlock.RoleAgent {
		return airlock.Request{}, false, forbidden("only agent tokens create approval requests")
	}
	if err := in.Validate(); err != nil {
		return airlock.Request{}, false, err
	}
	window, err := s.mcpWindow(in)
	if err != nil {
		return airlock.Request{}, false, err
	}
	fp, err := in.Fingerprint()
	if err != nil {
		return airlock.Request{}, false, err
	}

	st := s.storeFor(c)
	instanceID, err := s.mcpInstance(ctx, st, c, in.SessionID)
	if err != nil {
		return airlock.Request{}, false, err
	}
	r := airlock.Request{
		ID: airlock.NewRequestID(s.clock.Now()), InstanceID: instanceID, OwnerID: c.ID, Kind: in.Kind,
		Timeout: in.Timeout(), Title: in.Title, Description: in.Description,
		TargetType: in.TargetType, TargetID: in.TargetID, SessionID: in.SessionID,
		Proposal: &airlock.Proposal{Mode: in.Proposal.Mode}, Question: in.Question,
		IdempotencyKey: in.IdempotencyKey, Fingerprint: fp,
	}
	p := store.NewRequestParams{Request: r, Window: window, Actor: c.ID}
	var (
		out     airlock.Request
		created bool
	)
	if cmd := in.Proposal.Command; cmd != nil {
		out, created, err = s.createCommand(ctx, st, c, cmd, p)
	} else {
		out, created, err = s.create(ctx, st, c, p)
	}
	if airlock.ErrorCode(err) == airlock.CodeNotFound && in.SessionID != "" {
		return airlock.Request{}, false, sessionNotFound(in.SessionID, "it is closed; ")
	}
	return out, created, err
}

// mcpInstance returns the instance an MCP request belongs to: the session
// named by sessionID, which must be the caller's, or else the caller's
// default MCP instance. The owner of a session never changes, so checking
// it before the write is safe. A closed session is returned too: a replay
// of a request made before the close must find the original, and the
// store refuses a new request in it.
func (s *Service) mcpInstance(ctx context.Context, st store.Store, c airlock.Caller, sessionID string) (string, error) {
	if sessionID == "" {
		inst, err := st.MCPInstance(ctx, c.ID, c.ID)
		if err != nil {
			return "", err
		}
		return inst.ID, nil
	}
	sess, err := st.GetSession(ctx, sessionID)
	switch {
	case airlock.ErrorCode(err) == airlock.CodeNotFound || (err == nil && sess.OwnerID != c.ID):
		return "", sessionNotFound(sessionID, "")
	case err != nil:
		return "", err
	}
	return sess.ID, nil
}

// createCommand stores a command proposal after checking it against the
// caller's scopes and the board, recording what it observed so the
// approval applies it only while the target is still as it was. A command
// always goes to a person: no policy decides it at creation. When the
// target has changed since the original was made, a replay still answers
// with the original.
func (s *Service) createCommand(ctx context.Context, st store.Store, c airlock.Caller, cmd *airlock.Command, p store.NewRequestParams) (airlock.Request, bool, error) {
	observed, err := s.observeCommand(ctx, st, c, cmd)
	if err != nil {
		prev, ok, rerr := replayOf(ctx, st, c.ID, p.Request.IdempotencyKey, p.Request.Fingerprint)
		if rerr != nil || ok {
			return prev, false, rerr
		}
		return airlock.Request{}, false, err
	}
	p.Request.Tool, p.Request.Arguments = cmd.Method, cmd.Input
	p.Request.Proposal.Command = &airlock.Command{Method: cmd.Method, Input: cmd.Input, Observed: observed}
	return s.insert(ctx, st, p)
}

func sessionNotFound(id, why string) error {
	return airlock.Errorf(airlock.CodeNotFound,
		"session %q not found: %ssessionId must be one of your open sessions (see session_open), or leave it out", id, why)
}

// mcpWindow returns the decision window of an MCP request: expiresInMinutes
// shortened to the provider's maximum, or the maximum when absent, so every
// request has a deadline.
func (s *Service) mcpWindow(in MCPRequestInput) (time.Duration, error) {
	if in.ExpiresInMinutes == nil {
		return s.limits.MaxTimeout, nil
	}
	d := in.Window()
	if d < s.limits.MinTimeout {
		return 0, airlock.Invalid("expiresInMinutes", "expiresInMinutes %d is shorter than this provider's minimum window of %s",
			*in.ExpiresInMinutes, s.limits.MinTimeout)
	}
	return min(d, s.limits.MaxTimeout), nil
}

// replayOf returns the request the owner made with key when its
// fingerprint is fp (ok), idempotency_conflict when it differs, and
// nothing when there is none.
func replayOf(ctx context.Context, st store.Store, ownerID, key, fp string) (airlock.Request, bool, error) {
	prev, err := st.RequestByKey(ctx, ownerID, key)
	switch {
	case airlock.ErrorCode(err) == airlock.CodeNotFound:
		return airlock.Request{}, false, nil
	case err != nil:
		return airlock.Request{}, false, err
	case prev.Fingerprint != fp:
		return airlock.Request{}, false, airlock.Errorf(airlock.CodeIdempotencyConflict,
			"idempotencyKey %q was already used for a different request (%s); use a new key for a new request", key, prev.ID)
	}
	return prev, true, nil
}

// observeCommand checks a command proposal against the caller's scopes and
// the current board, and returns what it observed, to be re-checked when
// the command is approved.
func (s *Service) observeCommand(ctx context.Context, st store.Store, c airlock.Caller, cmd *airlock.Command) (json.RawMessage, error) {
	if cmd.Method != airlock.MethodWorkMove {
		return nil, airlock.Invalid("proposal.command.method", "proposal.command.method must be work_move, the only supported command")
	}
	if !c.HasScope(airlock.ScopeWorkWrite) {
		return nil, forbidden("work_move needs the %s scope on your token; ask an admin for a token with it, or send an advisory proposal", airlock.ScopeWorkWrite)
	}
	mv, err := airlock.ParseWorkMove(cmd.Input)
	if err != nil {
		return nil, err
	}
	item, err := st.GetWorkItem(ctx, mv.ItemID)
	if airlock.ErrorCode(err) == airlock.CodeNotFound {
		return nil, airlock.Invalid("proposal.command.input.itemId", "work item %q does not exist; find item IDs with work_list", mv.ItemID)
	}
	if err != nil {
		return nil, err
	}
	cols, err := st.Board(ctx)
	if err != nil {
		return nil, err
	}
	var keys []string
	found := false
	for _, col := range cols {
		keys = append(keys, col.Key)
		found = found || col.Key == mv.ColumnKey
	}
	if !found {
		return nil, airlock.Invalid("proposal.command.input.columnKey", "column %q does not exist; the board's columns are: %s", mv.ColumnKey, strings.Join(keys, ", "))
	}
	if item.ColumnKey == mv.ColumnKey {
		return nil, airlock.Invalid("proposal.command.input.columnKey", "work item %s is already in column %s; there is nothing to move", item.ID, item.ColumnKey)
	}
	observed, err := json.Marshal(airlock.WorkMoveObserved{FromColumnKey: item.ColumnKey, ItemTitle: item.Title})
	if err != nil {
		return nil, fmt.Errorf("observe work_move: %w", err)
	}
	return observed, nil
}
