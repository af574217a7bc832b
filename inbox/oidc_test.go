package inbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/postgres"
	"github.com/airlockhq/airlock/store/sqlite"
	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
)

// idp is a real OIDC provider in the test process (mockoidc): discovery,
// authorization with PKCE, a token endpoint that grants each code once,
// and RS256-signed ID tokens. tamper, when set, rewrites the token
// endpoint's answer, as a compromised or misconfigured provider would.
type idp struct {
	m *mockoidc.MockOIDC

	mu     sync.Mutex
	tamper func(idToken string) string
	// loginPage, when set, has the authorization endpoint show a page
	// whose button the person clicks to go on, as a provider's sign-in
	// page does (mockoidc itself authorizes at once).
	loginPage bool
}

// loginPageHTML is the provider's sign-in page: a form that sends the
// authorization request again, confirmed.
var loginPageHTML = template.Must(template.New("login").Parse(`<!doctype html><title>Identity provider</title>
<form method="get" action="{{.Action}}">{{range $k, $v := .Query}}<input type="hidden" name="{{$k}}" value="{{index $v 0}}">{{end}}
<input type="hidden" name="confirmed" value="1"><button id="idp-continue" type="submit">Continue as Ada</button></form>`))

func startIDP(t testing.TB) *idp {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &idp{m: m}
	m.AddMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.mu.Lock()
			tamper, login := p.tamper, p.loginPage
			p.mu.Unlock()
			if login && r.URL.Path == mockoidc.AuthorizationEndpoint && r.URL.Query().Get("confirmed") == "" {
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				loginPageHTML.Execute(w, map[string]any{"Action": mockoidc.AuthorizationEndpoint, "Query": r.URL.Query()})
				return
			}
			if tamper == nil || r.URL.Path != mockoidc.TokenEndpoint {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			var body map[string]any
			if json.Unmarshal(rec.Body.Bytes(), &body) == nil {
				if tok, ok := body["id_token"].(string); ok {
					body["id_token"] = tamper(tok)
				}
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rec.Code)
			json.NewEncoder(w).Encode(body)
		})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown() })
	return p
}

func (p *idp) setTamper(f func(string) string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tamper = f
}

// config is the inbox's OIDC configuration for this provider.
func (p *idp) config(mods ...func(*OIDCConfig)) func(string) *OIDCConfig {
	return func(serverURL string) *OIDCConfig {
		c := &OIDCConfig{Issuer: p.m.Issuer(), ClientID: p.m.ClientID, ClientSecret: p.m.ClientSecret,
			RedirectURL: serverURL + OIDCCallbackPath, GroupsClaim: "groups"}
		for _, f := range mods {
			f(c)
		}
		return c
	}
}

// person is a user of the provider: the ID token's claims besides the
// registered ones, and a change to those (issuer, audience, expiry).
type person struct {
	sub    string
	claims map[string]any
	mod    func(*jwt.RegisteredClaims)
}

func (u person) ID() string { return u.sub }

func (u person) Userinfo([]string) ([]byte, error) { return json.Marshal(map[string]any{"sub": u.sub}) }

func (u person) Claims(_ []string, base *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	if u.mod != nil {
		u.mod(base.RegisteredClaims)
	}
	data, err := json.Marshal(base)
	if err != nil {
		return nil, err
	}
	var out jwt.MapClaims
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	for k, v := range u.claims {
		out[k] = v
	}
	return out, nil
}

// ada is the reviewer the tests sign in.
func ada() person {
	return person{sub: "ada-1815", claims: map[string]any{"name": "Ada Lovelace", "email": "ada@example.com", "email_verified": true,
		"groups": []string{"payments", "on call"}}}
}

// oidcFlow is one browser's sign-in, step by step.
type oidcFlow struct {
	c        *browserless
	callback string // the callback path and query the provider sent the browser to
}

// start follows the sign-in page's link to the provider, which
// authorizes at once (mockoidc asks nobody) and sends the browser back
// with a code; the callback is not yet followed.
func (p *idp) start(t *testing.T, c *browserless, u person) *oidcFlow {
	t.Helper()
	p.m.QueueUser(u)
	page := c.do(t, "GET", "/signin", nil, nil)
	m := regexp.MustCompile(`id="signin-oidc" href="([^"]+)"`).FindStringSubmatch(page.body)
	if m == nil {
		t.Fatalf("the sign-in page has no OIDC link:\n%s", page.body)
	}
	start := c.do(t, "GET", strings.ReplaceAll(m[1], "&amp;", "&"), nil, nil)
	if start.status != http.StatusSeeOther {
		t.Fatalf("start: %d\n%s", start.status, start.body)
	}
	auth, err := url.Parse(start.header.Get("Location"))
	if err != nil || !strings.HasPrefix(auth.String(), p.m.AuthorizationEndpoint()) {
		t.Fatalf("start redirected to %q, not the provider", start.header.Get("Location"))
	}
	q := auth.Query()
	if q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43 || q.Get("code_verifier") != "" ||
		q.Get("nonce") == "" || len(q.Get("state")) < 32 || q.Get("response_type") != "code" {
		t.Fatalf("authorization request without PKCE S256, nonce or state, or with the verifier: %s", auth.RawQuery)
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noFollow.Get(auth.String())
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	back, err := url.Parse(res.Header.Get("Location"))
	if err != nil || back.Path != OIDCCallbackPath {
		t.Fatalf("the provider answered %d, sending the browser to %q", res.StatusCode, res.Header.Get("Location"))
	}
	return &oidcFlow{c: c, callback: back.RequestURI()}
}

// finish follows the callback and returns its answer.
func (f *oidcFlow) finish(t *testing.T) reply {
	t.Helper()
	return f.c.do(t, "GET", f.callback, nil, nil)
}

// signInOIDC signs c in as u and returns the session's CSRF token.
func (p *idp) signInOIDC(t *testing.T, c *browserless, u person) string {
	t.Helper()
	r := p.start(t, c, u).finish(t)
	if r.status != http.StatusOK || !strings.Contains(r.body, `id="continue" href="/"`) {
		t.Fatalf("callback: %d\n%s", r.status, r.body)
	}
	home := c.do(t, "GET", "/", nil, nil)
	if home.status != http.StatusOK {
		t.Fatalf("after the OIDC sign-in, / answered %d", home.status)
	}
	return csrf(t, home.body)
}

// refused checks that a callback signed nobody in, saying why.
func refused(t *testing.T, c *browserless, r reply, status int, why string) {
	t.Helper()
	if r.status != status || !strings.Contains(r.body, why) {
		t.Fatalf("callback: %d, want %d saying %q:\n%s", r.status, status, why, r.body)
	}
	u, _ := url.Parse(c.b.srv.URL)
	for _, ck := range c.client.Jar.Cookies(u) {
		if ck.Name == sessionCookie {
			t.Fatalf("a refused sign-in set a session cookie")
		}
	}
	if home := c.do(t, "GET", "/", nil, nil); home.status != http.StatusSeeOther {
		t.Fatalf("after a refused sign-in, / answered %d", home.status)
	}
}

// TestOIDCSignIn: a reviewer signs in with the identity provider, is
// named and grouped by its claims, decides by name, is listed in GET
// /v1/reviewers, and an admin ends their session.
func TestOIDCSignIn(t *testing.T) {
	t.Parallel()
	p := startIDP(t)
	b := setup(t, func(o *options) { o.oidc = p.config() })
	c := b.newClient(t)
	token := p.signInOIDC(t, c, ada())
	principal := "oidc:" + p.m.Issuer() + "#ada-1815"

	ws, caller, err := b.svc.WebSession(context.Background(), c.sessionID(t))
	if err != nil {
		t.Fatal(err)
	}
	if caller.ID != principal || caller.Principal != principal || caller.Role != airlock.RoleReviewer || caller.Name != "Ada Lovelace" ||
		strings.Join(caller.Groups, "|") != "payments|on call" || ws.Email != "ada@example.com" || ws.TokenID != "" {
		t.Fatalf("session %+v, caller %+v", ws, caller)
	}
	home := c.do(t, "GET", "/", nil, nil)
	if !strings.Contains(home.body, "Ada Lovelace") {
		t.Fatalf("the page does not name the reviewer:\n%s", home.body)
	}

	// She decides; the decision names her.
	id := b.toolCall(t, b.instance(t, "adapter"), "ls", map[string]any{}, "")
	if r := c.do(t, "POST", "/requests/"+id+"/decide", url.Values{"action": {"approve"}, "csrf": {token}, "confirmed": {"yes"}},
		map[string]string{"Sec-Fetch-Site": "same-origin"}); r.status != http.StatusSeeOther {
		t.Fatalf("decide: %d\n%s", r.status, r.body)
	}
	r := b.get(t, id)
	if r.State != airlock.StateApproved || r.Decision.DecidedBy != principal || r.Decision.DecidedByName != "Ada Lovelace" {
		t.Fatalf("decision %+v", r.Decision)
	}

	// GET /v1/reviewers lists her with her email and groups.
	list := restCall(t, b, "GET", "/v1/reviewers", nil)
	var got struct {
		Items []struct {
			Principal, Name, Email string
			Groups                 []string
			SignedInAt             *time.Time `json:"signed_in_at"`
		}
	}
	if err := json.Unmarshal(list, &got); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, it := range got.Items {
		if it.Principal == principal {
			found = it.Name == "Ada Lovelace" && it.Email == "ada@example.com" && strings.Join(it.Groups, "|") == "payments|on call" && it.SignedInAt != nil
		}
	}
	if !found {
		t.Fatalf("GET /v1/reviewers does not list her with name, email and groups:\n%s", list)
	}

	// An admin ends her sessions: the next page signs her out.
	ended := restCall(t, b, "POST", "/v1/reviewers/end-sessions", map[string]any{"principal": principal})
	if !bytes.Contains(ended, []byte(`"ended":1`)) {
		t.Fatalf("end-sessions: %s", ended)
	}
	c.signedOut(t, "after her sessions were ended", "/signin")
}

// restCall calls the REST API as the admin and returns the body of a 200.
func restCall(t *testing.T, b *bundle, method, path string, body any) []byte {
	t.Helper()
	var data []byte
	if body != nil {
		data, _ = json.Marshal(body)
	}
	r, err := testkit.Call(t.Context(), b.srv.Client(), method, b.srv.URL+path, b.admin, string(data))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Raw)
	}
	return []byte(r.Raw)
}

// unsigned returns an ID token's claims as a token with alg "none".
func unsigned(tok string) string {
	parts := strings.Split(tok, ".")
	head := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	return head + "." + parts[1] + "."
}

// TestOIDCRefusals: every bad sign-in is refused and signs nobody in.
func TestOIDCRefusals(t *testing.T) {
	t.Parallel()
	p := startIDP(t)
	b := setup(t, func(o *options) {
		o.oidc = p.config(func(c *OIDCConfig) { c.AllowedDomains = []string{"example.com"} })
	})
	tooMany := make([]string, airlock.MaxReviewerGroups+1)
	for i := range tooMany {
		tooMany[i] = "group " + strconv.Itoa(i)
	}
	with := func(k string, v any) person {
		u := ada()
		u.claims[k] = v
		return u
	}
	withReg := func(f func(*jwt.RegisteredClaims)) person {
		u := ada()
		u.mod = f
		return u
	}
	for _, tc := range []struct {
		name   string
		user   person
		tamper func(string) string
		status int
		why    string
	}{
		{"a token of another issuer", withReg(func(c *jwt.RegisteredClaims) { c.Issuer = "https://evil.example.com" }), nil,
			http.StatusUnauthorized, "did not verify"},
		{"a token for another client (audience)", withReg(func(c *jwt.RegisteredClaims) { c.Audience = jwt.ClaimStrings{"someone-else"} }), nil,
			http.StatusUnauthorized, "did not verify"},
		{"an expired token", withReg(func(c *jwt.RegisteredClaims) {
			c.IssuedAt, c.NotBefore = jwt.NewNumericDate(time.Now().Add(-2*time.Hour)), jwt.NewNumericDate(time.Now().Add(-2*time.Hour))
			c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Hour))
		}), nil, http.StatusUnauthorized, "did not verify"},
		{"an unsigned token (alg none)", ada(), unsigned, http.StatusUnauthorized, "did not verify"},
		{"a token with its signature changed", ada(), func(tok string) string { return tok[:len(tok)-4] + "AAAA" },
			http.StatusUnauthorized, "did not verify"},
		{"a malformed token", ada(), func(string) string { return "not.a.jwt" }, http.StatusUnauthorized, "did not verify"},
		{"an oversized token", with("padding", strings.Repeat("p", maxIDTokenBytes)), nil, http.StatusUnauthorized, "no usable ID token"},
		{"no token at all", ada(), func(string) string { return "" }, http.StatusUnauthorized, "no usable ID token"},
		{"an email at another domain", with("email", "mallory@evil.example"), nil, http.StatusUnauthorized, "not at a domain"},
		{"an unverified email", with("email_verified", false), nil, http.StatusUnauthorized, "not at a domain"},
		{"a domain that only ends like an allowed one", with("email", "eve@notexample.com"), nil, http.StatusUnauthorized, "not at a domain"},
		{"no email", with("email", nil), nil, http.StatusUnauthorized, "not at a domain"},
		{"a malformed email_verified", with("email_verified", 12), nil, http.StatusUnauthorized, "email_verified claim is malformed"},
		{"a groups claim that is no list", with("groups", 42), nil, http.StatusUnauthorized, "more groups than Airlock takes, or a malformed list"},
		{"too many groups", with("groups", tooMany), nil, http.StatusUnauthorized, "more groups than Airlock takes"},
		{"a subject too long for a principal", person{sub: strings.Repeat("s", airlock.MaxPrincipalLen), claims: ada().claims}, nil,
			http.StatusUnauthorized, "too long for Airlock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := b.newClient(t)
			p.setTamper(tc.tamper)
			defer p.setTamper(nil)
			refused(t, c, p.start(t, c, tc.user).finish(t), tc.status, tc.why)
		})
	}

	t.Run("a wrong state", func(t *testing.T) {
		c := b.newClient(t)
		f := p.start(t, c, ada())
		u, _ := url.Parse(f.callback)
		q := u.Query()
		q.Set("state", q.Get("state")+"x")
		u.RawQuery = q.Encode()
		f.callback = u.RequestURI()
		refused(t, c, f.finish(t), http.StatusBadRequest, "expired or was used already")
	})
	t.Run("no state or code", func(t *testing.T) {
		c := b.newClient(t)
		refused(t, c, c.do(t, "GET", OIDCCallbackPath+"?code=abc", nil, nil), http.StatusBadRequest, "incomplete")
		refused(t, c, c.do(t, "GET", OIDCCallbackPath+"?state=abc", nil, nil), http.StatusBadRequest, "incomplete")
	})
	t.Run("the provider's error", func(t *testing.T) {
		c := b.newClient(t)
		refused(t, c, c.do(t, "GET", OIDCCallbackPath+"?error=access_denied&error_description=%3Cb%3Eno%3C/b%3E", nil, nil),
			http.StatusUnauthorized, "did not sign you in (access_denied)")
	})
	t.Run("a callback in another browser (no PKCE verifier)", func(t *testing.T) {
		// The browser's secret, from which the verifier derives, is not
		// there: an attacker's link, or a stolen callback URL.
		f := p.start(t, b.newClient(t), ada())
		other := b.newClient(t)
		f.c = other
		refused(t, other, f.finish(t), http.StatusForbidden, "started in another browser")
	})
	t.Run("a code issued to another sign-in (its PKCE challenge)", func(t *testing.T) {
		// The victim's browser, with its own state and secret, gets the
		// attacker's code: the verifier it derives does not match the
		// code's challenge, and the provider refuses the exchange.
		attacker := p.start(t, b.newClient(t), ada())
		c := b.newClient(t)
		victim := p.start(t, c, ada())
		victim.callback = withCodeOf(victim.callback, attacker.callback)
		refused(t, c, victim.finish(t), http.StatusUnauthorized, "refused the sign-in")
	})
	t.Run("a replayed callback and a replayed code", func(t *testing.T) {
		c := b.newClient(t)
		f := p.start(t, c, ada())
		if r := f.finish(t); r.status != http.StatusOK {
			t.Fatalf("first callback: %d\n%s", r.status, r.body)
		}
		// The same callback again: the state was taken.
		replay := b.newClient(t)
		refused(t, replay, replay.do(t, "GET", f.callback, nil, nil), http.StatusBadRequest, "expired or was used already")
		// The same code with a new sign-in's state: the provider grants
		// a code once.
		again := b.newClient(t)
		g := p.start(t, again, ada())
		g.callback = withCodeOf(g.callback, f.callback)
		refused(t, again, g.finish(t), http.StatusUnauthorized, "refused the sign-in")
	})
}

// TestOIDCClaims: names and groups from claims; group names no group may
// have are dropped, and the reviewer is in the others.
func TestOIDCClaims(t *testing.T) {
	t.Parallel()
	p := startIDP(t)
	b := setup(t, func(o *options) { o.oidc = p.config() })
	for _, tc := range []struct {
		name       string
		claims     map[string]any
		wantName   string
		wantEmail  string
		wantGroups string
	}{
		{"control and bidi characters", map[string]any{"name": "Ada", "groups": []string{"payments", "pay\u0007ments", "ops\u202e", "", "x\ny",
			strings.Repeat("g", airlock.MaxReviewerGroupLen+1), "payments"}}, "Ada", "", "payments"},
		{"one group as a string", map[string]any{"name": "Ada", "groups": "payments"}, "Ada", "", "payments"},
		{"no name: preferred_username, then email", map[string]any{"preferred_username": "ada.l", "email": "ada@example.com"}, "ada.l", "ada@example.com", ""},
		{"a name too long is cut", map[string]any{"name": strings.Repeat("é", 300)}, strings.Repeat("é", airlock.MaxReviewerNameLen/2), "", ""},
		{"an email that is not an address is dropped", map[string]any{"name": "Ada", "email": "Ada <ada@example.com>"}, "Ada", "", ""},
		{"an unverified email is dropped", map[string]any{"name": "Ada", "email": "ada@example.com", "email_verified": "false"}, "Ada", "", ""},
		{"nothing but the subject", map[string]any{}, "ada-1815", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := b.newClient(t)
			p.signInOIDC(t, c, person{sub: "ada-1815", claims: tc.claims})
			ws, caller, err := b.svc.WebSession(context.Background(), c.sessionID(t))
			if err != nil {
				t.Fatal(err)
			}
			if caller.Name != tc.wantName || ws.Email != tc.wantEmail || strings.Join(caller.Groups, "|") != tc.wantGroups {
				t.Fatalf("name %q email %q groups %q; want %q %q %q", caller.Name, ws.Email, strings.Join(caller.Groups, "|"),
					tc.wantName, tc.wantEmail, tc.wantGroups)
			}
		})
	}
}

// TestOIDCOnly: with token sign-in off, the token form is gone, a token
// is refused, and a token's session from before ends; OIDC signs in.
func TestOIDCOnly(t *testing.T) {
	t.Parallel()
	p := startIDP(t)
	dir := t.TempDir()
	open := func(t testing.TB, clk airlock.Clock) store.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(dir, "airlock.db"), sqlite.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := setup(t, func(o *options) { o.openStore = open; o.oidc = p.config() })
	old := before.newClient(t)
	old.signin(t, before.reviewer)

	b := setup(t, func(o *options) { o.openStore = open; o.oidc = p.config(); o.noTokenSignIn = true })
	c := b.newClient(t)
	c.client.Jar = old.client.Jar
	c.signedOut(t, "a token's session with token sign-in off", "")
	page := c.do(t, "GET", "/signin", nil, nil)
	if strings.Contains(page.body, `id="signin-form"`) || !strings.Contains(page.body, `id="signin-oidc"`) {
		t.Fatalf("sign-in page with token sign-in off:\n%s", page.body)
	}
	r := c.do(t, "POST", "/signin", url.Values{"csrf": {"x"}, "token": {before.reviewer}}, nil)
	if r.status != http.StatusForbidden || !strings.Contains(r.body, "Token sign-in is off") {
		t.Fatalf("token sign-in with it off: %d\n%s", r.status, r.body)
	}
	p.signInOIDC(t, c, ada())
}

// TestOIDCAcrossReplicas: two inbox servers over one database, on
// PostgreSQL and on SQLite. A sign-in started on one finishes on the
// other, and a sign-out on either ends the session on both.
func TestOIDCAcrossReplicas(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"postgres", "sqlite"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			var open func(t testing.TB, clk airlock.Clock) store.Store
			if db == "postgres" {
				schema := testkit.SchemaName(t, "inbox_oidc_")
				open = func(t testing.TB, _ airlock.Clock) store.Store {
					s, err := postgres.Open(context.Background(), testkit.PostgresURL(t), postgres.WithSchema(schema))
					if err != nil {
						t.Fatalf("open postgres: %v", err)
					}
					return s
				}
			} else {
				dir := t.TempDir()
				open = func(t testing.TB, clk airlock.Clock) store.Store {
					s, err := sqlite.Open(context.Background(), filepath.Join(dir, "airlock.db"), sqlite.WithClock(clk))
					if err != nil {
						t.Fatal(err)
					}
					return s
				}
			}
			p := startIDP(t)
			a := setup(t, func(o *options) { o.openStore = open; o.oidc = p.config() })
			// B sends the provider's browsers back to A: a callback lands
			// on another replica than the sign-in's start.
			b := setup(t, func(o *options) {
				o.openStore = open
				o.oidc = func(string) *OIDCConfig { return p.config()(a.srv.URL) }
			})

			ca, cb := a.newClient(t), b.newClient(t)
			cb.client.Jar = ca.client.Jar // one browser
			f := p.start(t, cb, ada())
			f.c = ca
			if r := f.finish(t); r.status != http.StatusOK {
				t.Fatalf("callback on A of a sign-in started on B: %d\n%s", r.status, r.body)
			}
			token := csrf(t, cb.do(t, "GET", "/", nil, nil).body)
			if r := ca.do(t, "GET", "/", nil, nil); r.status != http.StatusOK {
				t.Fatalf("A: %d", r.status)
			}

			// Sign-out on B ends the session on A, for a browser that kept
			// the cookie.
			id := ca.sessionID(t)
			if r := cb.do(t, "POST", "/signout", url.Values{"csrf": {token}}, map[string]string{"Sec-Fetch-Site": "same-origin"}); r.status != http.StatusSeeOther {
				t.Fatalf("sign-out on B: %d", r.status)
			}
			u, _ := url.Parse(a.srv.URL)
			ca.client.Jar.SetCookies(u, []*http.Cookie{{Name: sessionCookie, Value: id, Path: "/"}})
			ca.signedOut(t, "A after sign-out on B", "/signin")
		})
	}
}

// withCodeOf returns callback with the authorization code of other, as an
// attacker who got hold of other's code would send it.
func withCodeOf(callback, other string) string {
	u, _ := url.Parse(callback)
	o, _ := url.Parse(other)
	q := u.Query()
	q.Set("code", o.Query().Get("code"))
	u.RawQuery = q.Encode()
	return u.RequestURI()
}
