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
}

// signedIn returns the reviewer behind the request's session cookie,
// re-authenticating the session's token against the store, so a revoked
// token stops here at once. Without one it redirects a page to sign-in
// and answers false.
func (h *handler) signedIn(w http.ResponseWriter, r *http.Request) (*view, bool) {
	s := h.sessions.get(r)
	if s == nil {
		h.toSignin(w, r, "")
		return nil, false
	}
	c, err := h.svc.AuthenticateHash(r.Context(), s.tokenHash)
	if err != nil {
		if airlock.ErrorCode(err) == airlock.CodeUnauthorized {
			h.sessions.end(s)
			h.setCookie(w, r, sessionCookie, "", -1)
			h.toSignin(w, r, "revoked")
			return nil, false
		}
		h.fail(w, r, err)
		return nil, false
	}
	return &view{caller: c, sess: s}, true
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
	if s := h.sessions.get(r); s != nil {
		if _, err := h.svc.AuthenticateHash(r.Context(), s.tokenHash); err == nil {
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
	caller, err := h.svc.Authenticate(r.Context(), token)
	attempt.Done(err)
	if err != nil {
		if airlock.ErrorCode(err) != airlock.CodeUnauthorized {
			h.fail(w, r, err)
			return
		}
		h.signinPage(w, r, http.StatusUnauthorized, signinBody{Next: next,
			Problem: "That token is unknown or revoked. Paste a reviewer token (it starts with airlock_)."})
		return
	}
	if caller.Role != airlock.RoleReviewer && caller.Role != airlock.RoleAdmin {
		h.signinPage(w, r, http.StatusForbidden, signinBody{Next: next,
			Problem: "That is an " + string(caller.Role) + " token. The inbox is for people: sign in with a reviewer token (an admin token can look but not decide)."})
		return
	}
	s := h.sessions.start(caller.Token)
	h.setCookie(w, r, signinCookie, "", -1)
	h.setCookie(w, r, sessionCookie, s.id, int(h.sessions.lifetime.Seconds()))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (h *handler) signout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	s := h.sessions.get(r)
	if s == nil {
		http.Redirect(w, r, "/signin?why=out", http.StatusSeeOther)
		return
	}
	if err := r.ParseForm(); err != nil || !sameSecret(r.PostForm.Get("csrf"), s.csrf) {
		h.errorPage(w, r, http.StatusForbidden, "Refused", "The sign-out form did not come from this inbox's page. Reload and try again.")
		return
	}
	h.sessions.end(s)
	h.setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, "/signin?why=out", http.StatusSeeOther)
}
