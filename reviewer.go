package airlock

import (
	"net/mail"
	"regexp"
	"sync"
	"time"
)

// Reviewer links (docs/notifications.md, "Slack"): who a reviewer is on
// the channels that reach them. A link ties a reviewer principal — a
// token's principal today, which defaults to the token's ID — to a Slack
// user ID and an email address. Only a Slack user linked to a principal
// may decide from Slack, and decides as that principal, so the
// self-approval rule holds there as everywhere.

// ReviewerLink is one principal's link.
type ReviewerLink struct {
	Principal   string
	SlackUserID string // "" when none
	Email       string // "" when none
	UpdatedAt   time.Time
	UpdatedBy   string
}

// ReviewerLinkInput is what an admin sends to link a principal. It
// replaces the link: a field left out is cleared, and clearing both
// removes the link.
type ReviewerLinkInput struct {
	SlackUserID string `json:"slack_user_id,omitempty"`
	Email       string `json:"email,omitempty"`
}

// EventReviewerLinked is appended whenever a principal's link changes or
// is removed; Subject is the principal.
const EventReviewerLinked EventType = "reviewer.linked"

// MaxEmailLen bounds an email address (RFC 5321's path limit).
const MaxEmailLen = 254

// slackUserID matches Slack's user IDs: U… or W… (Enterprise Grid), upper
// case letters and digits. It is compiled on first use, not at start-up.
var slackUserID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[UW][A-Z0-9]{2,31}$`) })

// Validate refuses a link no channel could use: a principal that is
// empty or too long, a Slack user ID that is not one, an email address
// that is not a bare address.
func (in ReviewerLinkInput) Validate(principal string) error {
	if err := CheckText("principal", principal, 1, MaxPrincipalLen); err != nil {
		return err
	}
	if in.SlackUserID != "" && !slackUserID().MatchString(in.SlackUserID) {
		return Invalid("slack_user_id", "slack_user_id %q is not a Slack user ID (U… or W…, as Slack shows in a profile's \"Copy member ID\")", in.SlackUserID)
	}
	if in.Email != "" {
		if len(in.Email) > MaxEmailLen {
			return Invalid("email", "email is %d bytes; at most %d", len(in.Email), MaxEmailLen)
		}
		a, err := mail.ParseAddress(in.Email)
		if err != nil || a.Address != in.Email || a.Name != "" {
			return Invalid("email", "email %q is not a bare address such as alice@example.com", in.Email)
		}
	}
	return nil
}

// SlackMessage is where a request's Slack message was posted, so that it
// can be updated to the outcome.
type SlackMessage struct {
	RequestID string
	Channel   string // the channel ID Slack answered with
	TS        string // the message's timestamp, its ID in the channel
	PostedAt  time.Time
}

// Validate checks what a store needs of m before it writes it: a request
// ID, a channel and a ts.
func (m SlackMessage) Validate() error {
	if m.RequestID == "" || m.Channel == "" || m.TS == "" {
		return Invalid("slack_message", "a Slack message needs a request ID, a channel and a ts")
	}
	return nil
}

// SlackUserTaken is the error of linking Slack user to one principal while
// principal holds it.
func SlackUserTaken(user, principal string) error {
	return Invalid("slack_user_id", "Slack user %s is linked to principal %q already; unlink it there first", user, principal)
}
