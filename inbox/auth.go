package inbox

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/ratelimit"
)

// signinBody is the sign-in page's data.
type signinBody struct {
	Next    string
	Token   string // the pre-session CSRF token of the form
	Problem string
	Notice  string
	// OIDC names the identity provider to sign in with ("" without one),
	// OIDCStart the link that starts it; TokenForm is whether the token
	// form is shown.
	OIDC      string
	OIDCStart string
	TokenForm bool
}

// signedIn returns the reviewer behind the request's session cookie,
// looked up in the store with its token, so a sign-out on any replica or a
// revoked token stops here at once. Without one it redirects a page to
// sign-in and answers false.
func (h *handler) signedIn(w http.ResponseWriter, r *http.Request) (*view, bool) {
	s, c, err := h.lookup(r)
	switch airlock.ErrorCode(err) {
	case "":
	case airlock.CodeNotFound:
		if sessionID(r) != "" {
			h.setCookie(w, r, sessionCookie, "", -1)
		}
		h.toSignin(w, r, "")
		return nil, false
	case airlock.CodeUnauthorized:
		h.endRevoked(r)
		h.setCookie(w, r, sessionCookie, "", -1)
		h.toSignin(w, r, "revoked")
		return nil, false
	default:
		h.fail(w, r, err)
		return nil, false
	}
	if !h.touch(r, s) {
		h.setCookie(w, r, sessionCookie, "", -1)
		h.toSignin(w, r, "")
		return nil, false
	}
	return &view{caller: c, sess: s}, true
}

// endRevoked deletes the session of the request's cookie, which its
// token's revocation ended: the store refuses it already, and keeps it
// only so that the browser could be told why.
func (h *handler) endRevoked(r *http.Request) {
	if err := h.svc.EndWebSession(r.Context(), sessionID(r)); err != nil && airlock.ErrorCode(err) != airlock.CodeNotFound {
		h.log.Warn("inbox: deleting the session of a revoked token", "err", err)
	}
}

// toSignin redirects to the sign-in page, coming back here afterwards.
func (h *handler) toSignin(w http.ResponseWriter, r *http.Request, why string) {
	q := url.Values{}
	if r.Method == http.MethodGet && r.URL.Path != "/" {
		q.Set("next", r.URL.RequestURI())
	}
	if why != "" {
		q.Set("why", why)
	}
	target := "/signin"
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// localPath returns next when it is a path on this server, "/" otherwise,
// so the sign-in redirect cannot send a reviewer elsewhere.
func localPath(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" {
		return "/"
	}
	return next
}

func (h *handler) signinForm(w http.ResponseWriter, r *http.Request) {
	if sessionID(r) != "" {
		if _, _, err := h.lookup(r); err == nil {
			http.Redirect(w, r, localPath(r.URL.Query().Get("next")), http.StatusSeeOther)
			return
		}
	}
	body := signinBody{Next: localPath(r.URL.Query().Get("next"))}
	switch r.URL.Query().Get("why") {
	case "revoked":
		body.Problem = "Your token is no longer valid (revoked or unknown). Sign in with a valid reviewer token."
	case "out":
		body.Notice = "You are signed out."
	}
	h.signinPage(w, r, http.StatusOK, body)
}

// signinPage shows the form with a fresh pre-session CSRF token, kept in a
// cookie the form must echo (there is no session yet to hold it).
func (h *handler) signinPage(w http.ResponseWriter, r *http.Request, status int, body signinBody) {
	body.Token = randomString()
	body.TokenForm = !h.noTokenSignIn
	if h.oidc != nil {
		body.OIDC = h.oidc.label()
		body.OIDCStart = "/signin/oidc?" + url.Values{"next": {body.Next}}.Encode()
	}
	h.setCookie(w, r, signinCookie, body.Token, 600)
	h.render(w, r, status, nil, "signin", "Sign in", body)
}

func (h *handler) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		h.errorPage(w, r, http.StatusBadRequest, "Bad form", "The sign-in form could not be read; reload the page and try again.")
		return
	}
	next := localPath(r.PostForm.Get("next"))
	if h.noTokenSignIn {
		h.signinPage(w, r, http.StatusForbidden, signinBody{Next: next,
			Problem: "Token sign-in is off for this inbox: sign in with your identity provider."})
		return
	}
	c, err := r.Cookie(signinCookie)
	if err != nil || !sameSecret(r.PostForm.Get("csrf"), c.Value) {
		h.signinPage(w, r, http.StatusForbidden, signinBody{Next: next,
			Problem: "The sign-in form had expired or did not come from this page. Try again."})
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	attempt, wait, ok := h.guard.Admit(r, token)
	if !ok {
		secs := ratelimit.RetryAfter(wait)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		h.signinPage(w, r, http.StatusTooManyRequests, signinBody{Next: next, Problem: fmt.Sprintf(
			"Too many failed sign-ins from your address (%s). Try again in %d seconds.", attempt.Address(), secs)})
		return
	}
	// refused answers a token the store does not know (or no longer
	// knows, by the time the session starts) with the sign-in page.
	refused := func(err error) {
		if airlock.ErrorCode(err) != airlock.CodeUnauthorized {
			h.fail(w, r, err)
			return
		}
		h.signinPage(w, r, http.StatusUnauthorized, signinBody{Next: next,
			Problem: "That token is unknown or revoked. Paste a reviewer token (it starts with airlock_)."})
	}
	caller, err := h.svc.Authenticate(r.Context(), token)
	attempt.Done(err)
	if err != nil {
		refused(err)
		return
	}
	if caller.Role != airlock.RoleReviewer && caller.Role != airlock.RoleAdmin {
		h.signinPage(w, r, http.StatusForbidden, signinBody{Next: next,
			Problem: "That is an " + string(caller.Role) + " token. The inbox is for people: sign in with a reviewer token (an admin token can look but not decide)."})
		return
	}
	id, _, err := h.svc.StartWebSession(r.Context(), caller, h.sessionIdle, h.sessionMax)
	if err != nil {
		refused(err)
		return
	}
	// Sessions that are over leave the store a few at a time, at sign-ins.
	if _, err := h.svc.SweepWebSessions(r.Context(), sweepBatch); err != nil {
		h.log.Warn("inbox: sweeping sessions that are over", "err", err)
	}
	h.setCookie(w, r, signinCookie, "", -1)
	h.setCookie(w, r, sessionCookie, id, int(h.sessionMax.Seconds()))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// sweepBatch is how many sessions that are over a sign-in deletes at most.
const sweepBatch = 100

func (h *handler) signout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	s, _, err := h.lookup(r)
	switch airlock.ErrorCode(err) {
	case "":
	case airlock.CodeNotFound, airlock.CodeUnauthorized:
		if airlock.ErrorCode(err) == airlock.CodeUnauthorized {
			h.endRevoked(r)
		}
		h.setCookie(w, r, sessionCookie, "", -1)
		http.Redirect(w, r, "/signin?why=out", http.StatusSeeOther)
		return
	default:
		h.fail(w, r, err)
		return
	}
	if err := r.ParseForm(); err != nil || !sameSecret(r.PostForm.Get("csrf"), s.csrf) {
		h.errorPage(w, r, http.StatusForbidden, "Refused", "The sign-out form did not come from this inbox's page. Reload and try again.")
		return
	}
	if err := h.svc.EndWebSession(r.Context(), s.id); err != nil && airlock.ErrorCode(err) != airlock.CodeNotFound {
		h.fail(w, r, err)
		return
	}
	h.setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, "/signin?why=out", http.StatusSeeOther)
}
