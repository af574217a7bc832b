package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/airlockhq/airlock"
)

// CreateToken mints a token (admins). The secret is in this answer only.
// It is not retried on network errors, which could mint two.
func (c *Client) CreateToken(ctx context.Context, in CreateTokenInput) (*CreatedToken, error) {
	body, err := airlock.EncodeJSON(in)
	if err != nil {
		return nil, fmt.Errorf("create token: %w", err)
	}
	return fetch[CreatedToken](ctx, c, call{method: http.MethodPost, path: "/v1/tokens", body: body, want: []int{http.StatusCreated}})
}

// ListTokens lists every token, newest first, without secrets (admins).
func (c *Client) ListTokens(ctx context.Context) ([]Token, error) {
	return fetchItems[Token](ctx, c, call{method: http.MethodGet, path: "/v1/tokens", retry: true})
}

// RevokeToken revokes a token (admins); it stops working at once. Revoking
// twice keeps the first time, so it is retried on network errors.
func (c *Client) RevokeToken(ctx context.Context, id string) (*Token, error) {
	return fetch[Token](ctx, c, call{method: http.MethodDelete, path: "/v1/tokens/" + url.PathEscape(id), retry: true})
}

// Board reads the work board, columns in order with their items.
func (c *Client) Board(ctx context.Context) (*Board, error) {
	return fetch[Board](ctx, c, call{method: http.MethodGet, path: "/v1/board", retry: true})
}

// CreateColumn appends a column to the board (reviewers, admins).
func (c *Client) CreateColumn(ctx context.Context, key, name string) (*Column, error) {
	body, err := airlock.EncodeJSON(struct {
		Key  string `json:"key"`
		Name string `json:"name"`
	}{key, name})
	if err != nil {
		return nil, fmt.Errorf("create column: %w", err)
	}
	return fetch[Column](ctx, c, call{method: http.MethodPost, path: "/v1/board/columns", body: body, want: []int{http.StatusCreated}})
}

// CreateWorkItem adds a work item to a column (reviewers, admins).
func (c *Client) CreateWorkItem(ctx context.Context, title, columnKey string) (*WorkItem, error) {
	body, err := airlock.EncodeJSON(struct {
		Title     string `json:"title"`
		ColumnKey string `json:"column_key"`
	}{title, columnKey})
	if err != nil {
		return nil, fmt.Errorf("create work item: %w", err)
	}
	return fetch[WorkItem](ctx, c, call{method: http.MethodPost, path: "/v1/work-items", body: body, want: []int{http.StatusCreated}})
}

// GetWorkItem reads one work item with its column and version.
func (c *Client) GetWorkItem(ctx context.Context, id string) (*WorkItem, error) {
	return fetch[WorkItem](ctx, c, call{method: http.MethodGet, path: "/v1/work-items/" + url.PathEscape(id), retry: true})
}

// UpdateWorkItem renames or moves a work item (reviewers, admins). With
// IfVersion it applies only at that version. It is not retried on network
// errors; read the item to learn whether a lost change landed.
func (c *Client) UpdateWorkItem(ctx context.Context, id string, in WorkItemUpdate) (*WorkItem, error) {
	body, err := airlock.EncodeJSON(in)
	if err != nil {
		return nil, fmt.Errorf("update work item %s: %w", id, err)
	}
	var w WorkItem
	cl := call{method: http.MethodPatch, path: "/v1/work-items/" + url.PathEscape(id), body: body}
	if _, err := c.do(ctx, cl, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// ListSessions lists MCP sessions, newest first (reviewers and admins all,
// agents their own).
func (c *Client) ListSessions(ctx context.Context) ([]Session, error) {
	return fetchItems[Session](ctx, c, call{method: http.MethodGet, path: "/v1/sessions", retry: true})
}

// Ready reports whether the server is up and its store reachable (/readyz).
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/readyz", retry: true}, nil)
	return err
}
