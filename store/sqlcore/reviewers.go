package sqlcore

import (
	"context"
	"time"

	"github.com/airlockhq/airlock"
)

// Reviewer links and Slack messages (docs/notifications.md, "Slack").

// ReviewerSQL are the statements of store.Reviewers. A link is read as
// its principal, Slack user ID and email (empty for none), updated_at and
// updated_by; a Slack message as its request_id, channel, ts and
// posted_at.
type ReviewerSQL struct {
	// DeleteLink deletes the link of @principal and returns its instant;
	// no row when there was none.
	DeleteLink string
	// LinkedElsewhere selects the principal other than @principal that
	// Slack user @slack is linked to.
	LinkedElsewhere string
	// PutLink inserts or replaces the link of @principal (@slack and
	// @email, NULL for none; @by), dated @now, and returns it.
	PutLink string
	// ListLinks selects every link by principal.
	ListLinks string
	// LinkBySlack selects the link of Slack user @slack.
	LinkBySlack string
	// PutSlackMessage records where @request's message was posted
	// (@channel, @ts), dated @now, unless one is recorded: then it yields
	// no row. It returns the message.
	PutSlackMessage string
	// SlackMessage selects the message of @request.
	SlackMessage string
}

// slackUserUnique is the unique index that lets one Slack user be linked
// to one principal at most.
const slackUserUnique = "reviewer_links_slack"

func (c *Core) scanLink(row Row) (airlock.ReviewerLink, error) {
	var l airlock.ReviewerLink
	if err := row.Scan(&l.Principal, &l.SlackUserID, &l.Email, c.d.Time(&l.UpdatedAt), &l.UpdatedBy); err != nil {
		return airlock.ReviewerLink{}, err
	}
	return l, nil
}

// PutReviewerLink replaces or removes a principal's link. The Slack user
// is checked first, so that the refusal names who holds it; writers
// racing past that check meet the unique index on the Slack user, and the
// second is refused too.
func (c *Core) PutReviewerLink(ctx context.Context, l airlock.ReviewerLink) (airlock.ReviewerLink, error) {
	q := &c.q.Reviewers
	var out airlock.ReviewerLink
	err := c.d.Write(ctx, func(tx Tx) error {
		out = airlock.ReviewerLink{}
		if l.SlackUserID == "" && l.Email == "" {
			var at time.Time
			if err := tx.QueryRow(q.DeleteLink, Args{{"principal", l.Principal}}).Scan(c.d.Time(&at)); err != nil {
				return err // sql.ErrNoRows: not_found
			}
			out = airlock.ReviewerLink{Principal: l.Principal, UpdatedAt: at, UpdatedBy: l.UpdatedBy}
			return tx.Event(airlock.Event{Type: airlock.EventReviewerLinked, At: at, Actor: l.UpdatedBy, Subject: l.Principal})
		}
		if l.SlackUserID != "" {
			var other string
			err := tx.QueryRow(q.LinkedElsewhere, Args{{"slack", l.SlackUserID}, {"principal", l.Principal}}).Scan(&other)
			switch {
			case err == nil:
				return airlock.SlackUserTaken(l.SlackUserID, other)
			case !noRows(err):
				return err
			}
		}
		link, err := c.scanLink(tx.QueryRow(q.PutLink, Args{{"principal", l.Principal},
			{"slack", NullString(l.SlackUserID)}, {"email", NullString(l.Email)}, {"by", l.UpdatedBy}}))
		if c.d.Violates(err, slackUserUnique) {
			return airlock.SlackUserTaken(l.SlackUserID, "another principal")
		}
		if err != nil {
			return err
		}
		out = link
		return tx.Event(airlock.Event{Type: airlock.EventReviewerLinked, At: link.UpdatedAt, Actor: l.UpdatedBy, Subject: l.Principal})
	})
	return out, c.d.Translate(err, "reviewer link", l.Principal)
}

// ListReviewerLinks lists every link by principal.
func (c *Core) ListReviewerLinks(ctx context.Context) ([]airlock.ReviewerLink, error) {
	out, err := all(ctx, c.d, c.scanLink, c.q.Reviewers.ListLinks, nil)
	return out, c.d.Translate(err, "reviewer links", "list")
}

// ReviewerLinkBySlackUser finds a Slack user's link.
func (c *Core) ReviewerLinkBySlackUser(ctx context.Context, slackUserID string) (airlock.ReviewerLink, error) {
	l, err := c.scanLink(c.d.QueryRow(ctx, c.q.Reviewers.LinkBySlack, Args{{"slack", slackUserID}}))
	return l, c.d.Translate(err, "reviewer link of Slack user", slackUserID)
}

func (c *Core) scanSlack(row Row) (airlock.SlackMessage, error) {
	var m airlock.SlackMessage
	if err := row.Scan(&m.RequestID, &m.Channel, &m.TS, c.d.Time(&m.PostedAt)); err != nil {
		return airlock.SlackMessage{}, err
	}
	return m, nil
}

// PutSlackMessage records where a request's message was posted, unless
// one is recorded: the primary key decides between writers, and the one
// that finds a message recorded reads it.
func (c *Core) PutSlackMessage(ctx context.Context, m airlock.SlackMessage) (airlock.SlackMessage, bool, error) {
	if err := m.Validate(); err != nil {
		return airlock.SlackMessage{}, false, err
	}
	q := &c.q.Reviewers
	var (
		out     airlock.SlackMessage
		created bool
	)
	err := c.d.Write(ctx, func(tx Tx) error {
		var err error
		out, err = c.scanSlack(tx.QueryRow(q.PutSlackMessage, Args{{"request", m.RequestID}, {"channel", m.Channel}, {"ts", m.TS}}))
		created = err == nil
		if !noRows(err) {
			return err
		}
		out, err = c.scanSlack(tx.QueryRow(q.SlackMessage, Args{{"request", m.RequestID}}))
		return err
	})
	return out, created, c.d.Translate(err, "slack message", m.RequestID)
}

// GetSlackMessage reads where a request's message was posted.
func (c *Core) GetSlackMessage(ctx context.Context, requestID string) (airlock.SlackMessage, error) {
	m, err := c.scanSlack(c.d.QueryRow(ctx, c.q.Reviewers.SlackMessage, Args{{"request", requestID}}))
	return m, c.d.Translate(err, "slack message", requestID)
}
