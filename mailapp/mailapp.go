// Package mailapp mails linked reviewers (docs/notifications.md, "Email"):
// a sender for the notification engine that tells every reviewer linked
// to an email address of each request to decide, and of its reminder,
// over SMTP with STARTTLS. A mail carries the facts and a link to the
// request's page in the inbox; nothing in it decides.
package mailapp

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/smtp"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/outbound"
	"github.com/airlockhq/airlock/store"
)

// Config configures the mailer.
type Config struct {
	// URL is smtp://user:password@host:port (port default 587); the
	// password is never logged or shown.
	URL string
	// From is the sender address (default airlock@ the SMTP host).
	From string
	// PublicURL starts the links to the inbox's pages.
	PublicURL string
	Store     Store
	// Timeout bounds one SMTP session (default 10s).
	Timeout time.Duration
	// RootCAs, when set, are the CAs the server's certificate must chain
	// to (tests); default the system's.
	RootCAs *x509.CertPool
	// AllowPrivate lets the SMTP server be at a loopback, private or
	// otherwise non-public address (--outbound-allow-private: a relay on
	// this machine or network, tests); off, a connection to one is
	// refused.
	AllowPrivate bool
}

// Store is what the mailer needs of a store: each request as it is, and
// who its reviewers are (links, tokens and the reviewer directory).
type Store interface {
	store.Reviewers
	store.Tokens
	store.OIDCLogins
	GetRequest(ctx context.Context, id string) (airlock.Request, error)
}

// Sender mails deliveries; the notify.Sender of the email endpoint.
type Sender struct {
	cfg        Config
	host, port string
	user, pass string
}

// ParseURL checks an --smtp-url: smtp://[user[:password]@]host[:port].
func ParseURL(raw string) (host, port, user, pass string, err error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "smtp" || u.Hostname() == "" || u.Path != "" && u.Path != "/" {
		return "", "", "", "", errors.New("--smtp-url must look like smtp://user:password@host:587 (STARTTLS is required)")
	}
	port = u.Port()
	if port == "" {
		port = "587"
	}
	if u.User != nil {
		user = u.User.Username()
		pass, _ = u.User.Password()
	}
	return u.Hostname(), port, user, pass, nil
}

// NewSender returns the sender cfg describes; cfg.URL must have passed
// ParseURL.
func NewSender(cfg Config) (*Sender, error) {
	host, port, user, pass, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	if cfg.From == "" {
		cfg.From = "airlock@" + host
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	return &Sender{cfg: cfg, host: host, port: port, user: user, pass: pass}, nil
}

// DefaultPublicURL sets the links' start unless Config.PublicURL did.
func (s *Sender) DefaultPublicURL(u string) {
	if s.cfg.PublicURL == "" {
		s.cfg.PublicURL = u
	}
}

// Send mails d's request to every reviewer who may decide it and has an
// address (recipients), while it is pending; a request already decided
// needs no mail.
func (s *Sender) Send(ctx context.Context, e airlock.Endpoint, d airlock.Delivery) (int, error) {
	if d.RequestID == "" {
		return 0, nil
	}
	r, err := s.cfg.Store.GetRequest(ctx, d.RequestID)
	if airlock.ErrorCode(err) == airlock.CodeNotFound {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read request %s: %w", d.RequestID, err)
	}
	if r.State != airlock.StatePending {
		return 0, nil
	}
	to, err := s.recipients(ctx, r)
	if err != nil {
		return 0, err
	}
	if len(to) == 0 {
		return 0, nil
	}
	sort.Strings(to)
	msg := Compose(r, d, s.cfg.From, s.cfg.PublicURL, time.Now())
	return 250, s.send(ctx, to, msg)
}

// recipients are the addresses of the principals who may decide r, never
// r's creator's: those linked to an address and holding a live reviewer
// token, and the OIDC reviewers active in the reviewer directory (at the
// link's address when linked, else the identity provider's). A reviewer
// whose tokens were all revoked, or an OIDC reviewer whose sessions an
// admin ended, gets no more mail.
func (s *Sender) recipients(ctx context.Context, r airlock.Request) ([]string, error) {
	links, err := s.cfg.Store.ListReviewerLinks(ctx)
	if err != nil {
		return nil, fmt.Errorf("read reviewer links: %w", err)
	}
	toks, err := s.cfg.Store.ListTokens(ctx)
	if err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	live := map[string]bool{}
	creator := ""
	for _, t := range toks {
		if t.ID == r.OwnerID {
			creator = t.Principal
		}
		if t.Role == airlock.RoleReviewer && t.RevokedAt == nil {
			live[t.Principal] = true
		}
	}
	var to []string
	linked := map[string]bool{}
	for _, l := range links {
		if l.Email != "" && live[l.Principal] && l.Principal != creator {
			to = append(to, l.Email)
		}
		if l.Email != "" {
			linked[l.Principal] = true
		}
	}
	// OIDC reviewers (docs/teams.md) at their identity provider's address,
	// unless an admin linked another one, or ended their sessions since
	// their last sign-in.
	profiles, err := s.cfg.Store.ListReviewerProfiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("read reviewer profiles: %w", err)
	}
	for _, p := range profiles {
		if p.Email == "" || !p.Active() || p.Principal == creator {
			continue
		}
		if linked[p.Principal] {
			if !live[p.Principal] {
				// The link's address was not mailed for want of a live
				// token; an active OIDC reviewer needs none.
				for _, l := range links {
					if l.Principal == p.Principal {
						to = append(to, l.Email)
					}
				}
			}
			continue
		}
		to = append(to, p.Email)
	}
	return slices.Compact(slices.Sorted(slices.Values(to))), nil
}

// send runs one SMTP session: STARTTLS (required: credentials and
// requests never cross the network in the clear), AUTH PLAIN when a user
// is set, one MAIL, a RCPT per reviewer, DATA.
func (s *Sender) send(ctx context.Context, to []string, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	conn, err := outbound.Dialer(s.cfg.Timeout, s.cfg.AllowPrivate).DialContext(ctx, "tcp", net.JoinHostPort(s.host, s.port))
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	c, err := smtp.NewClient(conn, s.host)
	if err != nil {
		return fmt.Errorf("SMTP greeting: %w", err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); !ok {
		return errors.New("the SMTP server does not offer STARTTLS; Airlock sends mail only encrypted")
	}
	if err := c.StartTLS(&tls.Config{ServerName: s.host, RootCAs: s.cfg.RootCAs, MinVersion: tls.VersionTLS12}); err != nil {
		return fmt.Errorf("STARTTLS: %w", err)
	}
	if s.user != "" {
		if err := c.Auth(smtp.PlainAuth("", s.user, s.pass, s.host)); err != nil {
			return fmt.Errorf("SMTP AUTH as %s: %w", s.user, err)
		}
	}
	if err := c.Mail(s.cfg.From); err != nil {
		return fmt.Errorf("MAIL FROM: %w", err)
	}
	for _, rcpt := range to {
		if err := c.Rcpt(rcpt); err != nil {
			return fmt.Errorf("RCPT TO %s: %w", rcpt, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	return c.Quit()
}

// Compose writes the mail of d about r: the facts, the agent's claim
// labelled as such, the deadline and the link to the request's page. It
// has no link that decides: a mail scanner following links must never
// approve anything. Its Message-ID is d's message ID, the same on every
// attempt.
func Compose(r airlock.Request, d airlock.Delivery, from, publicURL string, now time.Time) []byte {
	link := strings.TrimSuffix(publicURL, "/") + "/requests/" + r.ID
	what := r.Tool
	if r.Title != "" {
		what = r.Title
	}
	subject := "Approval requested: " + clip(what, 120)
	switch d.Type {
	case airlock.NotifyReminder:
		subject = "Reminder: " + clip(what, 120) + " is waiting for a decision"
	case airlock.NotifyEscalated:
		subject = "Escalated: " + clip(what, 120) + " now needs " + clip(strings.Join(r.EscalateTo, ", "), 120)
	}
	if r.DerivedFrom != "" {
		// An edit of a request needing several approvals: the editor's
		// vote is in, the others' are asked for the edited call.
		subject = airlock.ApprovedWithChanges + ", more approvals needed: " + clip(what, 120)
	}
	var body bytes.Buffer
	who := airlock.Requester(r.Kind, cmp.Or(r.InstanceName, r.InstanceID), cmp.Or(r.OwnerName, r.OwnerID), r.SessionID != "")
	if r.Kind.AgentWrote() {
		// The title, description and question are the agent's words.
		fmt.Fprintf(&body, "%s asks for a decision.\n\n%s, written by %s:\nTitle: %s\n", who, airlock.AgentClaim, who, clip(r.Title, 300))
		if r.Description != "" {
			fmt.Fprintf(&body, "Description: %s\n", clip(r.Description, 1000))
		}
		if q := r.Question; q != nil && len(q.Choices) > 0 {
			fmt.Fprintf(&body, "Question, answer one of: %s\n", clip(strings.Join(q.Choices, " | "), 300))
		}
		body.WriteString("\n")
	} else {
		fmt.Fprintf(&body, "%s wants to run %s.\n\n", who, what)
	}
	if args := string(r.Arguments); args != "" || !r.Kind.AgentWrote() {
		if len(args) > 2000 {
			args = clip(args, 2000) + fmt.Sprintf("\n(shortened: %d bytes in all; see them whole in the inbox)", len(r.Arguments))
		}
		fmt.Fprintf(&body, "Arguments:\n%s\n\n", args)
	}
	if r.AgentReasoning != "" {
		fmt.Fprintf(&body, "%s: %s\n\n", airlock.AgentClaim, clip(r.AgentReasoning, 1000))
	}
	if r.Preview != nil || r.Reversibility != "" {
		fmt.Fprintf(&body, "%s:\n", airlock.AdapterClaim)
		if r.Reversibility != "" {
			fmt.Fprintf(&body, "Reversibility: %s\n", r.Reversibility)
		}
		if p := r.Preview; p != nil {
			fmt.Fprintf(&body, "Preview (%s):\n%s\n", p.Type, clip(p.Content, 2000))
		}
		body.WriteString("\n")
	}
	if len(r.Reviewers) > 0 {
		fmt.Fprintf(&body, "For: %s (only its members decide)\n", strings.Join(r.Reviewers, ", "))
	}
	if r.NeedsQuorum() {
		fmt.Fprintf(&body, "Needs: %s so far, from different reviewers; any denial decides\n", r.QuorumProgress())
	}
	if e := r.EditSummary(); e != "" {
		fmt.Fprintf(&body, "%s. The arguments above are the edited ones; the original call never runs.\n", e)
	}
	fmt.Fprintf(&body, "Decide by: %s\n\nOpen it in Airlock to approve or deny:\n%s\n\n", r.DeadlineAt.UTC().Format(time.RFC1123), link)
	body.WriteString("This mail cannot approve or deny anything; only a signed-in reviewer can, in the inbox.\n")

	var m bytes.Buffer
	header := func(k, v string) { fmt.Fprintf(&m, "%s: %s\r\n", k, v) }
	header("From", from)
	header("To", "undisclosed-recipients:;")
	header("Subject", mime.QEncoding.Encode("utf-8", subject))
	header("Date", now.UTC().Format(time.RFC1123Z))
	header("Message-ID", "<"+d.MessageID+"."+r.ID+"@airlock>")
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	header("Auto-Submitted", "auto-generated")
	m.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&m)
	qp.Write(bytes.ReplaceAll(body.Bytes(), []byte("\n"), []byte("\r\n")))
	qp.Close()
	return m.Bytes()
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// EnsureEndpoint makes sure the email endpoint exists, as the Slack one.
func EnsureEndpoint(ctx context.Context, st store.Notify) (airlock.Endpoint, error) {
	e, err := st.GetEndpoint(ctx, airlock.EmailEndpointID)
	if err == nil {
		return e, nil
	}
	if airlock.ErrorCode(err) != airlock.CodeNotFound {
		return airlock.Endpoint{}, err
	}
	e, err = st.CreateEndpoint(ctx, airlock.Endpoint{ID: airlock.EmailEndpointID, Kind: airlock.EndpointEmail, URL: "smtp:",
		Events: airlock.EmailTypes, Description: "email to linked reviewers", CreatedBy: "system:email"})
	if err != nil {
		if e2, err2 := st.GetEndpoint(ctx, airlock.EmailEndpointID); err2 == nil {
			return e2, nil
		}
		return airlock.Endpoint{}, err
	}
	return e, nil
}
