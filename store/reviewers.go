package store

import (
	"context"

	"github.com/airlockhq/airlock"
)

// Reviewers keeps reviewer links and the Slack messages posted.
type Reviewers interface {
	// PutReviewerLink replaces l.Principal's link (SlackUserID, Email,
	// UpdatedBy), setting UpdatedAt to the store's now, and appends
	// reviewer.linked; with both fields empty it removes the link
	// (not_found when there was none). A Slack user ID linked to another
	// principal is invalid_request: one Slack user decides as one
	// principal.
	PutReviewerLink(ctx context.Context, l airlock.ReviewerLink) (airlock.ReviewerLink, error)
	// ListReviewerLinks lists every link by principal.
	ListReviewerLinks(ctx context.Context) ([]airlock.ReviewerLink, error)
	// ReviewerLinkBySlackUser finds the link of a Slack user; not_found.
	ReviewerLinkBySlackUser(ctx context.Context, slackUserID string) (airlock.ReviewerLink, error)

	// PutSlackMessage records where m.RequestID's message was posted,
	// unless one is recorded already; it returns the one recorded, and
	// whether it is m.
	PutSlackMessage(ctx context.Context, m airlock.SlackMessage) (airlock.SlackMessage, bool, error)
	// GetSlackMessage reads where a request's message was posted;
	// not_found.
	GetSlackMessage(ctx context.Context, requestID string) (airlock.SlackMessage, error)
}
