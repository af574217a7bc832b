package provider

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/approvaltoken"
	"github.com/airlockhq/airlock/store"
	"github.com/go-jose/go-jose/v4"
)

// Approval tokens' signing keys (docs/tokens.md). Every replica signs with
// the store's keys, the first created at the first start, unless the
// server was given a key of its own (Config.SigningKey,
// --signing-key-file). The public key set lists every key a live token
// may name.
//
// A rotation publishes the new key at once and lets it sign only
// Config.KeyActivationDelay later; the old key signs until that same instant.
// Each replica reads the keys again when its view is KeyRefresh old, so
// by the switch every replica knows it, without a read per signature: a
// rotated-away key never signs again, and verifiers see a new key before
// any token names it.

// The schedule of a rotation. DefaultKeyActivationDelay exceeds
// KeyRefresh by far more than the clocks of replicas and database may
// disagree.
const (
	KeyRefresh                = 5 * time.Second
	DefaultKeyActivationDelay = 30 * time.Second
)

// signingKeys is the service's view of the keys.
type signingKeys struct {
	// fixed is Config.SigningKey: when set, the store's keys are unused.
	fixed *approvaltoken.Key
	// delay is Config.KeyActivationDelay.
	delay time.Duration

	mu sync.Mutex
	// published are the store's keys as last read, at loadedAt (the
	// service's clock); derived holds their private keys by id, so a
	// read derives no key twice, and set their public halves, which
	// consumes verify against.
	published []store.SigningKey
	loadedAt  time.Time
	derived   map[string]approvaltoken.Key
	set       *approvaltoken.KeySet
	// audiences are instances' token_audience, which never change.
	audiences map[string]string
}

// LoadSigningKeys makes sure a signing key exists and reads the keys: the
// fixed key when the server has one, else the store's, the first created
// now if no replica made one before.
func (s *Service) LoadSigningKeys(ctx context.Context) error {
	if s.keys.fixed != nil {
		return nil
	}
	candidate, err := approvaltoken.Generate()
	if err != nil {
		return err
	}
	if _, err := s.system.EnsureSigningKey(ctx, storedKey(candidate), "system:start"); err != nil {
		return fmt.Errorf("signing key: %w", err)
	}
	s.keys.mu.Lock()
	defer s.keys.mu.Unlock()
	return s.readKeys(ctx)
}

// readKeys reads the store's keys into the view; keys.mu is held.
func (s *Service) readKeys(ctx context.Context) error {
	now := s.clock.Now()
	published, err := s.system.ListSigningKeys(ctx)
	if err != nil {
		return fmt.Errorf("signing keys: %w", err)
	}
	derived := make(map[string]approvaltoken.Key, len(published))
	public := make([]jose.JSONWebKey, 0, len(published))
	for _, sk := range published {
		k, ok := s.keys.derived[sk.ID]
		if !ok {
			if k, err = signingKey(sk); err != nil {
				return err
			}
		}
		derived[sk.ID] = k
		public = append(public, k.Public())
	}
	s.keys.published, s.keys.derived, s.keys.loadedAt = published, derived, now
	s.keys.set = approvaltoken.NewKeySet(public...)
	return nil
}

// freshKeys makes the view current: read again when it is KeyRefresh old
// (or from ahead of the clock), empty, or lacks kid; keys.mu is held.
func (s *Service) freshKeys(ctx context.Context, now time.Time, kid string) error {
	age := now.Sub(s.keys.loadedAt)
	if age >= KeyRefresh || age < 0 || len(s.keys.published) == 0 || kid != "" && !s.keys.set.Has(kid) {
		return s.readKeys(ctx)
	}
	return nil
}

// verifyingKeys is the key set consumes verify against: the fixed key, or
// the published keys of the view the service signs from, read again for
// a token naming a key the view lacks (a rotation on another replica).
// Keeping a key up to KeyRefresh after it stopped being published admits
// nothing: it is unpublished once the last token it signed has expired,
// and exp refuses those.
func (s *Service) verifyingKeys(ctx context.Context, kid string) (*approvaltoken.KeySet, error) {
	if s.keys.fixed != nil {
		return approvaltoken.NewKeySet(s.keys.fixed.Public()), nil
	}
	s.keys.mu.Lock()
	defer s.keys.mu.Unlock()
	if err := s.freshKeys(ctx, s.clock.Now(), kid); err != nil {
		return nil, err
	}
	return s.keys.set, nil
}

// PublicKeys returns the public half of every key a live token may name:
// the fixed key, or the store's published keys, the active one first. They
// come from the view the service signs from (read again once KeyRefresh
// old), so a busy key set endpoint neither reads the store nor derives a
// key per call; a rotation shows here as soon as this replica signs with
// it, or sooner.
func (s *Service) PublicKeys(ctx context.Context) ([]jose.JSONWebKey, error) {
	if s.keys.fixed != nil {
		return []jose.JSONWebKey{s.keys.fixed.Public()}, nil
	}
	s.keys.mu.Lock()
	defer s.keys.mu.Unlock()
	if err := s.freshKeys(ctx, s.clock.Now(), ""); err != nil {
		return nil, err
	}
	out := make([]jose.JSONWebKey, 0, len(s.keys.published))
	for _, sk := range s.keys.published {
		out = append(out, s.keys.derived[sk.ID].Public())
	}
	return out, nil
}

// SigningKeys lists the store's published keys, without their seeds
// (admins only).
func (s *Service) SigningKeys(ctx context.Context, c airlock.Caller) ([]store.SigningKey, error) {
	if c.Role != airlock.RoleAdmin {
		return nil, forbidden("only admin tokens manage signing keys")
	}
	if s.keys.fixed != nil {
		return []store.SigningKey{{ID: s.keys.fixed.ID}}, nil
	}
	keys, err := s.storeFor(c).ListSigningKeys(ctx)
	for i := range keys {
		keys[i].Seed = nil
	}
	return keys, err
}

// RotateSigningKey publishes a new key that signs from
// Config.KeyActivationDelay on (admins only); the old key signs until then. The old key stays
// published until every token it signed has expired: approval tokens
// expire with their approval, at most MaxApprovalValidity after it, and
// verifiers allow the leeway.
func (s *Service) RotateSigningKey(ctx context.Context, c airlock.Caller) (store.SigningKey, error) {
	if c.Role != airlock.RoleAdmin {
		return store.SigningKey{}, forbidden("only admin tokens manage signing keys")
	}
	if s.keys.fixed != nil {
		return store.SigningKey{}, airlock.Errorf(airlock.CodeInvalidRequest,
			"this server signs with the key of --signing-key-file: to rotate, publish the new key's file and restart")
	}
	next, err := approvaltoken.Generate()
	if err != nil {
		return store.SigningKey{}, err
	}
	keep := s.limits.MaxApprovalValidity + approvaltoken.DefaultLeeway
	stored, err := s.storeFor(c).RotateSigningKey(ctx, storedKey(next), s.keys.delay, keep, c.ID)
	if err != nil {
		return store.SigningKey{}, err
	}
	s.keys.mu.Lock()
	s.keys.loadedAt = time.Time{} // the next signature reads the keys
	s.keys.mu.Unlock()
	stored.Seed = nil
	return stored, nil
}

// Now is the service's clock, for answers that say what holds now.
func (s *Service) Now() time.Time { return s.clock.Now() }

// storedKey is k as the store keeps it.
func storedKey(k approvaltoken.Key) store.SigningKey {
	return store.SigningKey{ID: k.ID, Seed: k.Private.Seed()}
}

// signingKey is a stored key, checked against its id: a row whose seed
// does not make its kid was changed outside Airlock.
func signingKey(sk store.SigningKey) (approvaltoken.Key, error) {
	k, err := approvaltoken.FromSeed(sk.Seed)
	if err != nil {
		return approvaltoken.Key{}, fmt.Errorf("%s: %w", sk, err)
	}
	if k.ID != sk.ID {
		return approvaltoken.Key{}, fmt.Errorf("%s: its seed makes key id %s: the stored key was changed", sk, k.ID)
	}
	return k, nil
}

// signClaim signs the approval token of a request just claimed: the
// proof, for the tool server, that these arguments were approved for
// this tool until the approval's expires_at.
func (s *Service) signClaim(ctx context.Context, r airlock.Request) (string, error) {
	if r.Decision == nil || r.Decision.ExpiresAt == nil || r.Execution == nil {
		return "", fmt.Errorf("request %s has no approval to sign", r.ID)
	}
	if r.Approvals > 1 && len(r.Votes) == 0 {
		// A quorum's token names every approving vote, which the claim's
		// answer leaves out.
		full, err := s.system.GetRequest(ctx, r.ID)
		if err != nil {
			return "", err
		}
		r.Votes = full.Votes
	}
	digest, err := approvaltoken.ArgsDigest(r.Arguments)
	if err != nil {
		return "", fmt.Errorf("request %s: %w", r.ID, err)
	}
	aud, err := s.tokenAudience(ctx, r.InstanceID)
	if err != nil {
		return "", err
	}
	c := approvaltoken.Claims{
		Issuer: s.issuer, Audience: aud, Subject: r.ID, ID: airlock.NewID("jti_"),
		IssuedAt: r.Execution.ClaimedAt.Unix(), Expiry: r.Decision.ExpiresAt.Unix(),
		Tool: r.Tool, ArgsDigest: digest, InstanceID: r.InstanceID,
		DecidedBy: deciders(r), DecisionSource: decisionSource(r.Decision.DecidedBy),
	}
	if c.Expiry <= c.IssuedAt {
		// The approval ends within the second it was claimed in; a token
		// of whole seconds cannot say so, and ends a second later.
		c.Expiry = c.IssuedAt + 1
	}
	key, err := s.activeKey(ctx)
	if err != nil {
		return "", err
	}
	return approvaltoken.Sign(key, c)
}

// activeKey is the key that signs now: the fixed key, or the store's key
// whose window holds the service's clock. The view is read again once it
// is KeyRefresh old, so every replica has read a rotation before the new
// key's window opens.
func (s *Service) activeKey(ctx context.Context) (approvaltoken.Key, error) {
	if s.keys.fixed != nil {
		return *s.keys.fixed, nil
	}
	now := s.clock.Now()
	s.keys.mu.Lock()
	defer s.keys.mu.Unlock()
	if err := s.freshKeys(ctx, now, ""); err != nil {
		return approvaltoken.Key{}, err
	}
	sk, ok := signerAt(s.keys.published, now)
	if !ok {
		return approvaltoken.Key{}, errors.New("no signing key is active (Service.LoadSigningKeys)")
	}
	return s.keys.derived[sk.ID], nil
}

// signerAt picks the key that signs at now: the one whose window holds
// it. A clock a little behind the store's may see the first key before
// its window opens; then the earliest key not retired signs, which is
// published, so its tokens verify.
func signerAt(keys []store.SigningKey, now time.Time) (store.SigningKey, bool) {
	var early *store.SigningKey
	for i, k := range keys {
		if k.SignsAt(now) {
			return k, true
		}
		if k.RetiredAt == nil || now.Before(*k.RetiredAt) {
			if early == nil || k.ActivatesAt.Before(early.ActivatesAt) {
				early = &keys[i]
			}
		}
	}
	if early == nil {
		return store.SigningKey{}, false
	}
	return *early, true
}

// maxAudiencesCached bounds the instances whose token_audience a service
// remembers; past it, the cache starts again.
const maxAudiencesCached = 10_000

// tokenAudience is the token_audience instance id registered. It never
// changes, so it is read once per instance and kept.
func (s *Service) tokenAudience(ctx context.Context, instanceID string) (string, error) {
	s.keys.mu.Lock()
	aud, ok := s.keys.audiences[instanceID]
	s.keys.mu.Unlock()
	if ok {
		return aud, nil
	}
	aud, err := s.system.TokenAudience(ctx, instanceID)
	if err != nil {
		return "", fmt.Errorf("token audience of instance %s: %w", instanceID, err)
	}
	s.keys.mu.Lock()
	defer s.keys.mu.Unlock()
	if s.keys.audiences == nil || len(s.keys.audiences) >= maxAudiencesCached {
		s.keys.audiences = make(map[string]string)
	}
	s.keys.audiences[instanceID] = aud
	return aud, nil
}

// SetApprovalTokens turns signing approval tokens on (the default) or
// off. It exists so that `airlock bench` can measure what signing costs on
// one warm server, switching between passes (docs/performance.md); a
// server always signs otherwise, and nothing else calls it.
func (s *Service) SetApprovalTokens(on bool) { s.unsigned.Store(!on) }

// SetIssuer names the server in the tokens it signs (iss): its public
// URL, else the address it listens on. Call it before serving.
func (s *Service) SetIssuer(iss string) { s.issuer = iss }

// deciders are the principals whose approval a token carries: every
// approving vote of a quorum, else the one decider.
func deciders(r airlock.Request) []approvaltoken.Decider {
	var out []approvaltoken.Decider
	for _, v := range r.Votes {
		if v.Status == airlock.StateApproved {
			out = append(out, approvaltoken.Decider{Principal: v.Principal, Name: v.Name})
		}
	}
	if len(out) == 0 {
		out = append(out, approvaltoken.Decider{Principal: r.Decision.DecidedBy, Name: r.Decision.DecidedByName})
	}
	return out
}

// decisionSource says who approved: a policy rule, a grant, or a person.
func decisionSource(decidedBy string) string {
	if airlock.DecidedByPolicy(decidedBy) {
		return approvaltoken.SourcePolicy
	}
	if _, ok := airlock.GrantOf(decidedBy); ok {
		return approvaltoken.SourceGrant
	}
	return approvaltoken.SourceHuman
}

// ConsumeApprovalToken verifies an approval token against the server's
// own published keys and records its single use (docs/tokens.md, "Single
// use"): verifiers and admins only. A token that does not verify is
// invalid_token with the refusal's reason (approvaltoken.Reason); a
// request whose token was consumed before is already_used, naming when.
// With in's tool and arguments the token must approve exactly that call;
// without, its signature, type, expiry and audience decide.
func (s *Service) ConsumeApprovalToken(ctx context.Context, c airlock.Caller, in airlock.ConsumeInput) (store.TokenUse, error) {
	if !c.Role.MayConsumeApprovalTokens() {
		return store.TokenUse{}, forbidden("only verifier and admin tokens consume approval tokens")
	}
	if err := in.Validate(); err != nil {
		return store.TokenUse{}, err
	}
	st := s.storeFor(c)
	now := s.clock.Now()
	kid, _ := approvaltoken.KeyIDOf(in.Token) // a token without one fails Verify, with its reason
	set, err := s.verifyingKeys(ctx, kid)
	if err != nil {
		return store.TokenUse{}, err
	}
	want := approvaltoken.Expect{Tool: in.Tool, Args: in.Arguments, Audience: in.Audience, Now: now, Leeway: approvaltoken.DefaultLeeway}
	var claims approvaltoken.Claims
	if in.CheckCall() {
		claims, err = set.Verify(in.Token, want)
	} else {
		claims, err = set.VerifyAnyCall(in.Token, want)
	}
	if err != nil {
		return store.TokenUse{}, &airlock.Error{Code: airlock.CodeInvalidToken, Field: "token", Reason: approvaltoken.Reason(err),
			Message: "the approval token does not verify: " + err.Error()}
	}
	// Its event wakes the event streams and the audit log's sequencer as it
	// commits (store.Extras.Events on SQLite, the change feed on PostgreSQL).
	return st.ConsumeApprovalToken(ctx, claims.Subject, claims.ID, c.ID)
}

// earlySigning signs a claim's approval token while the claim commits.
// The store hands the claimed request over once the claim's write has won
// (store.Requests.ClaimExecution's prepare), and the signature is made
// then, on a goroutine of its own, while the commit syncs: a claim's
// answer waits for the slower of the two, not for both in turn. Signed
// after the answer came back, a token delays each client's next write by
// the signature, and fewer writes then share a commit
// (docs/performance.md, "What an approval token costs").
type earlySigning struct {
	// latest is the last signing started: a retried transaction hands
	// the claim over again.
	latest atomic.Pointer[signing]
}

// signing is one token being signed for claimed.
type signing struct {
	claimed airlock.Request
	done    chan struct{}
	token   string
	err     error
}

// start begins signing r's token. It returns at once: it may be called on
// the store's writer.
func (e *earlySigning) start(ctx context.Context, s *Service, r airlock.Request) {
	sg := &signing{claimed: r, done: make(chan struct{})}
	e.latest.Store(sg)
	go func() {
		defer close(sg.done)
		sg.token, sg.err = s.signClaim(ctx, r)
	}()
}

// token returns the token of claimed, the request the claim returned:
// the one signed early when it was signed for exactly that request, else
// one signed now.
func (e *earlySigning) token(ctx context.Context, s *Service, claimed airlock.Request) (string, error) {
	if sg := e.latest.Load(); sg != nil && reflect.DeepEqual(sg.claimed, claimed) {
		<-sg.done
		return sg.token, sg.err
	}
	return s.signClaim(ctx, claimed)
}
