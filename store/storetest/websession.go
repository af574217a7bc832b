package storetest

import (
	"bytes"
	"crypto/sha256"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// Lifetimes of the web sessions the tests sign in.
const (
	webIdle = time.Hour
	webMax  = 3 * time.Hour
)

// webReviewer creates a live reviewer token of principal and returns it.
func (b *bundle) webReviewer(t *testing.T, id, principal string) airlock.Token {
	t.Helper()
	tok := airlock.Token{ID: id, Name: "Ada of " + principal, Role: airlock.RoleReviewer, Principal: principal,
		Hash: airlock.HashSecret("secret of " + id), CreatedBy: "tok_admin"}
	wantOK(t, b.store.CreateToken(b.ctx, tok))
	got, err := b.store.GetToken(b.ctx, id)
	wantOK(t, err)
	return got
}

// signIn creates a web session of tok and returns its raw ID.
func (b *bundle) signIn(t *testing.T, tok airlock.Token) (string, airlock.WebSession) {
	t.Helper()
	id := airlock.NewTokenSecret()
	ws, err := b.store.CreateWebSession(b.ctx, store.NewWebSessionParams{ID: id, Token: tok, CSRF: "csrf-" + id, Idle: webIdle, Max: webMax})
	wantOK(t, err)
	return id, ws
}

// wantSignedOut checks that the session of cookie id is over: neither
// read nor touched (a touch must not bring it back).
func (b *bundle) wantSignedOut(t *testing.T, id string) {
	t.Helper()
	_, _, err := b.store.WebSessionByID(b.ctx, id)
	wantErr(t, err, airlock.CodeNotFound, "")
	_, _, err = b.store.TouchWebSession(b.ctx, id, 0)
	wantErr(t, err, airlock.CodeNotFound, "")
}

// SignIn signs a reviewer in to st and returns the raw ID of the web
// session, for a driver's test to check that its database keeps only the
// ID's SHA-256 (WebSessionByID finds a session by that hash alone).
func SignIn(t *testing.T, st store.Store) string {
	t.Helper()
	tok := airlock.Token{ID: "tok_ada", Name: "Ada", Role: airlock.RoleReviewer, Hash: airlock.HashSecret("secret"), CreatedBy: "tok_admin"}
	if err := st.CreateToken(t.Context(), tok); err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	id := airlock.NewTokenSecret()
	if _, err := st.CreateWebSession(t.Context(), store.NewWebSessionParams{ID: id, Token: tok, CSRF: "csrf", Idle: time.Hour, Max: 2 * time.Hour}); err != nil {
		t.Fatalf("CreateWebSession: %v", err)
	}
	return id
}

// errorList collects the unexpected errors of concurrent calls.
type errorList struct {
	mu   sync.Mutex
	errs []error
}

// add keeps err, unless it is nil.
func (l *errorList) add(err error) {
	if err == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

// webSetup sets up a bundle with a reviewer token of ada's (tok_ada), and
// returns it with the store's now to the microsecond, as stores keep it.
func (s *suite) webSetup(t *testing.T) (*bundle, airlock.Token, time.Time) {
	t.Helper()
	b := s.setup(t)
	tok := b.webReviewer(t, "tok_ada", "ada")
	return b, tok, b.clock.Now().Truncate(time.Microsecond)
}

// testWebSessions checks the inbox's sign-ins (WebSessionStore).
func (s *suite) testWebSessions(t *testing.T) {
	runAll(t, []test{
		{"create and look up", s.webCreate},
		{"idle and absolute expiry", s.webExpiry},
		{"a touch writes at most once per interval", s.webTouch},
		{"sign-out, revocation, a principal's sessions", s.webSignOut},
		{"a replaced secret ends the old secret's sessions", s.webReplacedSecret},
		{"sweep", s.webSweep},
		{"touches racing sign-out", s.webTouchRace},
		{"sign-ins racing revocation", s.webRevokeRace},
	})
}

func (s *suite) webCreate(t *testing.T) {
	b, tok, at := s.webSetup(t)
	id, ws := b.signIn(t, tok)
	sum := sha256.Sum256([]byte(id))
	if !bytes.Equal(ws.IDHash, sum[:]) || ws.TokenID != "tok_ada" || ws.Principal != "ada" || ws.Name != "Ada of ada" ||
		ws.CSRF != "csrf-"+id || !ws.CreatedAt.Equal(at) || !ws.LastSeenAt.Equal(at) || ws.Idle != webIdle ||
		!ws.IdleExpiresAt.Equal(at.Add(webIdle)) || !ws.ExpiresAt.Equal(at.Add(webMax)) {
		t.Fatalf("CreateWebSession = %s", show(ws))
	}
	got, gotTok, err := b.store.WebSessionByID(b.ctx, id)
	wantOK(t, err)
	if show(got) != show(ws) || show(gotTok) != show(tok) {
		t.Fatalf("WebSessionByID = %s, %s; want %s, %s", show(got), show(gotTok), show(ws), show(tok))
	}
	// The hash is the key, never the raw ID.
	_, _, err = b.store.WebSessionByID(b.ctx, string(ws.IDHash))
	wantErr(t, err, airlock.CodeNotFound, "")
	_, _, err = b.store.WebSessionByID(b.ctx, "unknown-session-id-0123456789")
	wantErr(t, err, airlock.CodeNotFound, "")

	// A session's absolute lifetime shorter than its idle one caps it.
	short, err := b.store.CreateWebSession(b.ctx, store.NewWebSessionParams{ID: airlock.NewTokenSecret(), Token: tok, CSRF: "c",
		Idle: webIdle, Max: time.Minute})
	wantOK(t, err)
	if !short.IdleExpiresAt.Equal(short.ExpiresAt) || !short.ExpiresAt.Equal(at.Add(time.Minute)) {
		t.Fatalf("session with max < idle = %s, want both ends at +1m", show(short))
	}

	for _, p := range []store.NewWebSessionParams{
		{ID: "short", Token: tok, CSRF: "c", Idle: webIdle, Max: webMax},
		{ID: airlock.NewTokenSecret(), Token: airlock.Token{ID: tok.ID}, CSRF: "c", Idle: webIdle, Max: webMax},
		{ID: airlock.NewTokenSecret(), Token: tok, Idle: webIdle, Max: webMax},
		{ID: airlock.NewTokenSecret(), Token: tok, CSRF: "c", Max: webMax},
	} {
		_, err := b.store.CreateWebSession(b.ctx, p)
		wantErr(t, err, airlock.CodeInvalidRequest, "")
	}
	// A token that is unknown, or whose hash is not the one given, signs nobody in.
	_, err = b.store.CreateWebSession(b.ctx, store.NewWebSessionParams{ID: airlock.NewTokenSecret(),
		Token: airlock.Token{ID: "tok_ghost", Hash: tok.Hash}, CSRF: "c", Idle: webIdle, Max: webMax})
	wantErr(t, err, airlock.CodeUnauthorized, "")
	_, err = b.store.CreateWebSession(b.ctx, store.NewWebSessionParams{ID: airlock.NewTokenSecret(),
		Token: airlock.Token{ID: tok.ID, Hash: airlock.HashSecret("old secret")}, CSRF: "c", Idle: webIdle, Max: webMax})
	wantErr(t, err, airlock.CodeUnauthorized, "")
}

func (s *suite) webExpiry(t *testing.T) {
	b, tok, start := s.webSetup(t)
	idle, _ := b.signIn(t, tok)
	busy, _ := b.signIn(t, tok)

	// Idle: live one microsecond before its idle end, over at it.
	b.clock.Set(start.Add(webIdle - time.Microsecond))
	_, _, err := b.store.WebSessionByID(b.ctx, idle)
	wantOK(t, err)
	ws, touched, err := b.store.TouchWebSession(b.ctx, busy, time.Minute)
	wantOK(t, err)
	if !touched || !ws.LastSeenAt.Equal(start.Add(webIdle-time.Microsecond)) || !ws.IdleExpiresAt.Equal(start.Add(2*webIdle-time.Microsecond)) {
		t.Fatalf("touch = %v, %s", touched, show(ws))
	}
	b.clock.Set(start.Add(webIdle))
	b.wantSignedOut(t, idle)
	_, _, err = b.store.WebSessionByID(b.ctx, busy)
	wantOK(t, err)

	// Absolute: touched every half hour, the busy one still ends at
	// start + webMax, its idle end capped there.
	for at := start.Add(webIdle + 30*time.Minute); at.Before(start.Add(webMax)); at = at.Add(30 * time.Minute) {
		b.clock.Set(at)
		ws, touched, err = b.store.TouchWebSession(b.ctx, busy, time.Minute)
		wantOK(t, err)
		if !touched || ws.IdleExpiresAt.After(ws.ExpiresAt) {
			t.Fatalf("touch at %v = %v, %s", at, touched, show(ws))
		}
	}
	if !ws.IdleExpiresAt.Equal(start.Add(webMax)) {
		t.Fatalf("last touch = %s, want the idle end capped at the absolute end", show(ws))
	}
	b.clock.Set(start.Add(webMax - time.Microsecond))
	_, _, err = b.store.WebSessionByID(b.ctx, busy)
	wantOK(t, err)
	b.clock.Set(start.Add(webMax))
	b.wantSignedOut(t, busy)
}

func (s *suite) webTouch(t *testing.T) {
	b, tok, start := s.webSetup(t)
	id, first := b.signIn(t, tok)
	b.clock.Advance(time.Minute - time.Microsecond)
	ws, touched, err := b.store.TouchWebSession(b.ctx, id, time.Minute)
	wantOK(t, err)
	if touched || show(ws) != show(first) {
		t.Fatalf("touch within the interval = %v, %s; want no write", touched, show(ws))
	}
	b.clock.Advance(time.Microsecond)
	ws, touched, err = b.store.TouchWebSession(b.ctx, id, time.Minute)
	wantOK(t, err)
	if !touched || !ws.LastSeenAt.Equal(start.Add(time.Minute)) || !ws.IdleExpiresAt.Equal(start.Add(time.Minute+webIdle)) {
		t.Fatalf("touch after the interval = %v, %s", touched, show(ws))
	}
	got, _, err := b.store.WebSessionByID(b.ctx, id)
	wantOK(t, err)
	if show(got) != show(ws) {
		t.Fatalf("after touch WebSessionByID = %s, want %s", show(got), show(ws))
	}
}

func (s *suite) webSignOut(t *testing.T) {
	b := s.setup(t)
	ada := b.webReviewer(t, "tok_ada", "ada")
	ada2 := b.webReviewer(t, "tok_ada2", "ada")
	bob := b.webReviewer(t, "tok_bob", "bob")
	a1, _ := b.signIn(t, ada)
	a2, _ := b.signIn(t, ada)
	a3, _ := b.signIn(t, ada2)
	b.signIn(t, bob) // sessions of bob's, which ada's filters must leave
	b.signIn(t, bob)

	wantOK(t, b.store.DeleteWebSession(b.ctx, a1))
	b.wantSignedOut(t, a1)
	wantErr(t, b.store.DeleteWebSession(b.ctx, a1), airlock.CodeNotFound, "")

	// Revoking a token ends its sessions at once, and no other's; they
	// are refused as unauthorized, so the browser can be told why.
	_, err := b.store.RevokeToken(b.ctx, ada.ID, "tok_admin")
	wantOK(t, err)
	_, _, err = b.store.WebSessionByID(b.ctx, a2)
	wantErr(t, err, airlock.CodeUnauthorized, "")
	_, _, err = b.store.TouchWebSession(b.ctx, a2, 0)
	if err == nil {
		_, _, err = b.store.WebSessionByID(b.ctx, a2)
		wantErr(t, err, airlock.CodeUnauthorized, "") // a touch does not revive it
	}
	_, _, err = b.store.WebSessionByID(b.ctx, a3)
	wantOK(t, err)
	_, err = b.store.CreateWebSession(b.ctx, store.NewWebSessionParams{ID: airlock.NewTokenSecret(), Token: ada, CSRF: "c", Idle: webIdle, Max: webMax})
	wantErr(t, err, airlock.CodeUnauthorized, "")
	// The token put back with the same secret (the bootstrap admin
	// token at a restart) does not bring its old sessions back.
	wantOK(t, b.store.PutToken(b.ctx, ada))
	_, _, err = b.store.WebSessionByID(b.ctx, a2)
	wantErr(t, err, airlock.CodeNotFound, "")

	// A principal's sessions end together.
	_, err = b.store.DeleteWebSessions(b.ctx, store.WebSessionFilter{})
	wantErr(t, err, airlock.CodeInvalidRequest, "")
	a4, _ := b.signIn(t, ada)
	n, err := b.store.DeleteWebSessions(b.ctx, store.WebSessionFilter{Principal: "ada"})
	wantOK(t, err)
	if n != 2 {
		t.Fatalf("DeleteWebSessions(ada) = %d, want 2", n)
	}
	for _, id := range []string{a3, a4} {
		_, _, err = b.store.WebSessionByID(b.ctx, id)
		wantErr(t, err, airlock.CodeNotFound, "")
	}
	n, err = b.store.DeleteWebSessions(b.ctx, store.WebSessionFilter{TokenID: bob.ID, Principal: "ada"})
	wantOK(t, err)
	if n != 0 {
		t.Fatalf("DeleteWebSessions(bob's token, ada) = %d, want 0", n)
	}
}

// webReplacedSecret: a token put again with a new secret no longer serves
// the sessions signed in with the old one; put again with the same secret
// (every restart), it keeps them.
func (s *suite) webReplacedSecret(t *testing.T) {
	b := s.setup(t)
	bob := b.webReviewer(t, "tok_bob", "bob")
	b1, _ := b.signIn(t, bob)
	b2, _ := b.signIn(t, bob)
	bobNew := bob
	bobNew.Hash = airlock.HashSecret("new secret of bob")
	wantOK(t, b.store.PutToken(b.ctx, bobNew))
	for _, id := range []string{b1, b2} {
		_, _, err := b.store.WebSessionByID(b.ctx, id)
		if c := airlock.ErrorCode(err); c != airlock.CodeNotFound && c != airlock.CodeUnauthorized {
			t.Fatalf("session of a replaced secret: err = %v, want not_found or unauthorized", err)
		}
	}
	b3, _ := b.signIn(t, bobNew)
	_, tok, err := b.store.WebSessionByID(b.ctx, b3)
	wantOK(t, err)
	if !bytes.Equal(tok.Hash, bobNew.Hash) {
		t.Fatalf("token of the new session = %s", show(tok))
	}
	// PutToken with the same secret (every restart) keeps the sessions.
	wantOK(t, b.store.PutToken(b.ctx, bobNew))
	_, _, err = b.store.WebSessionByID(b.ctx, b3)
	wantOK(t, err)
	n, err := b.store.DeleteWebSessions(b.ctx, store.WebSessionFilter{TokenID: bob.ID})
	wantOK(t, err)
	if n != 1 {
		t.Fatalf("DeleteWebSessions(bob's token) = %d, want 1", n)
	}
}

func (s *suite) webSweep(t *testing.T) {
	b, tok, _ := s.webSetup(t)
	var old []string
	for range 3 {
		id, _ := b.signIn(t, tok)
		old = append(old, id)
	}
	b.clock.Advance(webIdle / 2)
	fresh, _ := b.signIn(t, tok)
	b.clock.Advance(webIdle / 2)
	n, err := b.store.SweepWebSessions(b.ctx, 2)
	wantOK(t, err)
	if n != 2 {
		t.Fatalf("SweepWebSessions(2) = %d, want 2", n)
	}
	n, err = b.store.SweepWebSessions(b.ctx, 10)
	wantOK(t, err)
	if n != 1 {
		t.Fatalf("second SweepWebSessions = %d, want 1", n)
	}
	_, _, err = b.store.WebSessionByID(b.ctx, fresh)
	wantOK(t, err)
	for _, id := range old {
		wantErr(t, b.store.DeleteWebSession(b.ctx, id), airlock.CodeNotFound, "")
	}
}

func (s *suite) webTouchRace(t *testing.T) {
	b, tok, _ := s.webSetup(t)
	for round := range 5 {
		id, _ := b.signIn(t, tok)
		var (
			wg   sync.WaitGroup
			errs errorList
		)
		for range 6 {
			wg.Go(func() {
				if _, _, err := b.store.TouchWebSession(b.ctx, id, 0); airlock.ErrorCode(err) != airlock.CodeNotFound {
					errs.add(err)
				}
			})
		}
		wg.Go(func() { errs.add(b.store.DeleteWebSession(b.ctx, id)) })
		wg.Wait()
		if len(errs.errs) > 0 {
			t.Fatalf("round %d: %v", round, errs.errs)
		}
		// No touch brought the session back after its sign-out.
		b.wantSignedOut(t, id)
	}
}

func (s *suite) webRevokeRace(t *testing.T) {
	b := s.setup(t)
	for round := range 5 {
		tok := b.webReviewer(t, "tok_r"+string(rune('a'+round)), "ada")
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex // guards ids
			ids  []string
			errs errorList
		)
		for range 6 {
			wg.Go(func() {
				id := airlock.NewTokenSecret()
				_, err := b.store.CreateWebSession(b.ctx, store.NewWebSessionParams{ID: id, Token: tok, CSRF: "c", Idle: webIdle, Max: webMax})
				switch {
				case err == nil:
					mu.Lock()
					ids = append(ids, id)
					mu.Unlock()
				case airlock.ErrorCode(err) != airlock.CodeUnauthorized:
					errs.add(err)
				}
			})
		}
		wg.Go(func() {
			_, err := b.store.RevokeToken(b.ctx, tok.ID, "tok_admin")
			errs.add(err)
		})
		wg.Wait()
		if len(errs.errs) > 0 {
			t.Fatalf("round %d: %v", round, errs.errs)
		}
		// Every sign-in was refused, or its session is refused now.
		for _, id := range ids {
			_, _, err := b.store.WebSessionByID(b.ctx, id)
			wantErr(t, err, airlock.CodeUnauthorized, "")
		}
	}
}
