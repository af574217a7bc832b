package store

import (
	"context"

	"github.com/airlockhq/airlock"
)

// Board is the part of Store that keeps the work board. Every
// change is one conditional write that bumps the item's Version and
// appends an audit event in the same transaction.
type Board interface {
	// Board returns every column in position order, each with its items
	// oldest first.
	Board(ctx context.Context) ([]airlock.Column, error)
	// CreateColumn appends a column after the last one; invalid_request
	// when the key is taken.
	CreateColumn(ctx context.Context, c airlock.Column, actor string) (airlock.Column, error)
	// CreateWorkItem stores a new item at version 1 (an empty ID gets a
	// fresh "wi_" one); invalid_request when its column does not exist.
	CreateWorkItem(ctx context.Context, w airlock.WorkItem, actor string) (airlock.WorkItem, error)
	// UpdateWorkItem applies a patch and bumps the version; not_found for
	// an unknown item, invalid_request when the destination column does
	// not exist or IfVersion is not the item's version.
	UpdateWorkItem(ctx context.Context, p airlock.WorkItemPatch, actor string) (airlock.WorkItem, error)
	// GetWorkItem reads one item; not_found.
	GetWorkItem(ctx context.Context, id string) (airlock.WorkItem, error)
}
