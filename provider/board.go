package provider

import (
	"context"

	"github.com/airlockhq/airlock"
)

// canRead refuses callers that may not read the board.
func canRead(c airlock.Caller) error {
	if !airlock.CanReadBoard(c) {
		return forbidden("this token may not read the work board")
	}
	return nil
}

// canWrite refuses callers that may not change the board directly.
func canWrite(c airlock.Caller) error {
	if !airlock.CanWriteBoard(c) {
		return forbidden("only reviewer and admin tokens change the work board; agents propose moves with approval_request (work_move)")
	}
	return nil
}

// Board returns the work board: columns in order, each with its items.
// Agents, reviewers and admins read it.
func (s *Service) Board(ctx context.Context, c airlock.Caller) ([]airlock.Column, error) {
	if err := canRead(c); err != nil {
		return nil, err
	}
	return s.storeFor(c).Board(ctx)
}

// WorkItem reads one work item.
func (s *Service) WorkItem(ctx context.Context, c airlock.Caller, id string) (airlock.WorkItem, error) {
	if err := canRead(c); err != nil {
		return airlock.WorkItem{}, err
	}
	return s.storeFor(c).GetWorkItem(ctx, id)
}

// CreateColumn appends a column to the board (reviewers and admins).
func (s *Service) CreateColumn(ctx context.Context, c airlock.Caller, key, name string) (airlock.Column, error) {
	if err := canWrite(c); err != nil {
		return airlock.Column{}, err
	}
	col := airlock.Column{Key: key, Name: name}
	if err := col.Validate(); err != nil {
		return airlock.Column{}, err
	}
	col, err := s.storeFor(c).CreateColumn(ctx, col, c.ID)
	if err == nil {
		s.hub.publish() // event streams: a new audit event
	}
	return col, err
}

// CreateWorkItem adds an item to a column (reviewers and admins).
func (s *Service) CreateWorkItem(ctx context.Context, c airlock.Caller, title, columnKey string) (airlock.WorkItem, error) {
	if err := canWrite(c); err != nil {
		return airlock.WorkItem{}, err
	}
	w := airlock.WorkItem{ID: airlock.NewID(airlock.PrefixWorkItem), Title: title, ColumnKey: columnKey}
	if err := w.Validate(); err != nil {
		return airlock.WorkItem{}, err
	}
	w, err := s.storeFor(c).CreateWorkItem(ctx, w, c.ID)
	if err == nil {
		s.hub.publish()
	}
	return w, err
}

// UpdateWorkItem renames or moves an item (reviewers and admins). With
// IfVersion set it applies only to that version.
func (s *Service) UpdateWorkItem(ctx context.Context, c airlock.Caller, p airlock.WorkItemPatch) (airlock.WorkItem, error) {
	if err := canWrite(c); err != nil {
		return airlock.WorkItem{}, err
	}
	if err := p.Validate(); err != nil {
		return airlock.WorkItem{}, err
	}
	w, err := s.storeFor(c).UpdateWorkItem(ctx, p, c.ID)
	if err == nil {
		s.hub.publish()
	}
	return w, err
}
