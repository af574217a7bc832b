package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/airlockhq/airlock"
)

// Reviewer links and Slack messages (docs/notifications.md, "Slack").

const linkCols = `principal, coalesce(slack_user_id, ''), coalesce(email, ''), updated_at, updated_by`

func scanLink(sc scanner) (airlock.ReviewerLink, error) {
	var (
		l  airlock.ReviewerLink
		at int64
	)
	if err := sc.Scan(&l.Principal, &l.SlackUserID, &l.Email, &at, &l.UpdatedBy); err != nil {
		return airlock.ReviewerLink{}, err
	}
	l.UpdatedAt = fromMicros(at)
	return l, nil
}

func nullText(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// PutReviewerLink replaces or removes a principal's link.
func (s *Store) PutReviewerLink(ctx context.Context, l airlock.ReviewerLink) (airlock.ReviewerLink, error) {
	var out airlock.ReviewerLink
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		if l.SlackUserID == "" && l.Email == "" {
			res, err := tx.ExecContext(ctx, `DELETE FROM reviewer_links WHERE principal = ?`, l.Principal)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return airlock.NotFound("reviewer link", l.Principal)
			}
			out = airlock.ReviewerLink{Principal: l.Principal, UpdatedAt: now, UpdatedBy: l.UpdatedBy}
			return appendEvent(ctx, tx, now, airlock.Event{Type: airlock.EventReviewerLinked, Actor: l.UpdatedBy, Subject: l.Principal})
		}
		if l.SlackUserID != "" {
			var other string
			err := tx.QueryRowContext(ctx, `SELECT principal FROM reviewer_links WHERE slack_user_id = ? AND principal <> ?`,
				l.SlackUserID, l.Principal).Scan(&other)
			switch {
			case err == nil:
				return airlock.SlackUserTaken(l.SlackUserID, other)
			case err != sql.ErrNoRows:
				return err
			}
		}
		var err error
		out, err = scanLink(tx.QueryRowContext(ctx, `INSERT INTO reviewer_links (principal, slack_user_id, email, updated_at, updated_by)
VALUES (?, ?, ?, ?, ?) ON CONFLICT (principal) DO UPDATE SET slack_user_id = excluded.slack_user_id, email = excluded.email,
	updated_at = excluded.updated_at, updated_by = excluded.updated_by RETURNING `+linkCols,
			l.Principal, nullText(l.SlackUserID), nullText(l.Email), micros(now), l.UpdatedBy))
		if err != nil {
			return err
		}
		return appendEvent(ctx, tx, now, airlock.Event{Type: airlock.EventReviewerLinked, Actor: l.UpdatedBy, Subject: l.Principal})
	})
	return out, translate(err, "reviewer link", l.Principal)
}

// ListReviewerLinks lists every link by principal.
func (s *Store) ListReviewerLinks(ctx context.Context) ([]airlock.ReviewerLink, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+linkCols+` FROM reviewer_links ORDER BY principal`)
	if err != nil {
		return nil, translate(err, "reviewer links", "list")
	}
	defer rows.Close()
	var out []airlock.ReviewerLink
	for rows.Next() {
		l, err := scanLink(rows)
		if err != nil {
			return nil, translate(err, "reviewer links", "list")
		}
		out = append(out, l)
	}
	return out, translate(rows.Err(), "reviewer links", "list")
}

// ReviewerLinkBySlackUser finds a Slack user's link.
func (s *Store) ReviewerLinkBySlackUser(ctx context.Context, slackUserID string) (airlock.ReviewerLink, error) {
	l, err := scanLink(s.read.QueryRowContext(ctx, `SELECT `+linkCols+` FROM reviewer_links WHERE slack_user_id = ?`, slackUserID))
	return l, translate(err, "reviewer link of Slack user", slackUserID)
}

const slackCols = `request_id, channel, ts, posted_at`

func scanSlack(sc scanner) (airlock.SlackMessage, error) {
	var (
		m  airlock.SlackMessage
		at int64
	)
	if err := sc.Scan(&m.RequestID, &m.Channel, &m.TS, &at); err != nil {
		return airlock.SlackMessage{}, err
	}
	m.PostedAt = fromMicros(at)
	return m, nil
}

// PutSlackMessage records where a request's message was posted, unless
// one is recorded.
func (s *Store) PutSlackMessage(ctx context.Context, m airlock.SlackMessage) (airlock.SlackMessage, bool, error) {
	if err := m.Validate(); err != nil {
		return airlock.SlackMessage{}, false, err
	}
	var (
		out     airlock.SlackMessage
		created bool
	)
	err := s.inTx(ctx, func(tx *txn, now time.Time) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO slack_messages (request_id, channel, ts, posted_at) VALUES (?, ?, ?, ?)
ON CONFLICT (request_id) DO NOTHING`, m.RequestID, m.Channel, m.TS, micros(now))
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		created = n == 1
		out, err = scanSlack(tx.QueryRowContext(ctx, `SELECT `+slackCols+` FROM slack_messages WHERE request_id = ?`, m.RequestID))
		return err
	})
	return out, created, translate(err, "slack message", m.RequestID)
}

// GetSlackMessage reads where a request's message was posted.
func (s *Store) GetSlackMessage(ctx context.Context, requestID string) (airlock.SlackMessage, error) {
	m, err := scanSlack(s.read.QueryRowContext(ctx, `SELECT `+slackCols+` FROM slack_messages WHERE request_id = ?`, requestID))
	return m, translate(err, "slack message", requestID)
}
