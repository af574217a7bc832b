package mailapp_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"mime/quotedprintable"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/mailapp"
	"github.com/airlockhq/airlock/notify"
	"github.com/airlockhq/airlock/rest"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlite"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

const (
	smtpUser = "airlock"
	smtpPass = "s3cret-smtp-password"
)

// mail is one message as the SMTP server received it.
type mail struct {
	from string
	to   []string
	data string
	tls  bool
}

// server is a real SMTP server (go-smtp) with STARTTLS and AUTH PLAIN.
type server struct {
	addr string
	mu   sync.Mutex
	got  []mail
	in   chan struct{}
}

type session struct {
	s    *server
	conn *smtp.Conn
	m    mail
	auth bool
}

func (ss *session) AuthMechanisms() []string { return []string{sasl.Plain} }
func (ss *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != smtpUser || pass != smtpPass {
			return errors.New("invalid credentials")
		}
		ss.auth = true
		return nil
	}), nil
}
func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	if !ss.auth {
		return &smtp.SMTPError{Code: 530, Message: "authenticate first"}
	}
	ss.m.from = from
	return nil
}
func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.m.to = append(ss.m.to, to)
	return nil
}
func (ss *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	ss.m.data = string(b)
	_, ss.m.tls = ss.conn.TLSConnectionState()
	ss.s.mu.Lock()
	ss.s.got = append(ss.s.got, ss.m)
	ss.s.mu.Unlock()
	ss.s.in <- struct{}{}
	return nil
}
func (ss *session) Reset()        { ss.m = mail{} }
func (ss *session) Logout() error { return nil }

type backend struct{ s *server }

func (b backend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	return &session{s: b.s, conn: c}, nil
}

// startSMTP starts a server; withTLS offers STARTTLS with a certificate
// for 127.0.0.1 that pool trusts.
func startSMTP(t *testing.T, withTLS bool) (*server, *x509.CertPool) {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS()
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	cert := ts.TLS.Certificates[0]
	ts.Close()
	s := &server{in: make(chan struct{}, 100)}
	srv := smtp.NewServer(backend{s})
	srv.Domain = "127.0.0.1"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	if withTLS {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	} else {
		srv.AllowInsecureAuth = true
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s, pool
}

func setup(t *testing.T) (store.Store, airlock.Instance) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := t.Context()
	// Mailed: bob and carol, live reviewers with an address. Not mailed:
	// dave (no address), erin (her reviewer token revoked), frank (an
	// agent, not a reviewer), grace (a reviewer, but the agent that asks
	// is hers).
	for _, l := range []airlock.ReviewerLink{{Principal: "bob", Email: "bob@example.com"}, {Principal: "carol", Email: "carol@example.com", SlackUserID: "U0CAROL"},
		{Principal: "dave", SlackUserID: "U0DAVE"}, {Principal: "erin", Email: "erin@example.com"}, {Principal: "frank", Email: "frank@example.com"},
		{Principal: "grace", Email: "grace@example.com"}} {
		l.UpdatedBy = "tok_admin"
		if _, err := st.PutReviewerLink(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	for _, tok := range []airlock.Token{{ID: "tok_bob", Role: airlock.RoleReviewer, Principal: "bob"}, {ID: "tok_carol", Role: airlock.RoleReviewer, Principal: "carol"},
		{ID: "tok_dave", Role: airlock.RoleReviewer, Principal: "dave"}, {ID: "tok_erin", Role: airlock.RoleReviewer, Principal: "erin"},
		{ID: "tok_frank", Role: airlock.RoleAgent, Principal: "frank"}, {ID: "tok_grace", Role: airlock.RoleReviewer, Principal: "grace"},
		{ID: "tok_agent", Role: airlock.RoleAgent, Principal: "grace"}} {
		tok.Name, tok.Hash, tok.CreatedBy = tok.Principal, []byte(tok.ID), "tok_admin"
		if err := st.CreateToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.RevokeToken(ctx, "tok_erin", "tok_admin"); err != nil {
		t.Fatal(err)
	}
	// OIDC reviewers (no token): mailed, hana, signed in; not mailed, ivy,
	// whose sessions an admin ended after her sign-in.
	for _, id := range []airlock.ReviewerIdentity{{Principal: "oidc:https://id.example.com#hana", Name: "Hana", Email: "hana@example.com"},
		{Principal: "oidc:https://id.example.com#ivy", Name: "Ivy", Email: "ivy@example.com"}} {
		if _, err := st.CreateWebSession(ctx, store.NewWebSessionParams{ID: airlock.NewTokenSecret(), Reviewer: &id, CSRF: "c",
			Idle: time.Hour, Max: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.DeleteWebSessions(ctx, store.WebSessionFilter{Principal: "oidc:https://id.example.com#ivy"}); err != nil {
		t.Fatal(err)
	}
	inst, err := st.CreateInstance(ctx, airlock.Instance{ID: airlock.NewID(airlock.PrefixInstance), OwnerID: "tok_agent", Name: "ci box"}, "tok_agent")
	if err != nil {
		t.Fatal(err)
	}
	return st, inst
}

func create(t *testing.T, st store.Store, inst airlock.Instance, tool string) airlock.Request {
	r, _, err := st.CreateRequest(t.Context(), store.NewRequestParams{Request: airlock.Request{ID: airlock.NewID(airlock.PrefixRequest),
		InstanceID: inst.ID, OwnerID: "tok_agent", Tool: tool, Arguments: []byte(`{"env":"prod"}`), AgentReasoning: "routine, honest"},
		Window: time.Hour, Actor: "tok_agent"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestEmail: a pending request is mailed once, over STARTTLS with AUTH,
// to every live reviewer with an address but its creator (an OIDC
// reviewer at the identity provider's address, until an admin ends their
// sessions), with its facts and a link to
// its page and no link that decides; a request decided before its mail
// goes out is not mailed.
func TestEmail(t *testing.T) {
	t.Parallel()
	srv, pool := startSMTP(t, true)
	st, inst := setup(t)
	ctx := t.Context()
	if _, err := mailapp.EnsureEndpoint(ctx, st); err != nil {
		t.Fatal(err)
	}
	sender, err := mailapp.NewSender(mailapp.Config{AllowPrivate: true, URL: "smtp://" + smtpUser + ":" + smtpPass + "@" + srv.addr, From: "airlock@example.com",
		PublicURL: "https://airlock.example.com", Store: st, RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	decided := create(t, st, inst, "drop_table")
	if _, err := st.Decide(ctx, store.DecideParams{ID: decided.ID, Status: airlock.StateDenied, Actor: "tok_bob"}); err != nil {
		t.Fatal(err)
	}
	r := create(t, st, inst, "deploy")
	eng := notify.New(notify.Config{Store: st, Senders: map[airlock.EndpointKind]notify.Sender{airlock.EndpointEmail: sender},
		Render: rest.RequestJSON, PollEvery: 20 * time.Millisecond})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); eng.Run(runCtx) }()
	defer func() { stop(); <-done }()

	select {
	case <-srv.in:
	case <-time.After(20 * time.Second):
		t.Fatal("no mail arrived")
	}
	// Wait until both deliveries are recorded, then look at what came.
	deadline := time.Now().Add(20 * time.Second)
	for {
		ds, _, err := st.ListDeliveries(ctx, airlock.EmailEndpointID, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 2 && ds[0].State == airlock.DeliveryDelivered && ds[1].State == airlock.DeliveryDelivered {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries: %+v", ds)
		}
		select {
		case <-srv.in:
		case <-time.After(20 * time.Millisecond):
		}
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.got) != 1 {
		t.Fatalf("%d mails, want 1 (the decided request is not mailed)", len(srv.got))
	}
	m := srv.got[0]
	if !m.tls || m.from != "airlock@example.com" || strings.Join(m.to, ",") != "bob@example.com,carol@example.com,hana@example.com" {
		t.Fatalf("mail: tls=%v from=%s to=%v", m.tls, m.from, m.to)
	}
	head, body, _ := strings.Cut(m.data, "\r\n\r\n")
	text, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Subject: Approval requested: deploy", "Message-ID: <msg_", "Auto-Submitted: auto-generated"} {
		if !strings.Contains(head, want) {
			t.Errorf("headers lack %q:\n%s", want, head)
		}
	}
	for _, want := range []string{"ci box wants to run deploy", `{"env":"prod"}`, "The agent's claim (unverified): routine, honest",
		"https://airlock.example.com/requests/" + r.ID, "cannot approve or deny"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("body lacks %q:\n%s", want, text)
		}
	}
	if n := strings.Count(string(text), "https://"); n != 1 || strings.Contains(string(text), "decision") {
		t.Errorf("the body has %d links, want only the request's page:\n%s", n, text)
	}
}

// TestEmailRefusals: a server without STARTTLS gets nothing, and a wrong
// password fails the attempt, with no password in the error.
func TestEmailRefusals(t *testing.T) {
	t.Parallel()
	st, inst := setup(t)
	r := create(t, st, inst, "deploy")
	ep, err := mailapp.EnsureEndpoint(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	d := airlock.Delivery{ID: "dlv_x", MessageID: "msg_1", Type: airlock.NotifyCreated, RequestID: r.ID}

	plain, _ := startSMTP(t, false)
	s, _ := mailapp.NewSender(mailapp.Config{AllowPrivate: true, URL: "smtp://" + smtpUser + ":" + smtpPass + "@" + plain.addr, Store: st})
	if _, err := s.Send(t.Context(), ep, d); err == nil || !strings.Contains(err.Error(), "STARTTLS") {
		t.Errorf("without STARTTLS: %v", err)
	}
	if len(plain.got) != 0 {
		t.Error("mail sent in the clear")
	}

	tlsSrv, pool := startSMTP(t, true)
	s, _ = mailapp.NewSender(mailapp.Config{AllowPrivate: true, URL: "smtp://" + smtpUser + ":wrong-password@" + tlsSrv.addr, Store: st, RootCAs: pool})
	_, err = s.Send(t.Context(), ep, d)
	if err == nil || strings.Contains(err.Error(), "wrong-password") {
		t.Errorf("wrong password: %v", err)
	}
	// An untrusted certificate is refused too.
	s, _ = mailapp.NewSender(mailapp.Config{AllowPrivate: true, URL: "smtp://" + smtpUser + ":" + smtpPass + "@" + tlsSrv.addr, Store: st})
	if _, err := s.Send(t.Context(), ep, d); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted certificate: %v", err)
	}
	tlsSrv.mu.Lock()
	defer tlsSrv.mu.Unlock()
	if len(tlsSrv.got) != 0 {
		t.Errorf("%d mails went through", len(tlsSrv.got))
	}
	for _, bad := range []string{"http://host", "smtp://", "smtp://host/path"} {
		if _, _, _, _, err := mailapp.ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q) accepted it", bad)
		}
	}
}

// TestComposeQuorum: the mail of a request for a group that needs two
// approvals says who it is for and how far it has come.
func TestComposeQuorum(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	r := airlock.Request{ID: "apr_q", Tool: "issue_refund", Arguments: []byte(`{}`), State: airlock.StatePending, DeadlineAt: now.Add(time.Hour),
		Reviewers: []string{"payments"}, Approvals: 2,
		Votes: []airlock.Vote{{Principal: "ada", Name: "Ada", Status: airlock.StateApproved, At: now}}}
	m := string(mailapp.Compose(r, airlock.Delivery{MessageID: "m1", Type: airlock.NotifyCreated}, "airlock@example.com", "https://airlock.example.com", now))
	for _, want := range []string{"For: payments (only its members decide)", "Needs: 1 of 2 approvals (Ada) so far, from different reviewers"} {
		if !strings.Contains(m, want) {
			t.Errorf("mail lacks %q:\n%s", want, m)
		}
	}
}

// TestComposeEdit: the mail of an edited request still needing votes says
// it was approved with changes, from which request.
func TestComposeEdit(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	r := airlock.Request{ID: "apr_n", Tool: "issue_refund", Arguments: []byte(`{"amount":1200}`), State: airlock.StatePending,
		DeadlineAt: now.Add(time.Hour), Reviewers: []string{"payments"}, Approvals: 2, DerivedFrom: "apr_o",
		Votes: []airlock.Vote{{Principal: "ada", Name: "Ada", Status: airlock.StateApproved, At: now}}}
	m := string(mailapp.Compose(r, airlock.Delivery{MessageID: "m1", Type: airlock.NotifyCreated}, "airlock@example.com", "https://airlock.example.com", now))
	for _, want := range []string{"Subject: Approved with changes, more approvals needed: issue_refund",
		"edited the arguments of request apr_o", `{"amount":1200}`} {
		if !strings.Contains(m, want) {
			t.Errorf("mail lacks %q:\n%s", want, m)
		}
	}
}

// TestComposeAdapterClaims: the mail shows the adapter's claims as such.
func TestComposeAdapterClaims(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	r := airlock.Request{ID: "apr_c", Tool: "run_sql", Arguments: []byte(`{}`), State: airlock.StatePending, DeadlineAt: now.Add(time.Hour),
		Preview: &airlock.Preview{Type: "diff", Content: "-a\n+b\n"}, Reversibility: airlock.Partial}
	m := string(mailapp.Compose(r, airlock.Delivery{MessageID: "m1", Type: airlock.NotifyCreated}, "airlock@example.com", "https://airlock.example.com", now))
	if want := "The adapter's claim (unverified):\r\nReversibility: partial\r\nPreview (diff):\r\n-a\r\n+b"; !strings.Contains(m, want) && !strings.Contains(m, strings.ReplaceAll(want, "\r\n", "\n")) {
		t.Errorf("mail lacks the claims:\n%s", m)
	}
}

// TestComposeAgentWords: the mail of an MCP request names the agent, not
// the default instance "mcp", and labels its title, description and
// question as the agent's claim.
func TestComposeAgentWords(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	r := airlock.Request{ID: "apr_m", Kind: airlock.KindAgentRequest, Title: "Which region?", Description: "Security asked.",
		InstanceID: "ins_1", InstanceName: "mcp", OwnerName: "release bot", State: airlock.StatePending, DeadlineAt: now.Add(time.Hour),
		Question: &airlock.Question{Choices: []string{"eu", "us"}}}
	raw := string(mailapp.Compose(r, airlock.Delivery{MessageID: "m1", Type: airlock.NotifyCreated}, "airlock@example.com", "https://airlock.example.com", now))
	_, body, _ := strings.Cut(raw, "\r\n\r\n")
	text, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	m := strings.ReplaceAll(string(text), "\r\n", "\n")
	want := "release bot asks for a decision.\n\nThe agent's claim (unverified), written by release bot:\nTitle: Which region?\nDescription: Security asked.\nQuestion, answer one of: eu | us\n"
	if !strings.Contains(m, want) {
		t.Errorf("mail lacks\n%s\nin:\n%s", want, m)
	}
	if strings.Contains(m, "mcp") || strings.Contains(m, "Arguments:") {
		t.Errorf("the mail names the default instance or shows empty arguments:\n%s", m)
	}
}
