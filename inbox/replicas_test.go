package inbox

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/postgres"
)

// TestSessionsAcrossReplicas: two inbox servers over one PostgreSQL
// database, as replicas behind a load balancer without sticky sessions. A
// sign-in on one is served by the other, a decision's message shows on
// whichever serves the next page, and a sign-out or a revocation on one
// ends the session on the other at its next request.
func TestSessionsAcrossReplicas(t *testing.T) {
	t.Parallel()
	schema := testkit.SchemaName(t, "inbox_")
	open := func(t testing.TB, _ airlock.Clock) store.Store {
		s, err := postgres.Open(context.Background(), testkit.PostgresURL(t), postgres.WithSchema(schema))
		if err != nil {
			t.Fatalf("open postgres: %v", err)
		}
		return s
	}
	a := setup(t, func(o *options) { o.openStore = open })
	b := setup(t, func(o *options) { o.openStore = open })

	// One browser: its cookies (host-wide, whatever the port) go to both.
	ca := a.newClient(t)
	cb := b.newClient(t)
	cb.client.Jar = ca.client.Jar
	sameOrigin := map[string]string{"Sec-Fetch-Site": "same-origin"}

	token := ca.signin(t, a.reviewer)
	home := cb.do(t, "GET", "/", nil, nil)
	if home.status != http.StatusOK || !strings.Contains(home.body, "Carol (reviewer)") {
		t.Fatalf("replica B, signed in on A: %d", home.status)
	}
	if got := csrf(t, home.body); got != token {
		t.Fatalf("replica B's forms carry CSRF token %q, A's %q: not the session's one", got, token)
	}

	// A decision on B with the form of A's page; its message on A.
	id := a.toolCall(t, a.instance(t, "adapter"), "ls", map[string]any{}, "")
	if r := cb.do(t, "POST", "/requests/"+id+"/decide", url.Values{"action": {"approve"}, "csrf": {token}, "confirmed": {"yes"}}, sameOrigin); r.status != http.StatusSeeOther {
		t.Fatalf("decide on B: %d\n%s", r.status, r.body)
	}
	if s := a.get(t, id).State; s != airlock.StateApproved {
		t.Fatalf("state %s, want approved", s)
	}
	if page := ca.do(t, "GET", "/requests/"+id, nil, nil).body; !strings.Contains(page, "Approved.</strong>") {
		t.Fatalf("A's page after B recorded the decision does not say so:\n%s", page)
	}

	// Sign-out on B ends the session on A, even for a browser that kept
	// the cookie (or a thief who copied it).
	id = ca.sessionID(t)
	if r := cb.do(t, "POST", "/signout", url.Values{"csrf": {token}}, sameOrigin); r.status != http.StatusSeeOther {
		t.Fatalf("sign-out on B: %d", r.status)
	}
	u, _ := url.Parse(a.srv.URL)
	ca.client.Jar.SetCookies(u, []*http.Cookie{{Name: sessionCookie, Value: id, Path: "/"}})
	ca.signedOut(t, "A after sign-out on B", "/signin")

	// Revocation through A ends the session on B.
	ca.signin(t, a.reviewer)
	if r := cb.do(t, "GET", "/", nil, nil); r.status != http.StatusOK {
		t.Fatalf("B after a new sign-in on A: %d", r.status)
	}
	if _, err := a.svc.RevokeToken(context.Background(), a.callers["admin"], a.callers["Carol (reviewer)"].ID); err != nil {
		t.Fatal(err)
	}
	cb.signedOut(t, "B after revocation on A", "/signin?why=revoked")
	ca.signedOut(t, "A after revocation", "")
}

// TestFlashCookieIsTheSessions: the message a decision's next page shows
// travels in a cookie signed with the session's CSRF token: shown once
// for that session, never for another one, never once changed.
func TestFlashCookieIsTheSessions(t *testing.T) {
	t.Parallel()
	h := &handler{}
	mine, other := &session{csrf: "csrf-mine"}, &session{csrf: "csrf-other"}
	long := strings.Repeat("é", 3000)
	rec := httptest.NewRecorder()
	h.setFlash(rec, httptest.NewRequest("POST", "/", nil), mine, flash{OK: true, Title: "Approved.", Message: long})
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 || cookies[0].Name != flashCookie || len(cookies[0].Value) > 4000 || !cookies[0].HttpOnly {
		t.Fatalf("flash cookies %+v: want one HttpOnly cookie under 4000 bytes", cookies)
	}
	take := func(s *session, value string) *flash {
		r := httptest.NewRequest("GET", "/", nil)
		r.AddCookie(&http.Cookie{Name: flashCookie, Value: value})
		return h.takeFlash(httptest.NewRecorder(), r, s)
	}
	f := take(mine, cookies[0].Value)
	if f == nil || f.Title != "Approved." || !f.OK || !strings.HasSuffix(f.Message, "…") || !utf8.ValidString(f.Message) {
		t.Fatalf("the session's own flash = %+v", f)
	}
	if f := take(other, cookies[0].Value); f != nil {
		t.Fatalf("another session's flash was shown: %+v", f)
	}
	enc, mac, _ := strings.Cut(cookies[0].Value, ".")
	forged, _ := json.Marshal(flash{OK: true, Title: "Approved.", Message: "forged"})
	for _, v := range []string{base64.RawURLEncoding.EncodeToString(forged) + "." + mac, enc, enc + ".", "x.y"} {
		if f := take(mine, v); f != nil {
			t.Fatalf("flash cookie %q was shown: %+v", v, f)
		}
	}
}
