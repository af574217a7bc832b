package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/airlockhq/airlock"
)

// Reviewer is a reviewer principal with its link to Slack and email.
type Reviewer struct {
	Principal string `json:"principal"`
	// Name is the name of the principal's newest live reviewer token, or
	// an OIDC reviewer's name.
	Name string `json:"name,omitempty"`
	// Tokens counts the principal's live reviewer tokens; a link decides
	// nothing while it is 0.
	Tokens      int        `json:"tokens"`
	SlackUserID string     `json:"slack_user_id,omitempty"`
	Email       string     `json:"email,omitempty"`
	LinkedAt    *time.Time `json:"linked_at,omitempty"`
	LinkedBy    string     `json:"linked_by,omitempty"`
	// Groups and SignedInAt are an OIDC reviewer's, as of their last
	// sign-in (docs/teams.md).
	Groups     []string   `json:"groups,omitempty"`
	SignedInAt *time.Time `json:"signed_in_at,omitempty"`
}

// EndReviewerSessions ends every inbox session of principal, on every
// replica (admins), and returns how many it ended. Ending them again
// ends none, so it is retried.
func (c *Client) EndReviewerSessions(ctx context.Context, principal string) (int, error) {
	body, err := airlock.EncodeJSON(struct {
		Principal string `json:"principal"`
	}{principal})
	if err != nil {
		return 0, fmt.Errorf("end reviewer sessions: %w", err)
	}
	var out struct {
		Ended int `json:"ended"`
	}
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/reviewers/end-sessions", body: body,
		want: []int{http.StatusOK}, retry: true}, &out); err != nil {
		return 0, err
	}
	return out.Ended, nil
}

// ListReviewers lists the reviewer principals with their links (admins).
func (c *Client) ListReviewers(ctx context.Context) ([]Reviewer, error) {
	return fetchItems[Reviewer](ctx, c, call{method: http.MethodGet, path: "/v1/reviewers", retry: true})
}

// LinkReviewer replaces principal's link to a Slack user and an email
// address (admins); both empty removes it. Putting the same link again
// changes nothing, so it is retried.
func (c *Client) LinkReviewer(ctx context.Context, principal string, in airlock.ReviewerLinkInput) (*Reviewer, error) {
	body, err := airlock.EncodeJSON(in)
	if err != nil {
		return nil, fmt.Errorf("link reviewer: %w", err)
	}
	var out Reviewer
	if _, err := c.do(ctx, call{method: http.MethodPut, path: "/v1/reviewers/" + url.PathEscape(principal) + "/link", body: body,
		want: []int{http.StatusOK}, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
