package inbox

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
)

// Cookie names. The session cookie carries only a random session ID; the
// pre-session cookie protects the sign-in form before there is a session;
// the flash cookie carries the outcome of the last decision to the page
// it redirected to, whichever replica serves that page.
const (
	sessionCookie = "airlock_session"
	signinCookie  = "airlock_signin"
	flashCookie   = "airlock_flash"
)

// touchEvery is how often a busy reviewer's session records activity in
// the store, moving its idle end: once a minute, not once a page.
const touchEvery = time.Minute

// session is one signed-in browser, as the store keeps it
// (airlock.WebSession): the store has only the hash of id, and checks the
// token it was signed in with on every lookup, so a sign-out or a revoked
// token ends it on every replica at its next request.
type session struct {
	id       string // the raw ID, from the cookie
	csrf     string // the CSRF token bound to the session
	lastSeen time.Time
}

// flash is a one-time message about what just happened.
type flash struct {
	OK      bool   // false: nothing was recorded, say why
	Title   string // "Approved", "Nothing was recorded"
	Message string
}

// randomString returns 32 random bytes, base64url-encoded.
func randomString() string {
	var b [32]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// sessionID returns the session ID of the request's cookie, or "".
func sessionID(r *http.Request) string {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return ""
	}
	return c.Value
}

// lookup returns the request's live session and its reviewer: one read of
// the store. Its error is not_found without a live session, unauthorized
// when the session's token was revoked.
func (h *handler) lookup(r *http.Request) (*session, airlock.Caller, error) {
	id := sessionID(r)
	ws, c, err := h.svc.WebSession(r.Context(), id)
	if err != nil {
		return nil, airlock.Caller{}, err
	}
	if h.noTokenSignIn && ws.TokenID != "" {
		// A token's session from before token sign-in was turned off.
		return nil, airlock.Caller{}, airlock.NotFound("web session", "of this cookie")
	}
	return &session{id: id, csrf: ws.CSRF, lastSeen: ws.LastSeenAt}, c, nil
}

// touch records the session's activity when it is due (touchEvery), so
// the idle lifetime counts from the reviewer's last page. It reports
// false when the session ended meanwhile.
func (h *handler) touch(r *http.Request, s *session) bool {
	if h.now().Sub(s.lastSeen) < touchEvery {
		return true
	}
	_, _, err := h.svc.TouchWebSession(r.Context(), s.id, touchEvery)
	switch {
	case err == nil:
		return true
	case airlock.ErrorCode(err) == airlock.CodeNotFound:
		return false
	default:
		// The page can still be served; the next request tries again.
		h.log.Warn("inbox: recording a session's activity", "err", err)
		return true
	}
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

// maxFlashMessage bounds the message a flash cookie carries, so that the
// cookie stays well under the 4 KiB browsers keep.
const maxFlashMessage = 1500

// setFlash sends f to the next page of s in a short-lived cookie, signed
// with the session's CSRF token: another replica can show it, and nobody
// without the session can make the inbox say something it did not.
func (h *handler) setFlash(w http.ResponseWriter, r *http.Request, s *session, f flash) {
	if len(f.Message) > maxFlashMessage {
		m := f.Message[:maxFlashMessage]
		for !utf8.ValidString(m) {
			m = m[:len(m)-1]
		}
		f.Message = m + "…"
	}
	data, _ := json.Marshal(f)
	h.setCookie(w, r, flashCookie, base64.RawURLEncoding.EncodeToString(data)+"."+flashMAC(s, data), 60)
}

// takeFlash returns the message of s's flash cookie and deletes the
// cookie, or nil when there is none, or it is not of this session.
func (h *handler) takeFlash(w http.ResponseWriter, r *http.Request, s *session) *flash {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return nil
	}
	h.setCookie(w, r, flashCookie, "", -1)
	enc, mac, ok := strings.Cut(c.Value, ".")
	if !ok {
		return nil
	}
	data, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || !hmac.Equal([]byte(mac), []byte(flashMAC(s, data))) {
		return nil
	}
	var f flash
	if json.Unmarshal(data, &f) != nil {
		return nil
	}
	return &f
}

// flashMAC signs a flash cookie's data with the session's CSRF token.
func flashMAC(s *session, data []byte) string {
	m := hmac.New(sha256.New, []byte("airlock flash\x00"+s.csrf))
	m.Write(data)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
