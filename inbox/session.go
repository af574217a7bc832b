package inbox

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// Cookie names. The session cookie carries only a random session ID; the
// pre-session cookie protects the sign-in form before there is a session.
const (
	sessionCookie = "airlock_session"
	signinCookie  = "airlock_signin"
)

// session is one signed-in browser. It keeps the SHA-256 of the reviewer's
// token, never the token: every request re-authenticates that hash against
// the store, so a revoked token ends the session at its next request.
type session struct {
	id        string
	tokenHash []byte
	tokenID   string
	csrf      string
	expires   time.Time
	// flash is the outcome of the last decision, shown once on the page
	// the decision redirected to.
	flash *flash
}

// flash is a one-time message about what just happened.
type flash struct {
	OK      bool   // false: nothing was recorded, say why
	Title   string // "Approved", "Nothing was recorded"
	Message string
}

// sessions holds the signed-in browsers of this process, in memory: a
// restart signs everyone out, and behind a load balancer each replica
// knows only its own sign-ins (docs/inbox.md).
type sessions struct {
	mu       sync.Mutex
	byID     map[string]*session
	lifetime time.Duration
	now      func() time.Time
}

func newSessions(lifetime time.Duration, now func() time.Time) *sessions {
	return &sessions{byID: map[string]*session{}, lifetime: lifetime, now: now}
}

// randomString returns 32 random bytes, base64url-encoded.
func randomString() string {
	var b [32]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// start creates a session for the token and forgets expired ones.
func (ss *sessions) start(t airlock.Token) *session {
	now := ss.now()
	s := &session{id: randomString(), tokenHash: t.Hash, tokenID: t.ID, csrf: randomString(), expires: now.Add(ss.lifetime)}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for id, old := range ss.byID {
		if !now.Before(old.expires) {
			delete(ss.byID, id)
		}
	}
	ss.byID[s.id] = s
	return s
}

// get returns the live session of the request's cookie, or nil.
func (ss *sessions) get(r *http.Request) *session {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.byID[c.Value]
	if s == nil {
		return nil
	}
	if !ss.now().Before(s.expires) {
		delete(ss.byID, s.id)
		return nil
	}
	return s
}

// end forgets a session.
func (ss *sessions) end(s *session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.byID, s.id)
}

// setFlash stores the message the next page of s shows.
func (ss *sessions) setFlash(s *session, f flash) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s.flash = &f
}

// takeFlash returns and clears the message of s.
func (ss *sessions) takeFlash(s *session) *flash {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	f := s.flash
	s.flash = nil
	return f
}

// count returns how many sessions are live, for tests.
func (ss *sessions) count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.byID)
}

// sameSecret compares a submitted CSRF token with the expected one in
// constant time.
func sameSecret(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// setCookie sets a session-scoped cookie: HttpOnly, SameSite=Strict, Path=/
// and Secure when the connection is TLS (or the server says it sits behind
// TLS). maxAge < 0 deletes it.
func (h *handler) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || h.secureCookies,
	})
}
