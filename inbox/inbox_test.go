package inbox

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/provider"
)

// wantHeaders fails unless r carries the inbox's security headers.
func wantHeaders(t *testing.T, what string, r reply) {
	t.Helper()
	for k, v := range map[string]string{
		"Content-Security-Policy": ContentSecurityPolicy,
		"X-Frame-Options":         "DENY",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
	} {
		if got := r.header.Get(k); got != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got, v)
		}
	}
}

// TestSecurityHeadersOnEveryResponse: every inbox answer — pages, static
// files, errors, redirects, refusals — carries the CSP and its siblings.
func TestSecurityHeadersOnEveryResponse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "adapter")
	id := b.toolCall(t, inst, "ls", map[string]any{"path": "/"}, "")
	anon := b.newClient(t)
	for _, p := range []string{"/", "/signin", "/history", "/live", "/static/inbox.js", "/static/inbox.css", "/static/nope", "/requests/" + id, "/requests/"} {
		wantHeaders(t, "anonymous GET "+p, anon.do(t, "GET", p, nil, nil))
	}
	wantHeaders(t, "POST /signout anonymous", anon.do(t, "POST", "/signout", url.Values{}, nil))
	wantHeaders(t, "bad host", anon.do(t, "GET", "/", nil, map[string]string{"Host": "evil.example"}))

	c, token := b.signedInClient(t, b.reviewer)
	for _, p := range []string{"/", "/history", "/history?q=ls", "/sessions", "/board", "/requests/" + id, "/requests/apr_nope", "/?kind=nope"} {
		r := c.do(t, "GET", p, nil, nil)
		wantHeaders(t, "GET "+p, r)
		if p == "/requests/apr_nope" && r.status != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", p, r.status)
		}
	}
	wantHeaders(t, "decide with a bad token", c.do(t, "POST", "/requests/"+id+"/decide", url.Values{"csrf": {"x"}, "action": {"approve"}}, nil))
	wantHeaders(t, "decide", c.do(t, "POST", "/requests/"+id+"/decide", url.Values{"csrf": {token}, "action": {"approve"}}, nil))
	wantHeaders(t, "cross-origin", c.do(t, "POST", "/requests/"+id+"/decide", url.Values{"csrf": {token}, "action": {"approve"}},
		map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}))
	wantHeaders(t, "wrong method", c.do(t, "DELETE", "/history", nil, nil))
}

// TestSignIn: a reviewer token opens a session cookie (HttpOnly,
// SameSite=Strict); agent tokens, unknown tokens and forms without the
// sign-in page's token are refused.
func TestSignIn(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("pages need a session", func(t *testing.T) {
		c := b.newClient(t)
		r := c.do(t, "GET", "/history?q=x", nil, nil)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/signin?next=%2Fhistory%3Fq%3Dx" {
			t.Fatalf("status %d, Location %q", r.status, r.header.Get("Location"))
		}
	})
	t.Run("reviewer", func(t *testing.T) {
		c := b.newClient(t)
		form := c.do(t, "GET", "/signin", nil, nil)
		r := c.do(t, "POST", "/signin", url.Values{"csrf": {csrf(t, form.body)}, "token": {b.reviewer}, "next": {"/history"}}, nil)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/history" {
			t.Fatalf("status %d, Location %q:\n%s", r.status, r.header.Get("Location"), r.body)
		}
		var cookie *http.Cookie
		for _, ck := range (&http.Response{Header: r.header}).Cookies() {
			if ck.Name == sessionCookie && ck.Value != "" {
				cookie = ck
			}
		}
		if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" || cookie.Secure {
			t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/, not Secure on plain HTTP", cookie)
		}
		if strings.Contains(r.header.Get("Set-Cookie"), b.reviewer) {
			t.Fatal("the token itself went into a cookie")
		}
		if home := c.do(t, "GET", "/", nil, nil); home.status != http.StatusOK || !strings.Contains(home.body, "Carol (reviewer)") {
			t.Fatalf("home after sign-in: %d", home.status)
		}
	})
	t.Run("next cannot leave the server", func(t *testing.T) {
		for _, next := range []string{"//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"} {
			if got := localPath(next); got != "/" {
				t.Errorf("localPath(%q) = %q, want /", next, got)
			}
		}
		if got := localPath("/requests/apr_x?y=1"); got != "/requests/apr_x?y=1" {
			t.Errorf("localPath kept %q", got)
		}
	})
	refused := []struct {
		name, token string
		status      int
		says        string
	}{
		{"agent token", b.agent, http.StatusForbidden, "sign in with a reviewer token"},
		{"unknown token", "airlock_nope", http.StatusUnauthorized, "unknown or revoked"},
		{"empty token", "", http.StatusUnauthorized, "unknown or revoked"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			c := b.newClient(t)
			form := c.do(t, "GET", "/signin", nil, nil)
			r := c.do(t, "POST", "/signin", url.Values{"csrf": {csrf(t, form.body)}, "token": {tc.token}}, nil)
			if r.status != tc.status || !strings.Contains(r.body, tc.says) {
				t.Fatalf("status %d, want %d saying %q:\n%s", r.status, tc.status, tc.says, r.body)
			}
		})
	}
	t.Run("form without the page's token", func(t *testing.T) {
		c := b.newClient(t)
		r := c.do(t, "POST", "/signin", url.Values{"csrf": {"forged"}, "token": {b.reviewer}}, nil)
		if r.status != http.StatusForbidden {
			t.Fatalf("status %d, want 403", r.status)
		}
		for _, ck := range (&http.Response{Header: r.header}).Cookies() {
			if ck.Name == sessionCookie && ck.Value != "" {
				t.Fatalf("a refused sign-in set a session cookie: %+v", ck)
			}
		}
	})
}

// TestSecureCookieOnTLS: over TLS the session cookie is Secure.
func TestSecureCookieOnTLS(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.tls = true })
	c := b.newClient(t)
	form := c.do(t, "GET", "/signin", nil, nil)
	r := c.do(t, "POST", "/signin", url.Values{"csrf": {csrf(t, form.body)}, "token": {b.reviewer}}, nil)
	for _, ck := range (&http.Response{Header: r.header}).Cookies() {
		if ck.Name == sessionCookie && !ck.Secure {
			t.Fatalf("session cookie over TLS is not Secure: %+v", ck)
		}
	}
}

// TestRevokedTokenEndsSession: the session re-authenticates its token on
// every request, so revoking it signs the browser out at its next page.
func TestRevokedTokenEndsSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, _ := b.signedInClient(t, b.reviewer)
	if _, err := b.svc.RevokeToken(context.Background(), b.callers["admin"], b.callers["Carol (reviewer)"].ID); err != nil {
		t.Fatal(err)
	}
	c.signedOut(t, "after the revocation", "/signin?why=revoked")
	c.signedOut(t, "the next page", "")
}

// TestSessionExpiresAndSignOut: a sign-in ends after SessionIdle without
// a page, and after SessionMax however busy, judged by the store's clock;
// pages record activity at most once a minute; signing out needs the CSRF
// token and ends the session.
func TestSessionExpiresAndSignOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	b.clock.set(start)
	c, _ := b.signedInClient(t, b.reviewer)
	lastSeen := func() time.Time {
		t.Helper()
		ws, _, err := b.svc.WebSession(context.Background(), c.sessionID(t))
		if err != nil {
			t.Fatalf("session: %v", err)
		}
		return ws.LastSeenAt
	}
	page := func(at time.Time, want int) {
		t.Helper()
		b.clock.set(at)
		if r := c.do(t, "GET", "/", nil, nil); r.status != want {
			t.Fatalf("page at start+%v: %d, want %d", at.Sub(start), r.status, want)
		}
	}

	// Activity is recorded once a minute, not once a page.
	page(start.Add(30*time.Second), http.StatusOK)
	if got := lastSeen(); !got.Equal(start) {
		t.Fatalf("last seen %v after a page within the minute, want the sign-in's %v", got, start)
	}
	page(start.Add(time.Minute), http.StatusOK)
	if got := lastSeen(); !got.Equal(start.Add(time.Minute)) {
		t.Fatalf("last seen %v, want the page's %v", got, start.Add(time.Minute))
	}
	// Idle: each page moves the end; without one for SessionIdle it ends.
	seen := start.Add(time.Minute)
	page(seen.Add(DefaultSessionIdle-time.Second), http.StatusOK)
	seen = seen.Add(DefaultSessionIdle - time.Second)
	page(seen.Add(DefaultSessionIdle-time.Second), http.StatusOK)
	seen = seen.Add(DefaultSessionIdle - time.Second)
	page(seen.Add(DefaultSessionIdle), http.StatusSeeOther)

	// Absolute: a page every 6 hours keeps it until SessionMax, no longer.
	b.clock.set(start)
	c.signin(t, b.reviewer)
	for at := start.Add(6 * time.Hour); at.Before(start.Add(DefaultSessionMax)); at = at.Add(6 * time.Hour) {
		page(at, http.StatusOK)
	}
	page(start.Add(DefaultSessionMax), http.StatusSeeOther)

	b.clock.set(start)
	token := c.signin(t, b.reviewer)
	if r := c.do(t, "POST", "/signout", url.Values{"csrf": {"forged"}}, nil); r.status != http.StatusForbidden {
		t.Fatalf("sign-out without the token: %d", r.status)
	}
	r := c.do(t, "POST", "/signout", url.Values{"csrf": {token}}, nil)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/signin?why=out" {
		t.Fatalf("sign-out: %d %q", r.status, r.header.Get("Location"))
	}
	c.signedOut(t, "after sign-out", "")
}

// TestDecisionForms: approve (with a validity), deny with a note, answer;
// a form without the session's CSRF token, or sent cross-origin even with
// it, changes nothing; conflicts say what holds.
func TestDecisionForms(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "adapter")
	c, token := b.signedInClient(t, b.reviewer)
	// decide posts a form as the confirmation page sends it: confirmed.
	decide := func(id string, form url.Values, header map[string]string) reply {
		form.Set("confirmed", "yes")
		return c.do(t, "POST", "/requests/"+id+"/decide", form, header)
	}

	t.Run("a form not yet confirmed records nothing and restates the call", func(t *testing.T) {
		id := b.toolCall(t, inst, "drop_table", map[string]any{"table": "users", "cascade": true}, "")
		form := url.Values{"action": {"approve"}, "csrf": {token}, "valid_for": {"15m"}, "note": {"once <b>"}, "grant": {"1h/5"}}
		r := c.do(t, "POST", "/requests/"+id+"/decide", form, nil)
		if r.status != http.StatusOK {
			t.Fatalf("status %d, want the confirmation page", r.status)
		}
		if s := b.get(t, id).State; s != airlock.StatePending {
			t.Fatalf("an unconfirmed form recorded %s", s)
		}
		args := b.get(t, id).Arguments
		for _, want := range []string{"Approve this request?", `id="confirm-tool">drop_table<`, "&#34;cascade&#34;: true", "&#34;table&#34;: &#34;users&#34;",
			tokenDigest(args), fmt.Sprintf("%d bytes", len(args)), "once &lt;b&gt;", "for 1 hour, 5 more times", ">15m<",
			`name="confirmed" value="yes"`, `name="csrf" value="` + token + `"`, `name="grant" value="1h/5"`} {
			if !strings.Contains(r.body, want) {
				t.Errorf("the confirmation page lacks %s:\n%s", want, r.body)
			}
		}
		deny := c.do(t, "POST", "/requests/"+id+"/decide", url.Values{"action": {"deny"}, "csrf": {token}}, nil)
		if deny.status != http.StatusOK || !strings.Contains(deny.body, "Deny this request?") {
			t.Fatalf("deny, unconfirmed: status %d:\n%s", deny.status, deny.body)
		}
		if s := b.get(t, id).State; s != airlock.StatePending {
			t.Fatalf("an unconfirmed denial recorded %s", s)
		}
	})

	t.Run("refused without the CSRF token", func(t *testing.T) {
		id := b.toolCall(t, inst, "ls", map[string]any{}, "")
		for _, form := range []url.Values{{"action": {"approve"}}, {"action": {"approve"}, "csrf": {"forged"}}} {
			if r := decide(id, form, nil); r.status != http.StatusForbidden {
				t.Fatalf("status %d, want 403", r.status)
			}
		}
		if s := b.get(t, id).State; s != airlock.StatePending {
			t.Fatalf("state %s, want pending", s)
		}
	})
	t.Run("refused cross-origin even with the token", func(t *testing.T) {
		id := b.toolCall(t, inst, "ls", map[string]any{}, "")
		for _, h := range []map[string]string{
			{"Sec-Fetch-Site": "cross-site"},
			{"Sec-Fetch-Site": "same-site"},
			{"Origin": "http://evil.example"},
		} {
			if r := decide(id, url.Values{"action": {"approve"}, "csrf": {token}}, h); r.status != http.StatusForbidden {
				t.Fatalf("%v: status %d, want 403", h, r.status)
			}
		}
		if s := b.get(t, id).State; s != airlock.StatePending {
			t.Fatalf("state %s, want pending", s)
		}
	})
	t.Run("approve with a validity", func(t *testing.T) {
		id := b.toolCall(t, inst, "ls", map[string]any{}, "")
		r := decide(id, url.Values{"action": {"approve"}, "csrf": {token}, "valid_for": {"15m"}}, map[string]string{"Sec-Fetch-Site": "same-origin"})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/requests/"+id {
			t.Fatalf("status %d", r.status)
		}
		got := b.get(t, id)
		if got.State != airlock.StateApproved || got.Decision.ExpiresAt.Sub(got.Decision.DecidedAt) != 15*time.Minute {
			t.Fatalf("decision %+v", got.Decision)
		}
		page := c.do(t, "GET", "/requests/"+id, nil, nil).body
		if !strings.Contains(page, "Approved.") {
			t.Fatalf("the page does not say what happened:\n%s", page)
		}
		if strings.Contains(c.do(t, "GET", "/requests/"+id, nil, nil).body, "Approved.</strong>") {
			t.Fatal("the message was shown twice")
		}
	})
	t.Run("deny with a note", func(t *testing.T) {
		id := b.toolCall(t, inst, "rm", map[string]any{"path": "/"}, "")
		decide(id, url.Values{"action": {"deny"}, "csrf": {token}, "note": {"not on prod\r\nask Dan"}}, nil)
		got := b.get(t, id)
		if got.State != airlock.StateDenied || got.Decision.Note != "not on prod\nask Dan" {
			t.Fatalf("decision %+v", got.Decision)
		}
	})
	t.Run("a conflict says what holds", func(t *testing.T) {
		id := b.toolCall(t, inst, "ls", map[string]any{}, "")
		if _, err := b.svc.Decide(context.Background(), b.callers["Dan (reviewer)"], id, airlock.DecisionInput{Status: airlock.StateDenied}); err != nil {
			t.Fatal(err)
		}
		decide(id, url.Values{"action": {"approve"}, "csrf": {token}}, nil)
		page := c.do(t, "GET", "/requests/"+id, nil, nil).body
		if !strings.Contains(page, "Nothing was recorded.") || !strings.Contains(page, "already denied") {
			t.Fatalf("page:\n%s", page)
		}
	})
	t.Run("already expired", func(t *testing.T) {
		status, out := b.createREST(t, inst, map[string]any{"tool": "ls", "arguments": map[string]any{}, "timeout": "20ms"})
		if status != http.StatusCreated {
			t.Fatalf("create: %d", status)
		}
		id := out["id"].(string)
		// The long-poll returns when the scheduler has expired it.
		if r, err := b.svc.Request(context.Background(), b.callers["Carol (reviewer)"], id, 10*time.Second); err != nil || r.State != airlock.StateExpired {
			t.Fatalf("state %v, %v", r.State, err)
		}
		decide(id, url.Values{"action": {"approve"}, "csrf": {token}}, nil)
		page := c.do(t, "GET", "/requests/"+id, nil, nil).body
		if !strings.Contains(page, "already expired") {
			t.Fatalf("page:\n%s", page)
		}
	})
	t.Run("answer a question", func(t *testing.T) {
		r := b.mcp(t, provider.MCPRequestInput{Kind: airlock.KindAgentRequest, Title: "Which colour?", Question: &airlock.Question{Choices: []string{"red", "blue"}}})
		if rr := decide(r.ID, url.Values{"action": {"approve"}, "csrf": {token}, "answer": {"green"}}, nil); rr.status != http.StatusSeeOther {
			t.Fatalf("status %d", rr.status)
		}
		if !strings.Contains(c.do(t, "GET", "/requests/"+r.ID, nil, nil).body, "answer must be one of the choices") {
			t.Fatal("an answer outside the choices was not explained")
		}
		decide(r.ID, url.Values{"action": {"approve"}, "csrf": {token}, "answer": {"blue"}}, nil)
		if got := b.get(t, r.ID); got.Decision == nil || got.Decision.Answer != "blue" {
			t.Fatalf("decision %+v", got.Decision)
		}
	})
	t.Run("admins look but do not decide", func(t *testing.T) {
		id := b.toolCall(t, inst, "ls", map[string]any{}, "")
		admin, at := b.signedInClient(t, b.admin)
		page := admin.do(t, "GET", "/requests/"+id, nil, nil).body
		if strings.Contains(page, `id="approve-form"`) || !strings.Contains(page, "Only reviewer tokens decide") {
			t.Fatalf("admin page offers a decision:\n%s", page)
		}
		admin.do(t, "POST", "/requests/"+id+"/decide", url.Values{"action": {"approve"}, "csrf": {at}, "confirmed": {"yes"}}, nil)
		if s := b.get(t, id).State; s != airlock.StatePending {
			t.Fatalf("state %s", s)
		}
		// Unconfirmed, an admin gets no confirmation page to confirm.
		if r := admin.do(t, "POST", "/requests/"+id+"/decide", url.Values{"action": {"approve"}, "csrf": {at}}, nil); r.status != http.StatusSeeOther {
			t.Fatalf("an admin's unconfirmed form: status %d, want back to the request", r.status)
		}
		if page := admin.do(t, "GET", "/requests/"+id, nil, nil).body; !strings.Contains(page, "You cannot decide this request") {
			t.Fatalf("the admin is not told why:\n%s", page)
		}
	})
}

// TestHostCheck: a Host that is neither loopback nor allowed is refused
// before anything else (DNS rebinding).
func TestHostCheck(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.allowedHosts = []string{"airlock.example.com"} })
	c := b.newClient(t)
	for host, want := range map[string]int{
		"evil.example":             http.StatusForbidden,
		"airlock.example.com.evil": http.StatusForbidden,
		"airlock.example.com":      http.StatusOK,
		"airlock.example.com:8443": http.StatusOK,
		"localhost:1":              http.StatusOK,
		"[::1]:8080":               http.StatusOK,
	} {
		if r := c.do(t, "GET", "/signin", nil, map[string]string{"Host": host}); r.status != want {
			t.Errorf("Host %s: status %d, want %d", host, r.status, want)
		}
	}
}

// TestPagesShowWhatMatters renders each page without a browser: the
// request page's facts, the claim apart, the digest, the work_move
// preview; sessions by status; the board; history search.
func TestPagesShowWhatMatters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	reviewer := b.callers["Carol (reviewer)"]
	for _, col := range [][2]string{{"todo", "To do"}, {"doing", "Doing"}, {"done", "Done"}} {
		if _, err := b.svc.CreateColumn(ctx, reviewer, col[0], col[1]); err != nil {
			t.Fatal(err)
		}
	}
	item, err := b.svc.CreateWorkItem(ctx, reviewer, "Fix login", "doing")
	if err != nil {
		t.Fatal(err)
	}
	sess, err := b.svc.OpenSession(ctx, b.callers["release bot"], "deploy work", nil)
	if err != nil {
		t.Fatal(err)
	}
	move := b.mcp(t, provider.MCPRequestInput{Title: "Finish login", SessionID: sess.ID, Proposal: &airlock.Proposal{Mode: airlock.ProposalCommand,
		Command: &airlock.Command{Method: airlock.MethodWorkMove, Input: json.RawMessage(`{"itemId":"` + item.ID + `","columnKey":"done"}`)}}})
	inst := b.instance(t, "payments adapter")
	id := b.toolCall(t, inst, "issue_refund", map[string]any{"amount": 4900}, "The customer was charged twice.")

	c, _ := b.signedInClient(t, b.reviewer)

	page := c.do(t, "GET", "/requests/"+move.ID, nil, nil).body
	for _, want := range []string{"Move item “Fix login” from Doing to Done", "work_move", "deploy work"} {
		if !strings.Contains(page, want) {
			t.Errorf("work_move page lacks %q", want)
		}
	}
	page = c.do(t, "GET", "/requests/"+id, nil, nil).body
	for _, want := range []string{"issue_refund", "The agent&#39;s claim (unverified)", "The customer was charged twice.", "payments adapter"} {
		if !strings.Contains(page, want) {
			t.Errorf("tool call page lacks %q", want)
		}
	}
	stored := b.get(t, id)
	if !strings.Contains(page, tokenDigest(stored.Arguments)) {
		t.Errorf("the page lacks the arguments' digest %s", tokenDigest(stored.Arguments))
	}
	page = c.do(t, "GET", "/sessions", nil, nil).body
	if !strings.Contains(page, "deploy work") || !strings.Contains(page, "Waiting for a decision") {
		t.Errorf("sessions page:\n%s", page)
	}
	page = c.do(t, "GET", "/board", nil, nil).body
	if !strings.Contains(page, "Fix login") || !strings.Contains(page, "/requests/"+move.ID) {
		t.Errorf("board page lacks the item or its pending move")
	}
	if _, err := b.svc.Decide(ctx, reviewer, id, airlock.DecisionInput{Status: airlock.StateDenied, Note: "double refund risk"}); err != nil {
		t.Fatal(err)
	}
	page = c.do(t, "GET", "/history?q=triple+refund", nil, nil).body
	if strings.Contains(page, "/requests/"+id) || !strings.Contains(page, "Nothing found") {
		t.Error("history search for an absent phrase found something")
	}
	page = c.do(t, "GET", "/history?q=double+REFUND", nil, nil).body
	if !strings.Contains(page, "/requests/"+id) || !strings.Contains(page, "double refund risk") {
		t.Errorf("history search by note failed:\n%s", page)
	}
	page = c.do(t, "GET", "/?session="+sess.ID, nil, nil).body
	if !strings.Contains(page, "/requests/"+move.ID) || strings.Contains(page, "/requests/"+id) {
		t.Error("the session filter does not select the session's requests")
	}
	page = c.do(t, "GET", "/?kind=tool_call", nil, nil).body
	if strings.Contains(page, "/requests/"+move.ID) {
		t.Error("the kind filter let a work_change through")
	}
	if !strings.Contains(c.do(t, "GET", "/", nil, nil).body, "<title>(1) Pending · Airlock</title>") {
		t.Error("the title does not count the pending requests")
	}
}

// TestLiveStream follows /live without a browser: the pending list comes
// at once, again when a request arrives and when it is decided; a revoked
// token ends the stream.
func TestLiveStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "adapter")
	c, _ := b.signedInClient(t, b.reviewer)
	if r := b.newClient(t).do(t, "GET", "/live", nil, nil); r.status != http.StatusUnauthorized {
		t.Fatalf("anonymous stream: %d", r.status)
	}
	req, _ := http.NewRequest("GET", b.srv.URL+"/live", nil)
	res, err := c.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	events := make(chan string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var data strings.Builder
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "data: "):
				data.WriteString(line[len("data: "):] + "\n")
			case line == "" && data.Len() > 0:
				events <- data.String()
				data.Reset()
			}
		}
	}()
	next := func(until func(string) bool) string {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case e, ok := <-events:
				if !ok {
					t.Fatal("stream ended")
				}
				if until(e) {
					return e
				}
			case <-timeout:
				t.Fatal("no such event within 10s")
			}
		}
	}
	next(func(e string) bool {
		return strings.Contains(e, `id="pending-list"`) && strings.Contains(e, `data-count="0"`)
	})
	id := b.toolCall(t, inst, "deploy", map[string]any{}, "")
	next(func(e string) bool { return strings.Contains(e, `data-id="`+id+`"`) })
	if _, err := b.svc.Decide(context.Background(), b.callers["Carol (reviewer)"], id, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
		t.Fatal(err)
	}
	next(func(e string) bool { return !strings.Contains(e, id) && strings.Contains(e, `data-count="0"`) })
	if _, err := b.svc.RevokeToken(context.Background(), b.callers["admin"], b.callers["Carol (reviewer)"].ID); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return // ended, as it should
			}
		case <-timeout:
			t.Fatal("the stream outlived the revocation")
		}
	}
}

// TestSessionsPageStale: a session without a heartbeat for StaleAfter is
// listed as stale (display only), a closed one as closed.
func TestSessionsPageStale(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *options) { o.staleAfter = time.Nanosecond })
	ctx := context.Background()
	agent := b.callers["release bot"]
	quiet, err := b.svc.OpenSession(ctx, agent, "quiet agent", nil)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := b.svc.OpenSession(ctx, agent, "finished agent", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.CloseSession(ctx, agent, gone.ID); err != nil {
		t.Fatal(err)
	}
	c, _ := b.signedInClient(t, b.reviewer)
	page := c.do(t, "GET", "/sessions", nil, nil).body
	stale := page[strings.Index(page, `id="s-stale"`):strings.Index(page, `id="s-closed"`)]
	closed := page[strings.Index(page, `id="s-closed"`):]
	if !strings.Contains(stale, quiet.ID) || strings.Contains(stale, gone.ID) || !strings.Contains(closed, gone.ID) {
		t.Fatalf("sessions page groups wrongly:\n%s", page)
	}
}

// TestGrantsInInbox: the decision form offers "approve and allow the same
// for …" on a tool call (never on a question); choosing it makes a grant
// that approves the next same call; the grants page lists it with its
// uses left and revokes it (with the session's CSRF token only).
func TestGrantsInInbox(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "adapter")
	c, token := b.signedInClient(t, b.reviewer)
	same := map[string]string{"Sec-Fetch-Site": "same-origin"}
	args := map[string]any{"table": "users"}
	id := b.toolCall(t, inst, "export_table", args, "")
	if page := c.do(t, "GET", "/requests/"+id, nil, nil).body; !strings.Contains(page, `name="grant"`) || !strings.Contains(page, "for 1 hour, 5 more times") {
		t.Fatalf("the decision form offers no grant:\n%s", page)
	}
	q := b.mcp(t, provider.MCPRequestInput{Kind: airlock.KindAgentRequest, Title: "Which?", Proposal: &airlock.Proposal{Mode: "advisory"},
		Question: &airlock.Question{Choices: []string{"a", "b"}}, IdempotencyKey: "q-grant"})
	if page := c.do(t, "GET", "/requests/"+q.ID, nil, nil).body; strings.Contains(page, `name="grant"`) {
		t.Fatal("a question's form offers a grant")
	}
	if r := c.do(t, "POST", "/requests/"+id+"/decide", url.Values{"action": {"approve"}, "csrf": {token}, "grant": {"99h/1"}}, same); r.status != http.StatusBadRequest {
		t.Fatalf("a grant the form does not offer: status %d", r.status)
	}
	r := c.do(t, "POST", "/requests/"+id+"/decide", url.Values{"action": {"approve"}, "csrf": {token}, "grant": {"1h/5"}, "confirmed": {"yes"}}, same)
	if r.status != http.StatusSeeOther {
		t.Fatalf("approve with a grant: status %d", r.status)
	}
	if page := c.do(t, "GET", "/requests/"+id, nil, nil).body; !strings.Contains(page, "The same call is allowed until") || !strings.Contains(page, "5 more times") {
		t.Fatalf("the page does not say a grant was made:\n%s", page)
	}
	next := b.get(t, b.toolCall(t, inst, "export_table", args, ""))
	gid, ok := next.Decision.GrantID()
	if next.State != airlock.StateApproved || !ok {
		t.Fatalf("the next same call: %s %+v", next.State, next.Decision)
	}
	page := c.do(t, "GET", "/grants", nil, nil).body
	if !strings.Contains(page, gid) || !strings.Contains(page, "4 of 5") || !strings.Contains(page, "Revoke") {
		t.Fatalf("grants page:\n%s", page)
	}
	if r := c.do(t, "POST", "/grants/"+gid+"/revoke", url.Values{"csrf": {"forged"}}, same); r.status != http.StatusForbidden {
		t.Fatalf("revoke with a forged token: status %d", r.status)
	}
	if r := c.do(t, "POST", "/grants/"+gid+"/revoke", url.Values{"csrf": {token}}, same); r.status != http.StatusSeeOther {
		t.Fatalf("revoke: status %d", r.status)
	}
	if page := c.do(t, "GET", "/grants", nil, nil).body; !strings.Contains(page, "revoked") || !strings.Contains(page, "approves nothing more") {
		t.Fatalf("grants page after the revocation:\n%s", page)
	}
	if s := b.get(t, b.toolCall(t, inst, "export_table", args, "")).State; s != airlock.StatePending {
		t.Fatalf("after the revocation: %s", s)
	}
}

// TestAgentWordsLabelled: an MCP request's title, description and question
// are the agent's words: the list and the request page label them as the
// agent's claim and name the agent (and its session), never "from mcp".
func TestAgentWordsLabelled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	plain := b.mcp(t, provider.MCPRequestInput{Title: "Rotate the production keys", Description: "Routine, approved by security last week."})
	ses, err := b.svc.OpenSession(ctx, b.callers["release bot"], "Release 2.4", nil)
	if err != nil {
		t.Fatal(err)
	}
	asked := b.mcp(t, provider.MCPRequestInput{Kind: airlock.KindAgentRequest, Title: "Which region?", SessionID: ses.ID,
		Question: &airlock.Question{Choices: []string{"eu", "us"}}})
	c, _ := b.signedInClient(t, b.reviewer)

	list := c.do(t, "GET", "/", nil, nil).body
	for _, want := range []string{"Agent's claim:</span> <span class=\"claim-text\">Rotate the production keys<", "from release bot<", "from release bot (session Release 2.4)<"} {
		if !strings.Contains(list, want) {
			t.Errorf("the pending list lacks %s:\n%s", want, list)
		}
	}
	if strings.Contains(list, "from mcp") {
		t.Errorf("the pending list says from mcp:\n%s", list)
	}
	for id, who := range map[string]string{plain.ID: "release bot", asked.ID: "release bot (session Release 2.4)"} {
		page := c.do(t, "GET", "/requests/"+id, nil, nil).body
		for _, want := range []string{`id="title-claim"><strong>The agent&#39;s claim (unverified):</strong>`, `id="claim-agent">` + who + `<`, "the agent&#39;s claim (unverified)</h2>"} {
			if !strings.Contains(page, want) {
				t.Errorf("the page of %s lacks %s:\n%s", id, want, page)
			}
		}
	}
	if _, err := b.svc.Decide(ctx, b.callers["Dan (reviewer)"], plain.ID, airlock.DecisionInput{Status: airlock.StateDenied}); err != nil {
		t.Fatal(err)
	}
	history := c.do(t, "GET", "/history", nil, nil).body
	if !strings.Contains(history, "Agent's claim:") || !strings.Contains(history, "from release bot<") {
		t.Errorf("the history does not label the agent's title or name the agent:\n%s", history)
	}
}

// TestFatiguePage: the fatigue page shows an admin every decider's
// statistics over the last 30 days, times measured by the injected clock,
// with the fast approvals, and the call approved ten times unchanged as a
// suggestion with its shadow rule; a reviewer sees their own row and no
// suggestions.
func TestFatiguePage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "adapter")
	start := time.Date(2031, 5, 6, 7, 0, 0, 0, time.UTC)
	b.clock.set(start)
	carol := b.callers["Carol (reviewer)"]
	for i := range 10 {
		b.clock.set(start.Add(time.Duration(i) * time.Minute))
		id := b.toolCall(t, inst, "read_file", map[string]any{"path": "/srv/docs/README.md"}, "")
		// Carol takes i seconds: 0 and 1 s are fast (under 2 s).
		b.clock.set(start.Add(time.Duration(i)*time.Minute + time.Duration(i)*time.Second))
		if _, err := b.svc.Decide(t.Context(), carol, id, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
			t.Fatal(err)
		}
	}
	id := b.toolCall(t, inst, "shell", map[string]any{"cmd": "rm -rf /"}, "")
	b.clock.set(start.Add(10 * time.Minute))
	if _, err := b.svc.Decide(t.Context(), b.callers["Dan (reviewer)"], id, airlock.DecisionInput{Status: airlock.StateDenied}); err != nil {
		t.Fatal(err)
	}
	c, _ := b.signedInClient(t, b.admin)
	page := c.do(t, "GET", "/fatigue", nil, nil).body
	carolID := carol.Token.ID
	for _, want := range []string{carolID, "<td>10</td>", "<td>100%</td>", "<td>4.0 s</td>", "<td>8.0 s</td>", "<td>2 (20%)</td>",
		b.callers["Dan (reviewer)"].Token.ID, "Suggestions <span class=\"n\">(1)</span>", "shadow: true", "approved 10 times"} {
		if !strings.Contains(page, want) {
			t.Fatalf("the admin's fatigue page lacks %q:\n%s", want, page)
		}
	}
	// Thirty days after Carol's last decision (at 9 min 9 s), hers are out
	// of the window; Dan's denial, at 10 min, is not.
	b.clock.set(start.Add(30*24*time.Hour + 9*time.Minute + 30*time.Second))
	c, _ = b.signedInClient(t, b.admin) // the session has ended by now
	if page := c.do(t, "GET", "/fatigue", nil, nil).body; strings.Contains(page, carolID) || !strings.Contains(page, b.callers["Dan (reviewer)"].Token.ID) {
		t.Fatalf("30 days on, the page still shows Carol's or lost Dan's decision:\n%s", page)
	}
	b.clock.set(start.Add(20 * time.Minute))
	rc, _ := b.signedInClient(t, b.reviewer)
	page = rc.do(t, "GET", "/fatigue", nil, nil).body
	if !strings.Contains(page, carolID) || strings.Contains(page, b.callers["Dan (reviewer)"].Token.ID) || strings.Contains(page, "Suggestions") {
		t.Fatalf("a reviewer's fatigue page shows others or suggestions:\n%s", page)
	}
}
