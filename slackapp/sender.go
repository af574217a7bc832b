// Package slackapp is Airlock's Slack app (docs/notifications.md,
// "Slack"): a sender for the notification engine that posts each pending
// request to a channel as a Block Kit message with Approve and Deny
// buttons and updates it to the outcome, and the handler of Slack's
// interaction requests, which decides as the reviewer the clicking Slack
// user is linked to.
package slackapp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/outbound"
	"github.com/airlockhq/airlock/store"
	"github.com/slack-go/slack"
)

// DefaultAPIURL is Slack's Web API.
const DefaultAPIURL = "https://slack.com/api/"

// Action IDs of the buttons.
const (
	ActionApprove = "airlock_approve"
	ActionDeny    = "airlock_deny"
)

// Limits of what a message shows; the rest is on the inbox page.
const (
	maxArguments = 600
	maxClaim     = 300
	maxTitle     = 150
)

// Config configures the Slack app.
type Config struct {
	// BotToken is the bot's OAuth token (xoxb-…); never logged.
	BotToken string
	// Channel is where requests are posted: a channel ID (C…) or name.
	Channel string
	// APIURL is the Web API's base URL, ending in "/" (default
	// DefaultAPIURL).
	APIURL string
	// PublicURL is the server's address as reviewers reach it, for links to
	// the inbox's pages.
	PublicURL string
	// Store is read for each request's current state and its message.
	Store Store
	// Timeout bounds one Web API call (default 10s).
	Timeout time.Duration
	// AllowPrivate lets the Web API be reached at a loopback, private or
	// otherwise non-public address (--outbound-allow-private, for tests);
	// off, a connection to one is refused.
	AllowPrivate bool
}

// Sender posts and updates requests' messages; it is the notify.Sender of
// the Slack endpoint.
type Sender struct {
	api   *slack.Client
	cfg   Config
	store Store
}

// Store is what the sender needs of a store: each request as it is, and
// where its message was posted.
type Store interface {
	store.Reviewers
	GetRequest(ctx context.Context, id string) (airlock.Request, error)
}

// NewSender returns the sender cfg describes.
func NewSender(cfg Config) *Sender {
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	if !strings.HasSuffix(cfg.APIURL, "/") {
		cfg.APIURL += "/"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	hc := outbound.HTTPClient(cfg.Timeout, cfg.AllowPrivate)
	return &Sender{api: slack.New(cfg.BotToken, slack.OptionAPIURL(cfg.APIURL), slack.OptionHTTPClient(hc)), cfg: cfg, store: cfg.Store}
}

// DefaultPublicURL sets the address links in messages start with, unless
// Config.PublicURL set one. Call it before the engine runs.
func (s *Sender) DefaultPublicURL(u string) {
	if s.cfg.PublicURL == "" {
		s.cfg.PublicURL = u
	}
}

// errNotPosted retries an outcome whose request's message is not posted
// yet: its post is queued too, and attempted apart.
var errNotPosted = errors.New("the request's Slack message is not posted yet; its update waits for the post")

// Send posts d's request (approval_request.created) or updates its message
// to the request's state now (any other type). Whatever the type, what is
// shown is the request as the store has it at the attempt, so deliveries
// that overtake each other still leave the message showing the truth.
func (s *Sender) Send(ctx context.Context, e airlock.Endpoint, d airlock.Delivery) (int, error) {
	if d.RequestID == "" {
		return 0, nil // a test delivery: nothing to show
	}
	r, err := s.store.GetRequest(ctx, d.RequestID)
	if airlock.ErrorCode(err) == airlock.CodeNotFound {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read request %s: %w", d.RequestID, err)
	}
	m, err := s.store.GetSlackMessage(ctx, r.ID)
	switch {
	case airlock.ErrorCode(err) == airlock.CodeNotFound:
		switch {
		case r.Decision != nil && airlock.DecidedByPolicy(r.Decision.DecidedBy):
			return 0, nil // decided by a rule at creation: no person needs to see it
		case d.Type == airlock.NotifyCreated:
			return s.post(ctx, r)
		case r.CreatedAt.Before(e.CreatedAt):
			return 0, nil // made before Slack was set up: no message to update
		}
		return 0, errNotPosted
	case err != nil:
		return 0, fmt.Errorf("read the request's Slack message: %w", err)
	case d.Type == airlock.NotifyCreated:
		// Posted by an earlier attempt whose record was lost: the updates
		// of the outcome take it from here.
		return http.StatusOK, nil
	case d.Type == airlock.NotifyReminder:
		return s.remind(ctx, r, m)
	}
	text, blocks := Render(r, s.cfg.PublicURL)
	_, _, _, err = s.api.UpdateMessageContext(ctx, m.Channel, m.TS, slack.MsgOptionText(text, false), slack.MsgOptionBlocks(blocks...))
	return status(err)
}

func (s *Sender) post(ctx context.Context, r airlock.Request) (int, error) {
	text, blocks := Render(r, s.cfg.PublicURL)
	channel, ts, err := s.api.PostMessageContext(ctx, s.cfg.Channel, slack.MsgOptionText(text, false), slack.MsgOptionBlocks(blocks...))
	if err != nil {
		return status(err)
	}
	// Recorded even if the attempt's context ends now: the message exists.
	if _, _, err := s.store.PutSlackMessage(context.WithoutCancel(ctx), airlock.SlackMessage{RequestID: r.ID, Channel: channel, TS: ts}); err != nil {
		return http.StatusOK, fmt.Errorf("posted as %s/%s but could not record it: %w", channel, ts, err)
	}
	return http.StatusOK, nil
}

// remind answers r's message, while r is pending, with a reply also sent
// to the channel: the deadline is near. Decided meanwhile, it needs none.
// A retried reminder whose first reply went through but was not recorded
// is sent again: reminders, like webhooks, come at least once.
func (s *Sender) remind(ctx context.Context, r airlock.Request, m airlock.SlackMessage) (int, error) {
	if r.State != airlock.StatePending {
		return http.StatusOK, nil
	}
	text, blocks := RenderReminder(r, s.cfg.PublicURL)
	_, _, err := s.api.PostMessageContext(ctx, m.Channel, slack.MsgOptionText(text, false), slack.MsgOptionBlocks(blocks...),
		slack.MsgOptionTS(m.TS), slack.MsgOptionBroadcast())
	return status(err)
}

// RenderReminder returns the reply that reminds the channel of pending
// request r: what waits, its deadline, and the way to the message's
// buttons and the inbox page.
func RenderReminder(r airlock.Request, publicURL string) (string, []slack.Block) {
	what := r.Tool
	if r.Title != "" {
		what = r.Title
	}
	what = clip(what, maxTitle)
	text := "Still waiting for a decision: " + what
	line := fmt.Sprintf(":alarm_clock: *%s* still waits for a decision, due <!date^%d^{date_short_pretty} {time_secs}|%s>. "+
		"Decide with the buttons above or <%s|in Airlock>.", esc(what), r.DeadlineAt.Unix(), r.DeadlineAt.UTC().Format(time.RFC3339),
		strings.TrimSuffix(publicURL, "/")+"/requests/"+r.ID)
	return text, []slack.Block{slack.NewSectionBlock(mrkdwn(line), nil, nil)}
}

// status turns a Web API call's error into an attempt's status and error.
// Slack answers 200 with "ok": false for its refusals.
func status(err error) (int, error) {
	if err == nil {
		return http.StatusOK, nil
	}
	if se, ok := errors.AsType[slack.StatusCodeError](err); ok {
		return se.Code, fmt.Errorf("slack answered HTTP %d", se.Code)
	}
	if rl, ok := errors.AsType[*slack.RateLimitedError](err); ok {
		return http.StatusTooManyRequests, fmt.Errorf("slack rate-limited the call; retry after %s", rl.RetryAfter)
	}
	if se, ok := errors.AsType[slack.SlackErrorResponse](err); ok {
		return http.StatusOK, fmt.Errorf("slack refused the call: %s", se.Err)
	}
	return 0, err
}

// Render returns the message of r as it is now: the notification text and
// the blocks. A pending request has Approve and Deny buttons, each behind
// a confirmation; any other shows its outcome and no buttons.
func Render(r airlock.Request, publicURL string) (string, []slack.Block) {
	link := strings.TrimSuffix(publicURL, "/") + "/requests/" + r.ID
	what := r.Tool
	if r.Title != "" {
		what = r.Title
	}
	what = clip(what, maxTitle)
	text := fmt.Sprintf("Approval requested: %s", what)
	if r.State != airlock.StatePending {
		text = fmt.Sprintf("%s: %s", outcomeWord(r), what)
		if r.ReplacedBy != "" || r.DerivedFrom != "" {
			text = fmt.Sprintf("%s: %s", airlock.ApprovedWithChanges, what)
		}
	}
	who := airlock.Requester(r.Kind, cmp.Or(r.InstanceName, r.InstanceID), cmp.Or(r.OwnerName, r.OwnerID), r.SessionID != "")
	var blocks []slack.Block
	if r.Kind.AgentWrote() {
		// The title and description are the agent's words: labelled, and
		// plain text, so that they cannot look like Airlock's own.
		claim := airlock.AgentClaim + ", written by " + who + ":\n" + what
		if r.Description != "" {
			claim += "\n" + clip(r.Description, maxClaim)
		}
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn(fmt.Sprintf("*%s* asks for a decision", esc(clip(who, maxTitle)))), nil, nil),
			slack.NewSectionBlock(plain(claim), nil, nil))
	} else {
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn(fmt.Sprintf("*%s* wants to run *%s*", esc(clip(who, maxTitle)), esc(what))), nil, nil))
	}
	args, cut := clipBytes(string(r.Arguments), maxArguments)
	switch {
	case r.PurgedAt != nil:
		// Purged, never "no arguments".
		args = "(arguments purged on " + r.PurgedAt.UTC().Format(time.RFC3339) + " under the server's payload retention)"
	case args == "":
		args = "{}"
	}
	// Arguments are shown as preformatted rich text: literal, so an agent
	// cannot format its way into looking like Airlock's own text.
	blocks = append(blocks, slack.NewRichTextBlock("arguments", &slack.RichTextPreformatted{
		Type:     slack.RTEPreformatted,
		Elements: []slack.RichTextSectionElement{slack.NewRichTextSectionTextElement(args, nil)},
	}))
	linkText := fmt.Sprintf("<%s|Open in Airlock>", link)
	if cut {
		linkText = fmt.Sprintf("Arguments shortened (%d bytes in all): <%s|see them whole in Airlock>", len(r.Arguments), link)
	}
	ctx := []slack.MixedElement{mrkdwn(linkText)}
	if r.AgentReasoning != "" {
		ctx = append(ctx, plain(airlock.AgentClaim+": "+clip(r.AgentReasoning, maxClaim)))
	}
	if r.Preview != nil || r.Reversibility != "" {
		// The adapter's claims, as plain text: its words, not Airlock's.
		claim := airlock.AdapterClaim + ":"
		if r.Reversibility != "" {
			claim += " " + r.Reversibility + "."
		}
		if p := r.Preview; p != nil {
			claim += " Preview (" + p.Type + "): " + clip(p.Content, maxClaim)
		}
		ctx = append(ctx, plain(claim))
	}
	blocks = append(blocks, slack.NewContextBlock("facts", ctx...))
	if r.State == airlock.StatePending {
		deadline := fmt.Sprintf("Decide by <!date^%d^{date_short_pretty} {time_secs}|%s>", r.DeadlineAt.Unix(), r.DeadlineAt.UTC().Format(time.RFC3339))
		if len(r.Reviewers) > 0 {
			deadline += " · for *" + esc(strings.Join(r.Reviewers, ", ")) + "* (only its members decide)"
		}
		if r.NeedsQuorum() {
			deadline += " · " + esc(r.QuorumProgress())
		}
		if r.DerivedFrom != "" {
			deadline += "\n:pencil2: " + esc(r.EditSummary())
		}
		if r.Kind == airlock.KindToolCall && r.Proposal == nil && r.Question == nil {
			// Slack has no JSON editor: an edit is made in the inbox.
			deadline += fmt.Sprintf(" · <%s|Edit and approve in Airlock>", link)
		}
		blocks = append(blocks, slack.NewContextBlock("deadline", mrkdwn(deadline)))
		approve := slack.NewButtonBlockElement(ActionApprove, r.ID, plain("Approve")).WithStyle(slack.StylePrimary).
			WithConfirm(slack.NewConfirmationBlockObject(plain("Approve this call?"), plain(clip("Approve "+what+"? The agent may run it once.", 300)), plain("Approve"), plain("Cancel")))
		deny := slack.NewButtonBlockElement(ActionDeny, r.ID, plain("Deny")).WithStyle(slack.StyleDanger).
			WithConfirm(slack.NewConfirmationBlockObject(plain("Deny this call?"), plain(clip("Deny "+what+"?", 300)), plain("Deny"), plain("Cancel")))
		blocks = append(blocks, slack.NewActionBlock("decide", approve, deny))
		return text, blocks
	}
	blocks = append(blocks, slack.NewSectionBlock(mrkdwn(outcomeText(r)), nil, nil))
	return text, blocks
}

func outcomeWord(r airlock.Request) string {
	switch r.State {
	case airlock.StateApproved:
		return "Approved"
	case airlock.StateDenied:
		return "Denied"
	case airlock.StateExpired:
		return "Expired"
	case airlock.StateCancelled:
		return "Cancelled"
	}
	return string(r.State)
}

// outcomeText says how r ended: by whom and when.
func outcomeText(r airlock.Request) string {
	mark := map[airlock.State]string{airlock.StateApproved: ":white_check_mark:", airlock.StateDenied: ":no_entry:",
		airlock.StateExpired: ":hourglass:", airlock.StateCancelled: ":heavy_multiplication_x:"}[r.State]
	word := outcomeWord(r)
	if r.ReplacedBy != "" || (r.DerivedFrom != "" && r.State == airlock.StateApproved) {
		mark, word = ":pencil2:", airlock.ApprovedWithChanges
	}
	s := fmt.Sprintf("%s *%s*", mark, word)
	if d := r.Decision; d != nil {
		switch r.State {
		case airlock.StateApproved, airlock.StateDenied, airlock.StateCancelled:
			name := d.DecidedByName
			if name == "" {
				name = d.DecidedBy
			}
			if name != "" {
				s += " by " + esc(clip(name, maxTitle))
			}
		case airlock.StateExpired:
			s += ": no decision before the deadline"
		}
		s += fmt.Sprintf(" <!date^%d^{date_short_pretty} {time_secs}|%s>", d.DecidedAt.Unix(), d.DecidedAt.UTC().Format(time.RFC3339))
		if d.Note != "" {
			s += "\n" + esc(clip(d.Note, maxClaim))
		}
	}
	if e := r.EditSummary(); e != "" {
		s += "\n" + esc(e)
	}
	return s
}

func mrkdwn(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, s, false, true)
}
func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
}

// esc escapes what Slack's mrkdwn reads as control: &, < and >.
func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// clip shortens s to at most n runes, marking the cut with "…".
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// clipBytes shortens s to at most n bytes at a rune boundary, marking the
// cut; cut reports whether it shortened.
func clipBytes(s string, n int) (_ string, cut bool) {
	if len(s) <= n {
		return s, false
	}
	i := n - len("…")
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…", true
}

// EnsureEndpoint makes sure the Slack endpoint exists, so the engine runs
// a worker for it: created at the first start with Slack configured, it
// receives the requests created after. Replicas starting together create
// it once (its ID is fixed). It returns the endpoint; a disabled one (it
// failed for days) is returned as it is, for the caller to warn of.
func EnsureEndpoint(ctx context.Context, st store.Notify, channel string) (airlock.Endpoint, error) {
	e, err := st.GetEndpoint(ctx, airlock.SlackEndpointID)
	if err == nil {
		return e, nil
	}
	if airlock.ErrorCode(err) != airlock.CodeNotFound {
		return airlock.Endpoint{}, err
	}
	e, err = st.CreateEndpoint(ctx, airlock.Endpoint{ID: airlock.SlackEndpointID, Kind: airlock.EndpointSlack, URL: "slack:" + channel,
		Events: airlock.SlackTypes, Description: "Slack channel " + channel, CreatedBy: "system:slack"})
	if err != nil {
		// Another replica may have created it first.
		if e2, err2 := st.GetEndpoint(ctx, airlock.SlackEndpointID); err2 == nil {
			return e2, nil
		}
		return airlock.Endpoint{}, err
	}
	return e, nil
}
