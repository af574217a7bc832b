package storetest

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// adaOIDC is an OIDC reviewer as the identity provider vouched for her.
var adaOIDC = airlock.ReviewerIdentity{
	Principal: "oidc:https://id.example.com#ada-1815",
	Name:      "Ada Lovelace",
	Email:     "ada@example.com",
	Groups:    []string{"payments", "on call"},
}

// oidcSignIn creates a web session of an OIDC reviewer and returns its raw ID.
func (b *bundle) oidcSignIn(t *testing.T, id airlock.ReviewerIdentity) (string, airlock.WebSession) {
	t.Helper()
	raw := airlock.NewTokenSecret()
	ws, err := b.store.CreateWebSession(b.ctx, store.NewWebSessionParams{ID: raw, Reviewer: &id, CSRF: "csrf-" + raw, Idle: webIdle, Max: webMax})
	wantOK(t, err)
	return raw, ws
}

// testOIDC checks OIDC reviewers' sessions, the reviewer directory and
// the sign-ins in progress (OIDCLoginStore).
func (s *suite) testOIDC(t *testing.T) {
	runAll(t, []test{
		{"an OIDC reviewer's session has no token", s.oidcSession},
		{"bad identities are refused", s.oidcBadIdentities},
		{"the reviewer directory names deciders", s.oidcDirectory},
		{"a sign-in in progress is taken once", s.oidcLoginOnce},
		{"sign-ins in progress are bounded", s.oidcLoginsBounded},
	})
}

func (s *suite) oidcSession(t *testing.T) {
	b := s.setup(t)
	at := b.clock.Now().Truncate(time.Microsecond)
	id, ws := b.oidcSignIn(t, adaOIDC)
	if ws.TokenID != "" || ws.Principal != adaOIDC.Principal || ws.Name != "Ada Lovelace" || ws.Email != "ada@example.com" ||
		strings.Join(ws.Groups, "|") != "payments|on call" || !ws.CreatedAt.Equal(at) || !ws.ExpiresAt.Equal(at.Add(webMax)) {
		t.Fatalf("CreateWebSession = %s", show(ws))
	}
	got, tok, err := b.store.WebSessionByID(b.ctx, id)
	wantOK(t, err)
	if show(got) != show(ws) || tok.ID != "" {
		t.Fatalf("WebSessionByID = %s, %s; want %s and no token", show(got), show(tok), show(ws))
	}
	// A touch keeps the claims.
	b.clock.Set(at.Add(time.Hour / 2))
	touched, ok, err := b.store.TouchWebSession(b.ctx, id, time.Minute)
	wantOK(t, err)
	if !ok || touched.Email != ws.Email || strings.Join(touched.Groups, "|") != "payments|on call" {
		t.Fatalf("TouchWebSession = %v, %s", ok, show(touched))
	}
	// An admin ends the principal's sessions: on every replica at once,
	// since every one reads the store.
	other, _ := b.oidcSignIn(t, adaOIDC)
	n, err := b.store.DeleteWebSessions(b.ctx, store.WebSessionFilter{Principal: adaOIDC.Principal, Actor: "tok_admin"})
	wantOK(t, err)
	if n != 2 {
		t.Fatalf("DeleteWebSessions ended %d sessions, want 2", n)
	}
	// The admin's act is in the audit log.
	var ended []airlock.Event
	for _, ev := range b.events(t) {
		if ev.Type == airlock.EventReviewerSessionsEnded {
			ended = append(ended, ev)
		}
	}
	if len(ended) != 1 || ended[0].Actor != "tok_admin" || ended[0].Subject != adaOIDC.Principal || !ended[0].At.Equal(at.Add(time.Hour/2)) {
		t.Fatalf("reviewer.sessions_ended events: %s", show(ended))
	}
	// Her profile stays, to name her decisions, but is no longer active
	// (no mail) until she signs in again.
	ps, err := b.store.ListReviewerProfiles(b.ctx)
	wantOK(t, err)
	if len(ps) != 1 || ps[0].EndedAt == nil || !ps[0].EndedAt.Equal(at.Add(time.Hour/2)) || ps[0].Active() {
		t.Fatalf("profile after her sessions were ended: %s", show(ps))
	}
	for _, raw := range []string{id, other} {
		_, _, err = b.store.WebSessionByID(b.ctx, raw)
		wantErr(t, err, airlock.CodeNotFound, "")
	}
	// A session of no groups and no email reads as such.
	bare := airlock.ReviewerIdentity{Principal: "oidc:https://id.example.com#bob", Name: "Bob"}
	raw, _ := b.oidcSignIn(t, bare)
	got, _, err = b.store.WebSessionByID(b.ctx, raw)
	wantOK(t, err)
	if got.Email != "" || got.Groups != nil {
		t.Fatalf("bare session = %s", show(got))
	}
	b.clock.Set(at.Add(time.Hour))
	b.oidcSignIn(t, adaOIDC)
	ps, err = b.store.ListReviewerProfiles(b.ctx)
	wantOK(t, err)
	if len(ps) != 2 || !ps[0].Active() || ps[0].EndedAt == nil {
		t.Fatalf("profile after she signed in again: %s", show(ps))
	}
}

func (s *suite) oidcBadIdentities(t *testing.T) {
	b := s.setup(t)
	many := make([]string, airlock.MaxReviewerGroups+1)
	for i := range many {
		many[i] = "g" + strings.Repeat("x", i%5)
	}
	tok := b.webReviewer(t, "tok_ada", "ada")
	for _, tc := range []struct {
		name string
		id   airlock.ReviewerIdentity
		tok  airlock.Token
	}{
		{"not an OIDC principal", airlock.ReviewerIdentity{Principal: "ada", Name: "Ada"}, airlock.Token{}},
		{"no name", airlock.ReviewerIdentity{Principal: adaOIDC.Principal}, airlock.Token{}},
		{"a name too long", airlock.ReviewerIdentity{Principal: adaOIDC.Principal, Name: strings.Repeat("n", airlock.MaxReviewerNameLen+1)}, airlock.Token{}},
		{"too many groups", airlock.ReviewerIdentity{Principal: adaOIDC.Principal, Name: "Ada", Groups: many}, airlock.Token{}},
		{"a group with a newline", airlock.ReviewerIdentity{Principal: adaOIDC.Principal, Name: "Ada", Groups: []string{"pay\nments"}}, airlock.Token{}},
		{"a group with a bidi override", airlock.ReviewerIdentity{Principal: adaOIDC.Principal, Name: "Ada", Groups: []string{"pay\u202ements"}}, airlock.Token{}},
		{"a group too long", airlock.ReviewerIdentity{Principal: adaOIDC.Principal, Name: "Ada", Groups: []string{strings.Repeat("g", airlock.MaxReviewerGroupLen+1)}}, airlock.Token{}},
		{"both a token and a reviewer", adaOIDC, tok},
	} {
		id := tc.id
		_, err := b.store.CreateWebSession(b.ctx, store.NewWebSessionParams{ID: airlock.NewTokenSecret(), Reviewer: &id, Token: tc.tok,
			CSRF: "c", Idle: webIdle, Max: webMax})
		if airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
			t.Errorf("%s: CreateWebSession err = %v, want invalid_request", tc.name, err)
		}
	}
	ps, err := b.store.ListReviewerProfiles(b.ctx)
	wantOK(t, err)
	if len(ps) != 0 {
		t.Fatalf("refused sign-ins left profiles: %s", show(ps))
	}
}

func (s *suite) oidcDirectory(t *testing.T) {
	b := s.setup(t)
	start := b.clock.Now().Truncate(time.Microsecond)
	b.oidcSignIn(t, adaOIDC)
	// Her next sign-in, with a new name and groups, replaces her entry.
	b.clock.Set(start.Add(time.Minute))
	renamed := adaOIDC
	renamed.Name, renamed.Groups = "Ada King", []string{"payments"}
	b.oidcSignIn(t, renamed)
	bob := airlock.ReviewerIdentity{Principal: "oidc:https://id.example.com#bob", Name: "Bob"}
	b.oidcSignIn(t, bob)
	ps, err := b.store.ListReviewerProfiles(b.ctx)
	wantOK(t, err)
	if len(ps) != 2 || ps[0].Principal != adaOIDC.Principal || ps[1].Principal != bob.Principal ||
		ps[0].Name != "Ada King" || ps[0].Email != "ada@example.com" || strings.Join(ps[0].Groups, "|") != "payments" ||
		!ps[0].SignedInAt.Equal(start.Add(time.Minute)) || ps[1].Groups != nil {
		t.Fatalf("ListReviewerProfiles = %s", show(ps))
	}
	// A request she decides reads her name, after her session too.
	wantOK(t, b.store.CreateToken(b.ctx, airlock.Token{ID: ownerA, Name: "bot", Role: airlock.RoleAgent, Principal: "bot",
		Hash: airlock.HashSecret(ownerA)}))
	r := b.create(t)
	_, err = b.store.DeleteWebSessions(b.ctx, store.WebSessionFilter{Principal: adaOIDC.Principal})
	wantOK(t, err)
	d, err := b.store.Decide(b.ctx, store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Validity: validity,
		Actor: adaOIDC.Principal, Principal: adaOIDC.Principal})
	wantOK(t, err)
	if d.Decision.DecidedBy != adaOIDC.Principal || d.Decision.DecidedByName != "Ada King" {
		t.Fatalf("decided: by %q, name %q; want %q, Ada King", d.Decision.DecidedBy, d.Decision.DecidedByName, adaOIDC.Principal)
	}
	sums, _, err := b.store.ListRequestSummaries(b.ctx, store.RequestFilter{})
	wantOK(t, err)
	if len(sums) != 1 || sums[0].Decision.DecidedByName != "Ada King" {
		t.Fatalf("summary: %s", show(sums))
	}
}

func (s *suite) oidcLoginOnce(t *testing.T) {
	b := s.setup(t)
	start := b.clock.Now().Truncate(time.Microsecond)
	l := airlock.OIDCLogin{StateHash: airlock.HashSecret("state-1"), BindingHash: airlock.HashSecret("binding-1"), Next: "/requests/apr_1"}
	wantOK(t, b.store.PutOIDCLogin(b.ctx, l, 10*time.Minute, 10))
	got, err := b.store.TakeOIDCLogin(b.ctx, l.StateHash)
	wantOK(t, err)
	if !bytes.Equal(got.BindingHash, l.BindingHash) || got.Next != l.Next || !got.ExpiresAt.Equal(start.Add(10*time.Minute)) {
		t.Fatalf("TakeOIDCLogin = %s", show(got))
	}
	// A replayed callback finds nothing.
	_, err = b.store.TakeOIDCLogin(b.ctx, l.StateHash)
	wantErr(t, err, airlock.CodeNotFound, "")
	// Nor does one after the login's end.
	late := airlock.OIDCLogin{StateHash: airlock.HashSecret("state-2"), BindingHash: airlock.HashSecret("binding-2"), Next: "/"}
	wantOK(t, b.store.PutOIDCLogin(b.ctx, late, 10*time.Minute, 10))
	b.clock.Set(start.Add(10 * time.Minute))
	_, err = b.store.TakeOIDCLogin(b.ctx, late.StateHash)
	wantErr(t, err, airlock.CodeNotFound, "")
	// Bad logins are refused.
	wantErr(t, b.store.PutOIDCLogin(b.ctx, airlock.OIDCLogin{StateHash: []byte("s")}, time.Minute, 10), airlock.CodeInvalidRequest, "")
	wantErr(t, b.store.PutOIDCLogin(b.ctx, l, 0, 10), airlock.CodeInvalidRequest, "")
}

func (s *suite) oidcLoginsBounded(t *testing.T) {
	b := s.setup(t)
	start := b.clock.Now().Truncate(time.Microsecond)
	put := func(i int) error {
		return b.store.PutOIDCLogin(b.ctx, airlock.OIDCLogin{StateHash: airlock.HashSecret("state-" + string(rune('a'+i))),
			BindingHash: airlock.HashSecret("b"), Next: "/"}, time.Minute, 3)
	}
	for i := range 3 {
		wantOK(t, put(i))
	}
	if err := put(3); airlock.ErrorCode(err) != airlock.CodeUnavailable || !strings.Contains(err.Error(), "too many sign-ins") {
		t.Fatalf("a 4th sign-in in progress: err = %v, want unavailable, too many sign-ins", err)
	}
	// Once they are over, new ones fit again, and the old are swept.
	b.clock.Set(start.Add(time.Minute))
	wantOK(t, put(4))
	wantOK(t, put(5))
}
