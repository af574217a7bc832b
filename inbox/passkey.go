package inbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/ratelimit"
	"github.com/airlockhq/airlock/provider"
)

// Passkeys (docs/phone.md, "Passkeys"): a signed-in reviewer registers
// WebAuthn credentials on the Passkeys page, lists and deletes theirs,
// and may sign in with one (a discoverable credential: the browser offers
// the passkeys it has for this inbox). The relying party is the inbox's
// public address (--public-url), or on a loopback address without one the
// request's own; a ceremony answered from any other origin is refused.
// Each ceremony's state is kept in the store by its challenge's hash, so
// any replica finishes a ceremony another began, and once.

// Limits of the ceremonies in progress.
const (
	passkeyCeremonyTTL  = 5 * time.Minute
	passkeyCeremonyLive = 1000
)

// passkeyUser is a principal as the WebAuthn library sees it. Its user
// handle is the SHA-256 of the principal: stable, at most 64 bytes, and
// naming no one.
type passkeyUser struct {
	principal, display string
	creds              []webauthn.Credential
}

func userHandle(principal string) []byte {
	h := sha256.Sum256([]byte(principal))
	return h[:]
}

func (u passkeyUser) WebAuthnID() []byte                         { return userHandle(u.principal) }
func (u passkeyUser) WebAuthnName() string                       { return u.principal }
func (u passkeyUser) WebAuthnDisplayName() string                { return u.display }
func (u passkeyUser) WebAuthnCredentials() []webauthn.Credential { return u.creds }

// credential is a stored passkey as the WebAuthn library verifies with.
func credential(p airlock.Passkey) webauthn.Credential {
	c := webauthn.Credential{ID: p.ID, PublicKey: p.PublicKey,
		Flags:         webauthn.CredentialFlags{UserPresent: true, UserVerified: true, BackupEligible: p.BackupEligible, BackupState: p.BackupState},
		Authenticator: webauthn.Authenticator{AAGUID: p.AAGUID, SignCount: p.SignCount}}
	for _, t := range p.Transports {
		c.Transport = append(c.Transport, protocol.AuthenticatorTransport(t))
	}
	return c
}

// relyingParty is the WebAuthn relying party a request speaks to: the
// public URL's host and origin, or, without one, a loopback request's own
// (a browser refuses an IP address as an RP ID, so only "localhost"
// works there). Anything else is refused: passkeys are bound to a name.
func (h *handler) relyingParty(r *http.Request) (*webauthn.WebAuthn, error) {
	rpID, origin, err := h.rpOf(r)
	if err != nil {
		return nil, err
	}
	return webauthn.New(&webauthn.Config{RPID: rpID, RPDisplayName: "Airlock", RPOrigins: []string{origin},
		Timeouts: webauthn.TimeoutsConfig{
			Login:        webauthn.TimeoutConfig{Enforce: true, Timeout: passkeyCeremonyTTL, TimeoutUVD: passkeyCeremonyTTL},
			Registration: webauthn.TimeoutConfig{Enforce: true, Timeout: passkeyCeremonyTTL, TimeoutUVD: passkeyCeremonyTTL},
		}})
}

// rpOf is the relying party ID and the one origin of r (relyingParty).
func (h *handler) rpOf(r *http.Request) (rpID, origin string, err error) {
	if h.publicURL != nil {
		rpID, origin = h.publicURL.Hostname(), h.publicURL.Scheme+"://"+h.publicURL.Host
	} else {
		host := r.Host
		name := host
		if hn, _, err := net.SplitHostPort(host); err == nil {
			name = hn
		}
		if !strings.EqualFold(name, "localhost") {
			return "", "", airlock.Errorf(airlock.CodeForbidden,
				"passkeys need the inbox's public address: start the server with --public-url (https://…), or open the inbox at http://localhost")
		}
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		rpID, origin = "localhost", scheme+"://"+host
	}
	return rpID, origin, nil
}

// putCeremony keeps a ceremony's state by its challenge's hash.
func (h *handler) putCeremony(r *http.Request, kind, principal string, s *webauthn.SessionData) error {
	state, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return h.svc.PutPasskeyCeremony(r.Context(), airlock.PasskeyCeremony{ChallengeHash: airlock.HashSecret(s.Challenge),
		Kind: kind, Principal: principal, State: state}, passkeyCeremonyTTL, passkeyCeremonyLive)
}

// takeCeremony takes the ceremony a browser's answer names by its
// challenge, once: a replayed answer finds none.
func (h *handler) takeCeremony(r *http.Request, challenge, kind string) (airlock.PasskeyCeremony, webauthn.SessionData, error) {
	c, err := h.svc.TakePasskeyCeremony(r.Context(), airlock.HashSecret(challenge))
	if airlock.ErrorCode(err) == airlock.CodeNotFound || err == nil && c.Kind != kind {
		return c, webauthn.SessionData{}, airlock.Invalid("credential", "this passkey answer matches no ceremony in progress (it expired, or was used already); try again")
	}
	if err != nil {
		return c, webauthn.SessionData{}, err
	}
	var s webauthn.SessionData
	if err := json.Unmarshal(c.State, &s); err != nil {
		return c, s, err
	}
	return c, s, nil
}

// refusedAnswer is a browser's answer that did not verify.
func refusedAnswer(err error) error {
	if _, ok := errors.AsType[*airlock.Error](err); ok {
		return err
	}
	msg := err.Error()
	if pe, ok := errors.AsType[*protocol.Error](err); ok && pe.DevInfo != "" {
		msg += ": " + pe.DevInfo
	}
	return airlock.Invalid("credential", "the passkey's answer did not verify: %s", msg)
}

// passkeyRow is one passkey on the Passkeys page.
type passkeyRow struct {
	ID, Name, Transports string
	Created              time.Time
	LastUsed             *time.Time
}

type passkeysBody struct {
	Passkeys []passkeyRow
	Max      int
	// Reviewer is whether the caller may register: admins do not decide.
	Reviewer bool
}

// passkeysPage lists the caller's passkeys, with the form that adds one.
func (h *handler) passkeysPage(w http.ResponseWriter, r *http.Request) {
	v, ok := h.signedIn(w, r)
	if !ok {
		return
	}
	ps, err := h.svc.ListPasskeys(r.Context(), v.caller)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	body := passkeysBody{Max: airlock.MaxPasskeysPerPrincipal, Reviewer: v.caller.Role == airlock.RoleReviewer}
	for _, p := range ps {
		body.Passkeys = append(body.Passkeys, passkeyRow{ID: airlock.PasskeyIDString(p.ID), Name: p.Name,
			Transports: strings.Join(p.Transports, ", "), Created: p.CreatedAt, LastUsed: p.LastUsedAt})
	}
	h.render(w, r, http.StatusOK, v, "passkeys", "Passkeys", body)
}

// passkeyRegisterBegin answers the options of a new registration for the
// signed-in reviewer: form field csrf.
func (h *handler) passkeyRegisterBegin(w http.ResponseWriter, r *http.Request) {
	v, ok := h.pushForm(w, r)
	if !ok {
		return
	}
	if v.caller.Role != airlock.RoleReviewer {
		h.pushError(w, airlock.Errorf(airlock.CodeForbidden, "only reviewers register passkeys"))
		return
	}
	wa, err := h.relyingParty(r)
	if err != nil {
		h.pushError(w, err)
		return
	}
	user, err := h.passkeyUserOf(r, v)
	if err != nil {
		h.pushError(w, err)
		return
	}
	var exclude []protocol.CredentialDescriptor
	for _, c := range user.creds {
		exclude = append(exclude, c.Descriptor())
	}
	opts, s, err := wa.BeginRegistration(user,
		webauthn.WithAuthenticatorSelection(protocol.AuthenticatorSelection{
			ResidentKey: protocol.ResidentKeyRequirementRequired, RequireResidentKey: protocol.ResidentKeyRequired(),
			UserVerification: protocol.VerificationRequired}),
		webauthn.WithExclusions(exclude))
	if err != nil {
		h.pushError(w, err)
		return
	}
	if err := h.putCeremony(r, airlock.CeremonyRegister, user.principal, s); err != nil {
		h.pushError(w, err)
		return
	}
	writePushJSON(w, http.StatusOK, opts)
}

// passkeyUserOf is the signed-in reviewer with their passkeys.
func (h *handler) passkeyUserOf(r *http.Request, v *view) (passkeyUser, error) {
	ps, err := h.svc.ListPasskeys(r.Context(), v.caller)
	if err != nil {
		return passkeyUser{}, err
	}
	u := passkeyUser{principal: principal(v.caller), display: v.caller.Name}
	for _, p := range ps {
		u.creds = append(u.creds, credential(p))
	}
	return u, nil
}

// principal is a caller's reviewer principal.
func principal(c airlock.Caller) string {
	if c.Principal != "" {
		return c.Principal
	}
	return c.ID
}

// passkeyRegisterFinish verifies the browser's new credential and stores
// it: form fields csrf, name and credential (PublicKeyCredential.toJSON()).
func (h *handler) passkeyRegisterFinish(w http.ResponseWriter, r *http.Request) {
	v, ok := h.pushForm(w, r)
	if !ok {
		return
	}
	wa, err := h.relyingParty(r)
	if err != nil {
		h.pushError(w, err)
		return
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes([]byte(r.PostForm.Get("credential")))
	if err != nil {
		h.pushError(w, refusedAnswer(err))
		return
	}
	c, s, err := h.takeCeremony(r, parsed.Response.CollectedClientData.Challenge, airlock.CeremonyRegister)
	if err != nil {
		h.pushError(w, err)
		return
	}
	user, err := h.passkeyUserOf(r, v)
	if err != nil {
		h.pushError(w, err)
		return
	}
	if c.Principal != user.principal {
		h.pushError(w, airlock.Invalid("credential", "this registration was begun by another reviewer"))
		return
	}
	cred, err := wa.CreateCredential(user, s, parsed)
	if err != nil {
		h.pushError(w, refusedAnswer(err))
		return
	}
	p := airlock.Passkey{ID: cred.ID, PublicKey: cred.PublicKey, SignCount: cred.Authenticator.SignCount,
		Name: strings.TrimSpace(r.PostForm.Get("name")), AAGUID: cred.Authenticator.AAGUID,
		BackupEligible: cred.Flags.BackupEligible, BackupState: cred.Flags.BackupState}
	if bytes.Equal(p.AAGUID, make([]byte, 16)) {
		p.AAGUID = nil
	}
	for _, t := range cred.Transport {
		p.Transports = append(p.Transports, string(t))
	}
	stored, err := h.svc.RegisterPasskey(r.Context(), v.caller, p)
	if err != nil {
		h.pushError(w, err)
		return
	}
	writePushJSON(w, http.StatusCreated, map[string]string{"id": airlock.PasskeyIDString(stored.ID), "name": stored.Name})
}

// passkeyDelete deletes one of the caller's passkeys: form field csrf.
func (h *handler) passkeyDelete(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	v, ok := h.signedIn(w, r)
	if !ok {
		return
	}
	if err := r.ParseForm(); err != nil || !sameSecret(r.PostForm.Get("csrf"), v.sess.csrf) {
		h.errorPage(w, r, http.StatusForbidden, "Refused", "The form did not come from this inbox's page. Reload and try again.")
		return
	}
	id, err := airlock.ParsePasskeyID(r.PathValue("id"))
	if err == nil {
		err = h.svc.DeletePasskey(r.Context(), v.caller, id)
	}
	switch airlock.ErrorCode(err) {
	case "":
		h.setFlash(w, r, v.sess, flash{OK: true, Title: "Passkey deleted", Message: "It no longer signs you in or signs your decisions. Remove it from the device too."})
	case airlock.CodeNotFound, airlock.CodeInvalidRequest:
		h.setFlash(w, r, v.sess, flash{Title: "Nothing was deleted", Message: "You have no such passkey."})
	default:
		h.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/passkeys", http.StatusSeeOther)
}

// signinForm checks a sign-in script's form: its csrf field must echo
// the pre-session cookie.
func (h *handler) passkeySigninForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	c, err := r.Cookie(signinCookie)
	if err := r.ParseForm(); err != nil {
		h.pushError(w, airlock.Invalid("form", "the sign-in form could not be read"))
		return false
	}
	if err != nil || !sameSecret(r.PostForm.Get("csrf"), c.Value) {
		h.pushError(w, airlock.Errorf(airlock.CodeForbidden, "the sign-in page had expired or this did not come from it; reload it"))
		return false
	}
	return true
}

// passkeySigninBegin answers the options of a sign-in with any passkey
// the browser has for this inbox: form field csrf.
func (h *handler) passkeySigninBegin(w http.ResponseWriter, r *http.Request) {
	if !h.passkeySigninForm(w, r) {
		return
	}
	wa, err := h.relyingParty(r)
	if err != nil {
		h.pushError(w, err)
		return
	}
	opts, s, err := wa.BeginDiscoverableLogin(webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		h.pushError(w, err)
		return
	}
	if err := h.putCeremony(r, airlock.CeremonySignIn, "", s); err != nil {
		h.pushError(w, err)
		return
	}
	writePushJSON(w, http.StatusOK, opts)
}

// passkeySigninFinish verifies the browser's assertion, records the
// passkey's use (its counter must advance, or be 0 for authenticators
// that keep none), and signs its owner in: form fields csrf, next and
// credential (PublicKeyCredential.toJSON()). It answers {"next": path}.
//
// Failed sign-ins are throttled by client address as the token sign-in's
// are (the shared AuthGuard, docs/inbox.md): each answer that does not
// verify is a failure of its address, and past the address's budget the
// answer is 429 with Retry-After, checked before any lookup. A passkey
// this server has accepted before is not held back.
func (h *handler) passkeySigninFinish(w http.ResponseWriter, r *http.Request) {
	if !h.passkeySigninForm(w, r) {
		return
	}
	raw := r.PostForm.Get("credential")
	parsed, perr := protocol.ParseCredentialRequestResponseBytes([]byte(raw))
	// The guard keys what it remembers by the credential's ID: an answer
	// too garbled to name one counts under what it sent.
	key := "passkey:" + raw
	if perr == nil {
		key = "passkey:" + string(parsed.RawID)
	}
	attempt, wait, ok := h.guard.Admit(r, key)
	if !ok {
		secs := ratelimit.RetryAfter(wait)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		writePushJSON(w, http.StatusTooManyRequests, map[string]string{"code": string(airlock.CodeRateLimited), "message": fmt.Sprintf(
			"too many failed sign-ins from your address (%s); try again in %d seconds", attempt.Address(), secs)})
		return
	}
	// fail answers err, and tells the guard whether the browser's answer
	// was refused (a failed sign-in) or the server could not check it.
	fail := func(err error) {
		switch airlock.ErrorCode(err) {
		case "", airlock.CodeInternal, airlock.CodeUnavailable:
			attempt.Done(err)
		default:
			attempt.Done(airlock.Errorf(airlock.CodeUnauthorized, "passkey sign-in refused: %v", err))
		}
		h.pushError(w, err)
	}
	wa, err := h.relyingParty(r)
	if err != nil {
		fail(err)
		return
	}
	if perr != nil {
		fail(refusedAnswer(perr))
		return
	}
	_, s, err := h.takeCeremony(r, parsed.Response.CollectedClientData.Challenge, airlock.CeremonySignIn)
	if err != nil {
		fail(err)
		return
	}
	var stored airlock.Passkey
	cred, err := wa.ValidateDiscoverableLogin(func(rawID, handle []byte) (webauthn.User, error) {
		p, err := h.svc.Passkey(r.Context(), rawID)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(handle, userHandle(p.Principal)) {
			return nil, airlock.Invalid("credential", "the passkey's user handle is not its owner's")
		}
		stored = p
		return passkeyUser{principal: p.Principal, creds: []webauthn.Credential{credential(p)}}, nil
	}, s, parsed)
	if airlock.ErrorCode(err) == airlock.CodeNotFound {
		err = airlock.Errorf(airlock.CodeUnauthorized, "this passkey is not registered with this inbox (it may have been deleted)")
	}
	if err != nil {
		fail(refusedAnswer(err))
		return
	}
	if _, err := h.svc.UsePasskey(r.Context(), stored.ID, cred.Authenticator.SignCount); err != nil {
		fail(err)
		return
	}
	id, _, err := h.svc.StartPasskeyWebSession(r.Context(), stored, h.sessionIdle, h.sessionMax)
	if err != nil {
		fail(err)
		return
	}
	attempt.Done(nil)
	h.setCookie(w, r, signinCookie, "", -1)
	h.setCookie(w, r, sessionCookie, id, int(h.sessionMax.Seconds()))
	writePushJSON(w, http.StatusOK, map[string]string{"next": localPath(r.PostForm.Get("next"))})
}

// parsePublicURL reads Config.PublicURL; nil when unset or unusable.
func parsePublicURL(s string) *url.URL {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil
	}
	return u
}

// passkeyDecisionOptions answers the options of an assertion over the
// decision a request page's form asks for (docs/phone.md, "Passkeys"):
// its challenge is the decision's (provider.DecisionChallenge), so
// nothing is kept between this and the decision, which carries the
// assertion. Form fields: those of the decision form, with csrf.
func (h *handler) passkeyDecisionOptions(w http.ResponseWriter, r *http.Request) {
	v, ok := h.pushForm(w, r)
	if !ok {
		return
	}
	in := airlock.DecisionInput{Note: strings.ReplaceAll(r.PostForm.Get("note"), "\r\n", "\n")}
	switch r.PostForm.Get("action") {
	case "approve":
		in.Status, in.ValidFor = airlock.StateApproved, r.PostForm.Get("valid_for")
	case "deny":
		in.Status = airlock.StateDenied
	default:
		h.pushError(w, airlock.Invalid("action", "a passkey signs an approval or a denial"))
		return
	}
	wa, err := h.relyingParty(r)
	if err != nil {
		h.pushError(w, err)
		return
	}
	req, err := h.svc.Request(r.Context(), v.caller, r.PathValue("id"), 0)
	if err != nil {
		h.pushError(w, err)
		return
	}
	challenge, err := provider.DecisionChallenge(req, in)
	if err != nil {
		h.pushError(w, err)
		return
	}
	user, err := h.passkeyUserOf(r, v)
	if err != nil {
		h.pushError(w, err)
		return
	}
	if len(user.creds) == 0 {
		h.pushError(w, airlock.Errorf(airlock.CodeForbidden, "this decision needs your passkey, and you have none: add one on the Passkeys page"))
		return
	}
	opts, _, err := wa.BeginLogin(user, webauthn.WithChallenge(challenge), webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		h.pushError(w, err)
		return
	}
	writePushJSON(w, http.StatusOK, opts)
}

// decisionAssertion reads a decision form's passkey field
// (PublicKeyCredential.toJSON() of an assertion) and checks that it was
// made on this inbox's origin; the provider checks the rest (the
// challenge, the relying party, the user's verification, the signature
// and the counter).
func (h *handler) decisionAssertion(r *http.Request, raw string) (*airlock.PasskeyAssertion, error) {
	var cred struct {
		RawID    protocol.URLEncodedBase64 `json:"rawId"`
		Response struct {
			AuthenticatorData protocol.URLEncodedBase64 `json:"authenticatorData"`
			ClientDataJSON    protocol.URLEncodedBase64 `json:"clientDataJSON"`
			Signature         protocol.URLEncodedBase64 `json:"signature"`
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(raw), &cred); err != nil {
		return nil, airlock.Invalid("passkey", "the passkey's answer could not be read")
	}
	_, origin, err := h.rpOf(r)
	if err != nil {
		return nil, err
	}
	var cd struct {
		Origin string `json:"origin"`
	}
	if err := json.Unmarshal(cred.Response.ClientDataJSON, &cd); err != nil || cd.Origin != origin {
		return nil, airlock.Errorf(airlock.CodeForbidden, "the passkey signed this decision on another site (%q), not this inbox", cd.Origin)
	}
	a := &airlock.PasskeyAssertion{CredentialID: cred.RawID, AuthenticatorData: cred.Response.AuthenticatorData,
		ClientDataJSON: cred.Response.ClientDataJSON, Signature: cred.Response.Signature}
	return a, a.Validate()
}
