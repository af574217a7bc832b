package inbox

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// OIDC sign-in (docs/teams.md): the inbox sends the browser to the
// identity provider with the authorization code flow, PKCE (S256), a
// state and a nonce, and signs in the reviewer it vouches for. Nothing of
// a sign-in in progress lives in one process: the store keeps the hash of
// its state and of a secret in the browser's cookie, from which the PKCE
// verifier and the nonce derive, so the callback may land on any replica,
// once, and only in the browser that started it.

// OIDCCallbackPath is the path of the redirect URL the identity provider
// sends the browser back to; --oidc-redirect-url must end in it.
const OIDCCallbackPath = "/signin/oidc/callback"

// Bounds of an OIDC sign-in.
const (
	// oidcLoginTTL is how long a browser has at the identity provider.
	oidcLoginTTL = 10 * time.Minute
	// oidcMaxLogins bounds the sign-ins in progress, all replicas
	// together: a flood of starts is refused, not stored.
	oidcMaxLogins = 10000
	// maxIDTokenBytes bounds the ID token read from the token endpoint
	// (the endpoint's whole answer is bounded at 1 MiB by oauth2).
	maxIDTokenBytes = 16 << 10
	// oidcTimeout bounds discovery and the code exchange.
	oidcTimeout = 15 * time.Second
	// oidcCookie carries the sign-in's browser secret, only to the
	// callback; SameSite=Lax, since the identity provider's redirect is a
	// navigation from another site.
	oidcCookie = "airlock_oidc"
)

// OIDCConfig configures OIDC sign-in to the inbox.
type OIDCConfig struct {
	// Issuer is the identity provider's issuer URL, exactly as its
	// discovery document and ID tokens name it.
	Issuer string
	// ClientID and ClientSecret are the inbox's client at the provider.
	ClientID, ClientSecret string
	// RedirectURL is the inbox's callback as the browser reaches it,
	// ending in OIDCCallbackPath.
	RedirectURL string
	// AllowedDomains, when set, admit only reviewers whose email claim is
	// at one of these domains (and verified, when the provider says).
	AllowedDomains []string
	// GroupsClaim names the ID token claim that lists the reviewer's
	// groups ("" for none).
	GroupsClaim string
	// Scopes are requested besides openid (default email and profile;
	// some providers send groups only for a "groups" scope).
	Scopes []string
	// HTTPClient reaches the identity provider (default
	// http.DefaultClient).
	HTTPClient *http.Client
}

// Validate refuses a configuration no sign-in could work with, naming the
// flag to fix.
func (c OIDCConfig) Validate() error {
	iss, err := url.Parse(c.Issuer)
	switch {
	case c.Issuer == "" || err != nil || iss.Host == "" || (iss.Scheme != "https" && !loopbackURL(iss)):
		return fmt.Errorf("--oidc-issuer %q must be an https:// URL (http:// only on loopback)", c.Issuer)
	case c.ClientID == "":
		return errors.New("--oidc-client-id is required with --oidc-issuer")
	}
	red, err := url.Parse(c.RedirectURL)
	if c.RedirectURL == "" || err != nil || red.Host == "" || (red.Scheme != "https" && red.Scheme != "http") || red.Path != OIDCCallbackPath {
		return fmt.Errorf("--oidc-redirect-url %q must be the inbox's public URL followed by %s, such as https://airlock.example.com%s",
			c.RedirectURL, OIDCCallbackPath, OIDCCallbackPath)
	}
	if len(airlock.OIDCPrincipalPrefix+c.Issuer+"#") >= airlock.MaxPrincipalLen-20 {
		return fmt.Errorf("--oidc-issuer is %d bytes: too long to leave room for a subject in a principal of at most %d", len(c.Issuer), airlock.MaxPrincipalLen)
	}
	for _, d := range c.AllowedDomains {
		if d == "" || strings.ContainsAny(d, "@/ ") {
			return fmt.Errorf("--oidc-allowed-domains: %q is not a domain such as example.com", d)
		}
	}
	return nil
}

func loopbackURL(u *url.URL) bool {
	h := u.Hostname()
	return h == "localhost" || h == "127.0.0.1" || h == "::1"
}

// oidcSignin is the inbox's client of the identity provider. Discovery
// happens at the first sign-in, not at start-up, so that a replica starts
// (and serves token sign-ins) while the provider is unreachable; it is
// retried until it succeeds.
type oidcSignin struct {
	cfg     OIDCConfig
	domains []string

	mu       sync.Mutex
	provider *oidc.Provider
}

func newOIDCSignin(cfg OIDCConfig) *oidcSignin {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []string{"email", "profile"}
	}
	o := &oidcSignin{cfg: cfg}
	for _, d := range cfg.AllowedDomains {
		o.domains = append(o.domains, strings.ToLower(strings.TrimPrefix(d, "@")))
	}
	return o
}

// context carries the HTTP client go-oidc and oauth2 reach the provider with.
func (o *oidcSignin) context(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, o.cfg.HTTPClient)
}

// discover returns the provider, reading its discovery document once.
func (o *oidcSignin) discover(ctx context.Context) (*oidc.Provider, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.provider != nil {
		return o.provider, nil
	}
	ctx, cancel := context.WithTimeout(ctx, oidcTimeout)
	defer cancel()
	p, err := oidc.NewProvider(o.context(ctx), o.cfg.Issuer)
	if err != nil {
		return nil, err
	}
	o.provider = p
	return p, nil
}

func (o *oidcSignin) oauth2(p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{
		ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret, RedirectURL: o.cfg.RedirectURL,
		Endpoint: p.Endpoint(), Scopes: append([]string{oidc.ScopeOpenID}, o.cfg.Scopes...),
	}
}

// derive returns a secret of the sign-in derived from the browser's
// secret: the PKCE verifier (43 characters, as RFC 7636 allows) or the
// nonce.
func derive(binding, label, state string) string {
	m := hmac.New(sha256.New, []byte(binding))
	m.Write([]byte("airlock oidc " + label + "\x00" + state))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// oidcStart sends the browser to the identity provider. It is a GET, a
// link of the sign-in page: the inbox's Content-Security-Policy
// (form-action 'self') would stop a form's redirect to another site.
// Starting a sign-in signs nobody in, and a flood of starts is bounded
// (oidcMaxLogins).
func (h *handler) oidcStart(w http.ResponseWriter, r *http.Request) {
	next := localPath(r.URL.Query().Get("next"))
	p, err := h.oidc.discover(r.Context())
	if err != nil {
		h.log.Warn("inbox: OIDC discovery", "issuer", h.oidc.cfg.Issuer, "err", err)
		h.signinPage(w, r, http.StatusBadGateway, signinBody{Next: next,
			Problem: "The identity provider could not be reached. Try again in a moment; if it persists, tell your Airlock admin."})
		return
	}
	binding, state := randomString(), randomString()
	err = h.svc.PutOIDCLogin(r.Context(), airlock.OIDCLogin{StateHash: airlock.HashSecret(state), BindingHash: airlock.HashSecret(binding), Next: next},
		oidcLoginTTL, oidcMaxLogins)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: oidcCookie, Value: binding, Path: "/signin/oidc/", MaxAge: int(oidcLoginTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil || h.secureCookies,
	})
	u := h.oidc.oauth2(p).AuthCodeURL(state, oidc.Nonce(derive(binding, "nonce", state)),
		oauth2.S256ChallengeOption(derive(binding, "pkce", state)))
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// oidcRefused answers a callback that signs nobody in: the sign-in page
// with why, and a log line for the admin.
func (h *handler) oidcRefused(w http.ResponseWriter, r *http.Request, status int, why, detail string) {
	h.log.Warn("inbox: OIDC sign-in refused", "why", why, "detail", detail, "addr", r.RemoteAddr)
	h.signinPage(w, r, status, signinBody{Next: "/", Problem: why})
}

// oidcCallback signs in the reviewer the identity provider sent back.
func (h *handler) oidcCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	// The browser's secret serves one callback at most.
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: "", Path: "/signin/oidc/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil || h.secureCookies})
	if e := q.Get("error"); e != "" {
		h.oidcRefused(w, r, http.StatusUnauthorized, "The identity provider did not sign you in ("+clip(e, 64)+"). Try again.",
			clip(q.Get("error_description"), 200))
		return
	}
	state, code := q.Get("state"), q.Get("code")
	if state == "" || code == "" || len(state) > 256 || len(code) > 4096 {
		h.oidcRefused(w, r, http.StatusBadRequest, "This sign-in link is incomplete. Start again from the sign-in page.", "no state or code")
		return
	}
	login, err := h.svc.TakeOIDCLogin(r.Context(), state)
	switch airlock.ErrorCode(err) {
	case "":
	case airlock.CodeNotFound:
		h.oidcRefused(w, r, http.StatusBadRequest, "This sign-in has expired or was used already. Start again from the sign-in page.", "unknown state")
		return
	default:
		h.fail(w, r, err)
		return
	}
	ck, err := r.Cookie(oidcCookie)
	if err != nil || subtle.ConstantTimeCompare(airlock.HashSecret(ck.Value), login.BindingHash) != 1 {
		h.oidcRefused(w, r, http.StatusForbidden, "This sign-in was started in another browser. Start again from the sign-in page.",
			"the state's browser secret is missing or another's")
		return
	}
	id, why, detail := h.oidc.identity(r.Context(), code, ck.Value, state)
	if why != "" {
		h.oidcRefused(w, r, http.StatusUnauthorized, why, detail)
		return
	}
	sid, _, err := h.svc.StartOIDCWebSession(r.Context(), id, h.sessionIdle, h.sessionMax)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if _, err := h.svc.SweepWebSessions(r.Context(), sweepBatch); err != nil {
		h.log.Warn("inbox: sweeping sessions that are over", "err", err)
	}
	h.setCookie(w, r, signinCookie, "", -1)
	h.setCookie(w, r, sessionCookie, sid, int(h.sessionMax.Seconds()))
	// The session cookie is SameSite=Strict, and a browser that judges a
	// redirect chain by its cross-site start (the identity provider's)
	// would not send it on a redirect from here: a page of this site
	// moves on instead, a same-site navigation in every browser.
	h.render(w, r, http.StatusOK, nil, "continue", "Signed in", continueBody{Next: login.Next})
}

// continueBody is the page after an OIDC sign-in.
type continueBody struct{ Next string }

// claims are the ID token claims the inbox reads.
type claims struct {
	Email             string          `json:"email"`
	EmailVerified     json.RawMessage `json:"email_verified"`
	Name              string          `json:"name"`
	PreferredUsername string          `json:"preferred_username"`
}

// identity exchanges code for an ID token, verifies it and reads the
// reviewer from its claims. why, when not "", is what to tell the
// browser, and detail what to log.
func (o *oidcSignin) identity(ctx context.Context, code, binding, state string) (id airlock.ReviewerIdentity, why, detail string) {
	const retry = " Try again, or tell your Airlock admin."
	p, err := o.discover(ctx)
	if err != nil {
		return id, "The identity provider could not be reached." + retry, err.Error()
	}
	ctx, cancel := context.WithTimeout(o.context(ctx), oidcTimeout)
	defer cancel()
	tok, err := o.oauth2(p).Exchange(ctx, code, oauth2.VerifierOption(derive(binding, "pkce", state)))
	if err != nil {
		return id, "The identity provider refused the sign-in's code." + retry, err.Error()
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" || len(raw) > maxIDTokenBytes {
		return id, "The identity provider sent no usable ID token." + retry, fmt.Sprintf("id_token of %d bytes (at most %d)", len(raw), maxIDTokenBytes)
	}
	// go-oidc checks the signature against the provider's keys (never
	// alg "none"), the issuer, the audience (our client ID) and expiry.
	idt, err := p.Verifier(&oidc.Config{ClientID: o.cfg.ClientID}).Verify(ctx, raw)
	if err != nil {
		return id, "The identity provider's ID token did not verify." + retry, err.Error()
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(derive(binding, "nonce", state))) != 1 {
		return id, "The ID token was not issued for this sign-in." + retry, "nonce mismatch"
	}
	var c claims
	if err := idt.Claims(&c); err != nil {
		return id, "The ID token's claims could not be read." + retry, err.Error()
	}
	if idt.Subject == "" || !utf8.ValidString(idt.Subject) || strings.ContainsAny(idt.Subject, "\x00\n\r") {
		return id, "The ID token names no usable subject." + retry, fmt.Sprintf("sub %q", clip(idt.Subject, 80))
	}
	id.Principal = airlock.OIDCPrincipalPrefix + o.cfg.Issuer + "#" + idt.Subject
	if len(id.Principal) > airlock.MaxPrincipalLen {
		return id, "Your account's identifier at the identity provider is too long for Airlock." + retry,
			fmt.Sprintf("principal of %d bytes (at most %d)", len(id.Principal), airlock.MaxPrincipalLen)
	}
	verified, err := emailVerified(c.EmailVerified)
	if err != nil {
		return id, "The ID token's email_verified claim is malformed." + retry, err.Error()
	}
	email := ""
	if a, err := mail.ParseAddress(c.Email); err == nil && a.Address == c.Email && len(c.Email) <= airlock.MaxEmailLen && verified {
		email = c.Email
	}
	if len(o.domains) > 0 {
		at := strings.LastIndexByte(email, '@')
		if at < 0 || !slices.Contains(o.domains, strings.ToLower(email[at+1:])) {
			return id, "Your account is not at a domain this inbox admits. Sign in with your work account.",
				fmt.Sprintf("email %q (verified %v) not at %v", clip(c.Email, 80), verified, o.domains)
		}
	}
	id.Email = email
	id.Name = displayName(c.Name, c.PreferredUsername, email, idt.Subject)
	if o.cfg.GroupsClaim != "" {
		var all map[string]json.RawMessage
		if err := idt.Claims(&all); err != nil {
			return id, "The ID token's claims could not be read." + retry, err.Error()
		}
		gs, err := groups(all[o.cfg.GroupsClaim])
		if err != nil {
			return id, "The identity provider sent more groups than Airlock takes, or a malformed list." + retry,
				fmt.Sprintf("claim %q: %v", o.cfg.GroupsClaim, err)
		}
		id.Groups = gs
	}
	return id, "", ""
}

// emailVerified reads email_verified: true when absent (a provider that
// does not say), refused when false; some providers send it as a string.
func emailVerified(raw json.RawMessage) (bool, error) {
	switch strings.TrimSpace(string(raw)) {
	case "", "null", "true", `"true"`:
		return true, nil
	case "false", `"false"`:
		return false, nil
	}
	return false, fmt.Errorf("email_verified is %s", clip(string(raw), 40))
}

// displayName is the first usable of the name claims, cut to a name's
// bound.
func displayName(candidates ...string) string {
	for _, n := range candidates {
		n = strings.TrimSpace(strings.ReplaceAll(n, "\x00", ""))
		if n != "" && utf8.ValidString(n) {
			return clip(n, airlock.MaxReviewerNameLen)
		}
	}
	return "unnamed reviewer"
}

// groups reads a groups claim: a list of strings (or one string). Names
// that no group may have (empty, too long, with control, invisible or
// bidirectional characters: airlock.ValidGroupName) are dropped, so the
// reviewer is simply not in that group; more than
// airlock.MaxReviewerGroups valid names refuse the sign-in, since which to
// keep cannot be guessed.
func groups(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		var one string
		if json.Unmarshal(raw, &one) != nil {
			return nil, errors.New("not a list of strings")
		}
		list = []string{one}
	}
	var out []string
	for _, g := range list {
		if airlock.ValidGroupName(g) && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	if len(out) > airlock.MaxReviewerGroups {
		return nil, fmt.Errorf("%d groups; at most %d", len(out), airlock.MaxReviewerGroups)
	}
	return out, nil
}

// clip cuts s to at most n bytes of valid UTF-8.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// oidcLabel is what the sign-in page's button names: the issuer's host.
func (o *oidcSignin) label() string {
	if u, err := url.Parse(o.cfg.Issuer); err == nil && u.Host != "" {
		return u.Host
	}
	return o.cfg.Issuer
}
