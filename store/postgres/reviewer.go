package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Reviewer links and Slack messages (docs/notifications.md, "Slack").

const linkCols = `l.principal, coalesce(l.slack_user_id, ''), coalesce(l.email, ''), l.updated_at, l.updated_by`

func scanLink(row pgx.Row) (airlock.ReviewerLink, error) {
	var l airlock.ReviewerLink
	if err := row.Scan(&l.Principal, &l.SlackUserID, &l.Email, &l.UpdatedAt, &l.UpdatedBy); err != nil {
		return airlock.ReviewerLink{}, err
	}
	l.UpdatedAt = l.UpdatedAt.UTC()
	return l, nil
}

func nullText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// PutReviewerLink replaces or removes a principal's link. The unique
// index on slack_user_id decides two principals linking one Slack user at
// once: the second gets invalid_request.
func (s *Store) PutReviewerLink(ctx context.Context, l airlock.ReviewerLink) (airlock.ReviewerLink, error) {
	var out airlock.ReviewerLink
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		if l.SlackUserID == "" && l.Email == "" {
			var at time.Time
			err := t.QueryRow(ctx, tickCTE+`DELETE FROM reviewer_links WHERE principal = @principal RETURNING (SELECT now FROM tick)`,
				named{"now": s.now(), "principal": l.Principal}).Scan(&at)
			if errors.Is(err, pgx.ErrNoRows) {
				return airlock.NotFound("reviewer link", l.Principal)
			}
			if err != nil {
				return err
			}
			out = airlock.ReviewerLink{Principal: l.Principal, UpdatedAt: at.UTC(), UpdatedBy: l.UpdatedBy}
			t.event(airlock.Event{Type: airlock.EventReviewerLinked, At: out.UpdatedAt, Actor: l.UpdatedBy, Subject: l.Principal})
			return nil
		}
		if l.SlackUserID != "" {
			var other string
			err := t.QueryRow(ctx, `SELECT principal FROM reviewer_links WHERE slack_user_id = @slack AND principal <> @principal`,
				named{"slack": l.SlackUserID, "principal": l.Principal}).Scan(&other)
			switch {
			case err == nil:
				return airlock.SlackUserTaken(l.SlackUserID, other)
			case !errors.Is(err, pgx.ErrNoRows):
				return err
			}
		}
		var err error
		out, err = scanLink(t.QueryRow(ctx, tickCTE+`INSERT INTO reviewer_links AS l (principal, slack_user_id, email, updated_at, updated_by)
SELECT @principal, @slack, @email, tick.now, @by FROM tick
ON CONFLICT (principal) DO UPDATE SET slack_user_id = excluded.slack_user_id, email = excluded.email,
	updated_at = excluded.updated_at, updated_by = excluded.updated_by
RETURNING `+linkCols, named{"now": s.now(), "principal": l.Principal, "slack": nullText(l.SlackUserID),
			"email": nullText(l.Email), "by": l.UpdatedBy}))
		if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == "23505" && pe.ConstraintName == "reviewer_links_slack" {
			return airlock.SlackUserTaken(l.SlackUserID, "another principal")
		}
		if err != nil {
			return err
		}
		t.event(airlock.Event{Type: airlock.EventReviewerLinked, At: out.UpdatedAt, Actor: l.UpdatedBy, Subject: l.Principal})
		return nil
	})
	return out, translate(err, "reviewer link", l.Principal)
}

// ListReviewerLinks lists every link by principal.
func (s *Store) ListReviewerLinks(ctx context.Context) ([]airlock.ReviewerLink, error) {
	out, err := queryAll(ctx, checked{s}, scanLink, `SELECT `+linkCols+` FROM reviewer_links l ORDER BY l.principal`)
	return out, translate(err, "reviewer links", "list")
}

// ReviewerLinkBySlackUser finds a Slack user's link.
func (s *Store) ReviewerLinkBySlackUser(ctx context.Context, slackUserID string) (airlock.ReviewerLink, error) {
	l, err := scanLink(s.queryRow(ctx, `SELECT `+linkCols+` FROM reviewer_links l WHERE l.slack_user_id = @slack`,
		named{"slack": slackUserID}))
	return l, translate(err, "reviewer link of Slack user", slackUserID)
}

const slackCols = `m.request_id, m.channel, m.ts, m.posted_at`

func scanSlack(row pgx.Row) (airlock.SlackMessage, error) {
	var m airlock.SlackMessage
	if err := row.Scan(&m.RequestID, &m.Channel, &m.TS, &m.PostedAt); err != nil {
		return airlock.SlackMessage{}, err
	}
	m.PostedAt = m.PostedAt.UTC()
	return m, nil
}

// PutSlackMessage records where a request's message was posted, unless
// one is recorded: the primary key decides between replicas.
func (s *Store) PutSlackMessage(ctx context.Context, m airlock.SlackMessage) (airlock.SlackMessage, bool, error) {
	if err := m.Validate(); err != nil {
		return airlock.SlackMessage{}, false, err
	}
	var (
		out     airlock.SlackMessage
		created bool
	)
	err := s.write(ctx, func(ctx context.Context, t *tx) error {
		var err error
		out, err = scanSlack(t.QueryRow(ctx, tickCTE+`INSERT INTO slack_messages AS m (request_id, channel, ts, posted_at)
SELECT @request, @channel, @ts, tick.now FROM tick ON CONFLICT (request_id) DO NOTHING RETURNING `+slackCols,
			named{"now": s.now(), "request": m.RequestID, "channel": m.Channel, "ts": m.TS}))
		if err == nil {
			created = true
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		out, err = scanSlack(t.QueryRow(ctx, `SELECT `+slackCols+` FROM slack_messages m WHERE m.request_id = @request`,
			named{"request": m.RequestID}))
		return err
	})
	return out, created, translate(err, "slack message", m.RequestID)
}

// GetSlackMessage reads where a request's message was posted.
func (s *Store) GetSlackMessage(ctx context.Context, requestID string) (airlock.SlackMessage, error) {
	m, err := scanSlack(s.queryRow(ctx, `SELECT `+slackCols+` FROM slack_messages m WHERE m.request_id = @request`,
		named{"request": requestID}))
	return m, translate(err, "slack message", requestID)
}
