// Package provider is Airlock's provider service: it authorizes callers,
// validates input, asks the store to make each transition, wakes waiters,
// and runs the expiry scheduler. The REST API and the MCP server are thin
// layers over it, so both enforce exactly the same rules.
package provider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/approvaltoken"
	"github.com/airlockhq/airlock/store"
)

// Config configures a Service. Zero fields take the documented defaults.
type Config struct {
	Store  store.Store    // required
	Clock  airlock.Clock  // default airlock.SystemClock{}
	Limits airlock.Limits // default airlock.DefaultLimits()
	Policy airlock.Policy // default airlock.NoPolicy{}
	// Groups tells each principal's configured reviewer groups (the policy
	// engine); nil: none are configured. A caller's groups are these and
	// the ones its sign-in brought (airlock.Caller.Groups).
	Groups airlock.GroupDirectory
	// Expressions compiles grants' CEL match expressions
	// (policy.Expressions); nil: grants match the same arguments only,
	// a grant with an expression is refused, and one stored covers
	// nothing.
	Expressions airlock.GrantExpressions
	Logger      *slog.Logger // default slog.Default()
	// Metrics, when set, receives transitions, decision latency and expiry lag.
	Metrics *Metrics
	// MaxWait bounds a long-poll (default 60s).
	MaxWait time.Duration
	// ExpiryBatch is how many requests the first expiry write handles
	// (default 100); later ones are sized by how long the last took, so
	// that none holds the writer for long (scheduler.go, sweepTarget).
	ExpiryBatch int
	// StaleAfter is how long an MCP session may go without a heartbeat
	// before it shows as stale (default airlock.DefaultStaleAfter, 5m).
	// Stale is display only: it cancels and refuses nothing.
	StaleAfter time.Duration
	// EscalateEvery is how often Run widens the requests whose escalation
	// is due (default 1s): an escalation comes at most this late.
	EscalateEvery time.Duration
	// ListPageBytes ends a page of ListRequests early once its requests
	// hold this many bytes of arguments and other large fields
	// (airlock.Request.StoredBytes; default DefaultListPageBytes, 4 MiB).
	ListPageBytes int
	// MaxHeavyReads is how many heavy reads (HeavyRead) this process
	// serves at once (default DefaultMaxHeavyReads, 8), and
	// MaxHeavyReadsPerToken how many one token may have in progress
	// (default DefaultMaxHeavyReadsPerToken, 2).
	MaxHeavyReads         int
	MaxHeavyReadsPerToken int
	// HeavyReadsOver, when set, is called when the last heavy read in
	// progress gives its slot back: the moment the pages they held became
	// garbage, when the server may hand that memory back to the system.
	// It must not block.
	HeavyReadsOver func()
	// CheckWebhookURL, when set, refuses a webhook URL at creation beyond
	// WebhookInput.Validate: the notify engine's address rules.
	CheckWebhookURL func(url string) error
	// CheckPushURL, when set, refuses a push subscription's endpoint at
	// subscription beyond PushSubscriptionInput.Validate: the outbound
	// address rules. PushAllowHTTP lets an endpoint be http:// (with
	// --outbound-allow-private: a push service on the same network, a
	// test); push services are https.
	CheckPushURL  func(url string) error
	PushAllowHTTP bool
	// DeliveryQueued, when set, is called after a delivery is queued
	// outside the fan-out (a test), so that it goes out at once.
	DeliveryQueued func()
	// SigningKey, when set, is the one key approval tokens are signed
	// with (--signing-key-file); the store's keys are then unused.
	SigningKey *approvaltoken.Key
	// KeyActivationDelay is how long after a rotation the new key starts
	// signing, the old one signing until then: more than KeyRefresh plus
	// the skew of the replicas' and the database's clocks
	// (DefaultKeyActivationDelay). Zero switches at once, which suits one
	// replica: the others switch within KeyRefresh.
	KeyActivationDelay time.Duration
	// Issuer is the approval tokens' iss: the server's public URL
	// (default "airlock"; see SetIssuer).
	Issuer string
	// CheckpointInterval is how often the audit log's sequencer signs a
	// checkpoint while the tree grows (default
	// DefaultCheckpointInterval, 10s); its lease lasts three of them.
	// Negative: Run runs no sequencer (tests that step SequenceAudit).
	CheckpointInterval time.Duration
	// RetainPayloads, when positive, is how long after its decision a
	// request keeps its arguments, reasoning and context: Run purges them
	// once they are older (retention.go). At least MinRetainPayloads.
	// Zero keeps them for ever.
	RetainPayloads time.Duration
	// RequirePasskey, when set, names the requests whose decisions must
	// be signed with the deciding reviewer's passkey (--require-passkey-for,
	// docs/phone.md): a decision of one without a verified assertion is
	// refused. nil: none.
	RequirePasskey airlock.GrantExpression
	// PasskeyRPID is the passkeys' relying party ID, which an assertion's
	// authenticator data names (default "localhost").
	PasskeyRPID string
}

// Service is the provider. Its methods take the authenticated caller and
// return *airlock.Error for anything the caller can act on.
type Service struct {
	// system is the store for the work no caller asks for: the scheduler,
	// authentication, the bootstrap token, readiness. A caller's calls go
	// through storeFor(c), which makes a remembered token's check.
	system store.Store
	clock  airlock.Clock
	limits airlock.Limits
	policy airlock.Policy
	groups airlock.GroupDirectory
	// escalateEvery is Config.EscalateEvery.
	escalateEvery time.Duration
	log           *slog.Logger
	metrics       *Metrics
	maxWait       time.Duration
	batch         int
	stale         time.Duration
	// pageBytes is Config.ListPageBytes.
	pageBytes int
	// heavy bounds the heavy reads in progress (HeavyRead).
	heavy *heavyReads

	hub *hub
	// reads combines the reads of the long-polls the hub wakes at once.
	reads readBatch
	kick  chan struct{}
	// tokens caches live tokens when the store has a token stamp; nil
	// otherwise.
	tokens *tokenCache
	// remembered keeps the tokens callers presented when the store checks
	// tokens itself (store.Extras.TokenCheck); nil otherwise.
	remembered *rememberedTokens
	// feed announces other replicas' changes when the store is shared
	// (store.Extras.Feed); nil otherwise.
	feed store.ChangeFeed
	// nextWake is the deadline (unix µs) the scheduler sleeps until; 0 when
	// it sleeps with nothing due. A create with an earlier deadline kicks it.
	nextWake atomic.Int64
	// sweep runs the expiry passes (scheduler.go).
	sweep sweeper
	// overdue coalesces the expiries of requests readers found overdue.
	overdue overdueExpiries
	// unsigned turns off signing approval tokens (SetApprovalTokens).
	unsigned atomic.Bool
	// expressions compiles the expressions of cel grants; nil: none.
	expressions airlock.GrantExpressions
	// grantedTools are the tools that had live grants when last looked at.
	grantedTools toolSet

	checkWebhookURL func(string) error
	deliveryQueued  func()
	// push is Web Push's part of the service (push.go).
	push pushState

	// keys are the approval tokens' signing keys, and issuer the tokens'
	// iss (signing.go).
	keys   signingKeys
	issuer string
	// audit is the audit log's sequencer (auditlog.go).
	audit auditSequencer
	// retain is Config.RetainPayloads (retention.go).
	retain time.Duration

	requirePasskey airlock.GrantExpression
	passkeyRPID    string
}

// New returns a Service for cfg.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("provider: Config.Store is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = airlock.SystemClock{}
	}
	if cfg.Limits == (airlock.Limits{}) {
		cfg.Limits = airlock.DefaultLimits()
	}
	if err := cfg.Limits.Validate(); err != nil {
		return nil, fmt.Errorf("provider: %w", err)
	}
	if cfg.Policy == nil {
		cfg.Policy = airlock.NoPolicy{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 60 * time.Second
	}
	if cfg.ExpiryBatch <= 0 {
		cfg.ExpiryBatch = 100
	}
	if cfg.EscalateEvery <= 0 {
		cfg.EscalateEvery = time.Second
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = airlock.DefaultStaleAfter
	}
	if cfg.ListPageBytes <= 0 {
		cfg.ListPageBytes = DefaultListPageBytes
	}
	if cfg.MaxHeavyReads <= 0 {
		cfg.MaxHeavyReads = DefaultMaxHeavyReads
	}
	if cfg.Issuer == "" {
		cfg.Issuer = "airlock"
	}
	sequence := cfg.CheckpointInterval >= 0
	if cfg.CheckpointInterval <= 0 {
		cfg.CheckpointInterval = DefaultCheckpointInterval
	}
	if cfg.MaxHeavyReadsPerToken <= 0 {
		cfg.MaxHeavyReadsPerToken = DefaultMaxHeavyReadsPerToken
	}
	if cfg.RetainPayloads < 0 || (cfg.RetainPayloads > 0 && cfg.RetainPayloads < MinRetainPayloads) {
		return nil, fmt.Errorf("provider: RetainPayloads %s: keep payloads at least %s, or 0 for ever", cfg.RetainPayloads, MinRetainPayloads)
	}
	extras := cfg.Store.Extras()
	// Said once, at debug, so that an operator (and a benchmark) can tell
	// which of the store's optional parts this server runs with; it is
	// not news to someone starting the server.
	cfg.Logger.Debug("store extras",
		"token_stamp", extras.TokenStamp != nil, "token_check", extras.TokenCheck != nil, "change_feed", extras.Feed != nil,
		"event_watch", extras.Events != nil)
	s := &Service{
		system: cfg.Store, clock: cfg.Clock, limits: cfg.Limits, policy: cfg.Policy, groups: cfg.Groups, expressions: cfg.Expressions,
		log: cfg.Logger, metrics: cfg.Metrics, maxWait: cfg.MaxWait, batch: cfg.ExpiryBatch, stale: cfg.StaleAfter, escalateEvery: cfg.EscalateEvery,
		hub: newHub(), kick: make(chan struct{}, 1), sweep: sweeper{turn: make(chan struct{}, 1), target: cmp.Or(extras.SweepTarget, sweepTarget)},
		tokens: newTokenCache(extras.TokenStamp), remembered: newRememberedTokens(extras.TokenCheck), feed: extras.Feed,
		pageBytes: cfg.ListPageBytes, heavy: newHeavyReads(cfg.MaxHeavyReads, cfg.MaxHeavyReadsPerToken, cfg.Metrics, cfg.HeavyReadsOver),
		checkWebhookURL: cfg.CheckWebhookURL, deliveryQueued: cfg.DeliveryQueued,
		push: pushState{checkURL: cfg.CheckPushURL, allowHTTP: cfg.PushAllowHTTP},
		keys: signingKeys{fixed: cfg.SigningKey, delay: cfg.KeyActivationDelay}, issuer: cfg.Issuer,
		audit: auditSequencer{every: cfg.CheckpointInterval, run: sequence, holder: airlock.NewID("seq_"),
			gap: cmp.Or(extras.SequencerGap, sequencerMinGap)},
		retain: cfg.RetainPayloads, requirePasskey: cfg.RequirePasskey, passkeyRPID: cmp.Or(cfg.PasskeyRPID, "localhost"),
	}
	if extras.Events != nil {
		// Every event reaches the event streams and the sequencer at once,
		// whichever call appended it (a grant, a token, an instance).
		extras.Events.WatchEvents(func() { s.hub.publish() })
	}
	return s, nil
}

// Limits returns the provider's window and validity limits.
func (s *Service) Limits() airlock.Limits { return s.limits }

// MaxWait returns the longest long-poll the service allows.
func (s *Service) MaxWait() time.Duration { return s.maxWait }

// ListPageBytes returns Config.ListPageBytes: how many bytes of arguments
// and other large fields end a page of ListRequests.
func (s *Service) ListPageBytes() int { return s.pageBytes }

// Ready checks that the store can serve reads and writes (Store.Ping): an
// unavailable error while it cannot, nil again once it recovers.
func (s *Service) Ready(ctx context.Context) error { return s.system.Ping(ctx) }

func forbidden(format string, args ...any) error {
	return airlock.Errorf(airlock.CodeForbidden, format, args...)
}

// Authenticate returns the token whose secret was presented. Unknown and
// revoked tokens are unauthorized, and a revocation takes effect on the
// next call (see AuthenticateHash).
func (s *Service) Authenticate(ctx context.Context, secret string) (airlock.Caller, error) {
	if secret == "" {
		return airlock.Caller{}, airlock.Errorf(airlock.CodeUnauthorized, "missing token: send Authorization: Bearer <token>")
	}
	return s.AuthenticateHash(ctx, airlock.HashSecret(secret))
}

// RegisterInstance registers an adapter instance owned by the calling agent.
func (s *Service) RegisterInstance(ctx context.Context, c airlock.Caller, in airlock.InstanceInput) (airlock.Instance, error) {
	if c.Role != airlock.RoleAgent {
		return airlock.Instance{}, forbidden("only agent tokens register instances")
	}
	if err := in.Validate(); err != nil {
		return airlock.Instance{}, err
	}
	inst := airlock.Instance{ID: airlock.NewID(airlock.PrefixInstance), OwnerID: c.ID, Name: in.Name, Metadata: in.Metadata, TokenAudience: in.TokenAudience}
	return s.storeFor(c).CreateInstance(ctx, inst, c.ID)
}

// Instance reads an instance the caller may see.
func (s *Service) Instance(ctx context.Context, c airlock.Caller, id string) (airlock.Instance, error) {
	inst, err := s.storeFor(c).GetInstance(ctx, id)
	if err != nil {
		return airlock.Instance{}, err
	}
	if !airlock.CanReadInstance(c, inst) {
		return airlock.Instance{}, airlock.NotFound("instance", id)
	}
	return inst, nil
}

// Instances lists the instances the caller may see.
func (s *Service) Instances(ctx context.Context, c airlock.Caller) ([]airlock.Instance, error) {
	owner := ""
	if c.Role == airlock.RoleAgent {
		owner = c.ID
	}
	return s.storeFor(c).ListInstances(ctx, owner)
}

// DeleteInstance deletes an instance (its owner or an admin) and cancels its
// pending requests in the same transaction. It returns how many it cancelled.
func (s *Service) DeleteInstance(ctx context.Context, c airlock.Caller, id string) (int, error) {
	if c.Role == airlock.RoleReviewer {
		return 0, forbidden("reviewers cannot delete instances; the owning agent or an admin can")
	}
	inst, err := s.Instance(ctx, c, id)
	if err != nil {
		return 0, err
	}
	if c.Role != airlock.RoleAdmin && inst.OwnerID != c.ID {
		return 0, airlock.NotFound("instance", id)
	}
	ids, err := s.storeFor(c).DeleteInstance(ctx, id, c.ID)
	if err != nil {
		return 0, err
	}
	return s.cancelled(ids), nil
}

// cancelled tells the waiters on, and the metrics of, the requests that
// deleting an instance or closing a session cancelled, and returns how
// many there were.
func (s *Service) cancelled(ids []string) int {
	s.hub.publish(ids...)
	if s.metrics != nil && len(ids) > 0 {
		// One Add, not one Inc a request: a delete may cancel thousands.
		s.metrics.transitions.WithLabelValues(string(airlock.StateCancelled)).Add(float64(len(ids)))
	}
	return len(ids)
}

// CreateRequest creates an approval request on the caller's instance,
// idempotently per caller and key. created is false for a replay.
func (s *Service) CreateRequest(ctx context.Context, c airlock.Caller, instanceID, key string, in airlock.CreateRequestInput) (airlock.Request, bool, error) {
	if c.Role != airlock.RoleAgent {
		return airlock.Request{}, false, forbidden("only agent tokens create approval requests")
	}
	if err := airlock.CheckIdempotencyKey(key); err != nil {
		return airlock.Request{}, false, err
	}
	if err := in.Validate(); err != nil {
		return airlock.Request{}, false, err
	}
	window, err := s.limits.Window(in.Timeout)
	if err != nil {
		return airlock.Request{}, false, err
	}
	// The instance is not read here: the store's insert takes it only if it
	// is live and the caller's, and answers not_found otherwise (a replay
	// of a request made before the instance was deleted still returns the
	// original).
	fp, err := in.Fingerprint(instanceID)
	if err != nil {
		return airlock.Request{}, false, err
	}
	r := airlock.Request{
		ID: airlock.NewRequestID(s.clock.Now()), InstanceID: instanceID, OwnerID: c.ID,
		Kind: airlock.KindToolCall, Tool: in.Tool, Arguments: in.Arguments, Timeout: in.Timeout,
		AgentReasoning: in.AgentReasoning, Context: in.Context, IdempotencyKey: key, Fingerprint: fp,
		Preview: in.Preview, Reversibility: in.Reversibility,
	}
	return s.create(ctx, s.storeFor(c), c, store.NewRequestParams{Request: r, Window: window, Actor: c.ID})
}

// create asks the policy, then, when no rule decided, looks for live
// grants covering the request, then stores the request in st. The
// policy's approval is never applied to a request that only a person may
// approve (Request.MayApproveAtCreation), whatever the policy says, and a
// grant covers tool calls only.
func (s *Service) create(ctx context.Context, st store.Store, c airlock.Caller, p store.NewRequestParams) (airlock.Request, bool, error) {
	v := s.evaluate(ctx, airlock.PolicyInput{
		Request: p.Request, Window: p.Window, Agent: c.Token,
		Instance: func(ctx context.Context) (airlock.Instance, error) { return st.GetInstance(ctx, p.Request.InstanceID) },
	})
	if d := v.Initial; d != nil && d.Status == airlock.StateApproved {
		if !p.Request.MayApproveAtCreation() {
			v.Initial = nil
		} else {
			// A rule's valid_for keeps to the limits a reviewer's does.
			d := *d
			if d.Validity <= 0 {
				d.Validity = s.limits.ApprovalValidity
			}
			d.Validity = min(d.Validity, s.limits.MaxApprovalValidity)
			v.Initial = &d
		}
	}
	p.Initial = v.Initial
	if v.Initial == nil {
		p.Request.Reviewers, p.Request.Approvals = v.Reviewers, v.Approvals
		p.Request.EscalateTo, p.Request.EscalateAfter = v.EscalateTo, v.EscalateAfter
	}
	if v.Initial == nil && v.Window > 0 && v.Window < p.Window {
		// A rule may shorten a request's window, never below the shortest.
		p.Window = max(v.Window, s.limits.MinTimeout)
	}
	r, created, err := s.insertOrGrant(ctx, st, c, p)
	if created && v.Record != nil {
		// Only a new request counts for the rules: a replay is answered
		// with the original, which they counted when it was made.
		v.Record()
	}
	return r, created, err
}

// insert stores a request in st and wakes whoever cares. A replay answers
// like a read: a request whose deadline has come is shown expired, never
// pending.
func (s *Service) insert(ctx context.Context, st store.Store, p store.NewRequestParams) (airlock.Request, bool, error) {
	r, created, err := st.CreateRequest(ctx, p)
	if err != nil {
		return airlock.Request{}, false, err
	}
	if !created {
		r, err = s.expireIfDue(ctx, st, r)
		return r, false, err
	}
	s.metrics.entered(airlock.Request{State: airlock.StatePending})
	if r.State.Terminal() {
		s.metrics.entered(r)
	} else {
		s.wakeSchedulerFor(r.DeadlineAt)
	}
	s.hub.publish(r.ID)
	return r, true, nil
}

// read returns a request the caller may see, expiring it first when its
// deadline has come and the scheduler has not yet run, so reads always
// agree with the deadline.
func (s *Service) read(ctx context.Context, c airlock.Caller, id string) (airlock.Request, error) {
	st := s.storeFor(c)
	r, err := st.GetRequest(ctx, id)
	if err != nil {
		return r, err
	}
	if !airlock.CanReadRequest(c, r) {
		return airlock.Request{}, airlock.NotFound("approval request", id)
	}
	return s.expireIfDue(ctx, st, r)
}

// expireIfDue expires r first when its deadline has come and the scheduler
// has not yet run, so every answer agrees with the deadline. It expires r,
// not the backlog (behind 100,000 due requests, a sweep of them all kept
// the reader waiting seconds for requests not its own), in a round shared
// with the readers who ask at once (expireOverdue); it reads r again from
// st.
func (s *Service) expireIfDue(ctx context.Context, st store.Store, r airlock.Request) (airlock.Request, error) {
	if !s.due(r) {
		return r, nil
	}
	if err := s.expireOverdue(ctx, r.ID); err != nil {
		return r, err
	}
	return st.GetRequest(ctx, r.ID)
}

// due reports whether r is pending and its deadline has come.
func (s *Service) due(r airlock.Request) bool {
	return r.State == airlock.StatePending && !s.clock.Now().Before(r.DeadlineAt)
}

// ListQuery selects requests to list.
type ListQuery struct {
	State      airlock.State
	InstanceID string
	Tool       string
	Kind       airlock.Kind
	Cursor     string // from a previous Page.NextCursor
	Limit      int    // 1..200, default 50
	// PageBytes ends a page of ListRequests sooner than the service's
	// ListPageBytes when smaller (and positive): a reader that looks at one
	// request at a time holds less at once.
	PageBytes int
}

// Page is one page of requests, newest first.
type Page struct {
	Requests   []airlock.Request
	NextCursor string // empty on the last page
}

// SummaryPage is one page of request summaries, newest first.
type SummaryPage struct {
	Summaries  []airlock.RequestSummary
	NextCursor string // empty on the last page
}

// MaxPageSize bounds one page of a list.
const MaxPageSize = 200

// ListRequests lists requests: all for reviewers and admins, their own for
// agents. A page holds up to q.Limit requests, and ends early, with a
// NextCursor, once those on it hold Config.ListPageBytes of arguments and
// other large fields; a larger request comes alone on its page.
func (s *Service) ListRequests(ctx context.Context, c airlock.Caller, q ListQuery) (Page, error) {
	f, err := listFilter(c, q)
	if err != nil {
		return Page{}, err
	}
	f.MaxBytes = s.pageBytes
	if q.PageBytes > 0 && q.PageBytes < f.MaxBytes {
		f.MaxBytes = q.PageBytes
	}
	rs, more, err := s.storeFor(c).ListRequests(ctx, f)
	if err != nil {
		return Page{}, err
	}
	p := Page{Requests: rs}
	if more && len(rs) > 0 {
		p.NextCursor = CursorAfter(rs[len(rs)-1].Seq)
	}
	return p, nil
}

// ListSummaries lists what ListRequests would, as summaries, for the
// lists that show no arguments: their store reads leave the large fields
// out, so a page is never cut short for its size.
func (s *Service) ListSummaries(ctx context.Context, c airlock.Caller, q ListQuery) (SummaryPage, error) {
	f, err := listFilter(c, q)
	if err != nil {
		return SummaryPage{}, err
	}
	rs, more, err := s.storeFor(c).ListRequestSummaries(ctx, f)
	if err != nil {
		return SummaryPage{}, err
	}
	p := SummaryPage{Summaries: rs}
	if more && len(rs) > 0 {
		p.NextCursor = CursorAfter(rs[len(rs)-1].Seq)
	}
	return p, nil
}

// listFilter checks a list query and turns it into the store's filter.
func listFilter(c airlock.Caller, q ListQuery) (store.RequestFilter, error) {
	f := store.RequestFilter{State: q.State, InstanceID: q.InstanceID, Tool: q.Tool, Kind: q.Kind, Limit: q.Limit}
	if c.Role == airlock.RoleAgent {
		f.OwnerID = c.ID
	}
	if err := f.Validate(); err != nil {
		return f, err
	}
	switch {
	case f.Limit == 0:
		f.Limit = store.DefaultListLimit
	case f.Limit < 1 || f.Limit > MaxPageSize:
		return f, airlock.Invalid("limit", "limit must be between 1 and %d", MaxPageSize)
	}
	if q.Cursor != "" {
		seq, err := strconv.ParseInt(strings.TrimPrefix(q.Cursor, "c"), 10, 64)
		if err != nil || !strings.HasPrefix(q.Cursor, "c") || seq <= 0 {
			return f, airlock.Invalid("cursor", "cursor is not one this server returned")
		}
		f.BeforeSeq = seq
	}
	return f, nil
}

// CursorAfter is the cursor of the page that continues a list after the
// request with seq: ListQuery.Cursor takes it.
func CursorAfter(seq int64) string { return "c" + strconv.FormatInt(seq, 10) }

// agentOnly refuses reviewers and admins an action only a request's owning
// agent may take. Whether the agent owns the request is the store's to
// say, in the action's own write: another agent's request is not_found
// (airlock.OwnerOnly), and no read comes before the write.
func agentOnly(c airlock.Caller, action string) error {
	if c.Role != airlock.RoleAgent {
		return forbidden("only the owning agent can %s", action)
	}
	return nil
}

// Cancel withdraws a pending request of the caller's.
func (s *Service) Cancel(ctx context.Context, c airlock.Caller, id string) (airlock.Request, error) {
	if err := agentOnly(c, "cancel a request"); err != nil {
		return airlock.Request{}, err
	}
	st := s.storeFor(c)
	linkToCreation(ctx, st, id)
	return s.transition(st.Cancel(ctx, id, c.ID))
}

// Decide records a reviewer's decision. A reviewer cannot decide a request
// created by a token with their own principal, and approving a question
// needs an answer: the store checks both in the decision's transaction
// (DecideParams.Check), so the decision is one write and no read.
func (s *Service) Decide(ctx context.Context, c airlock.Caller, id string, in airlock.DecisionInput) (airlock.Request, error) {
	if c.Role != airlock.RoleReviewer {
		return airlock.Request{}, forbidden("only reviewer tokens decide requests")
	}
	if err := in.Validate(); err != nil {
		return airlock.Request{}, err
	}
	if in.Edits() {
		orig, _, err := s.Edit(ctx, c, id, in)
		return orig, err
	}
	st := s.storeFor(c)
	linkToCreation(ctx, st, id)
	p := store.DecideParams{
		ID: id, Status: in.Status, Note: in.Note, Answer: in.Answer,
		Actor: c.ID, Principal: c.Principal, Groups: s.GroupsOf(c), Review: in.Review,
	}
	validity, verr := s.limits.Validity(in.ValidFor)
	if verr != nil {
		// Answer in the order a read first would: an unknown request, a
		// self-approval and a missing answer before the validity.
		if err := s.checkDecision(ctx, st, p); err != nil {
			return airlock.Request{}, err
		}
		return airlock.Request{}, verr
	}
	p.Validity = validity
	if err := s.signedDecision(ctx, st, c, &p, in); err != nil {
		return airlock.Request{}, err
	}
	r, err := s.transition(st.Decide(ctx, p))
	if isConflict(err) {
		// The request was not pending. A self-approval or a missing answer
		// is still the better answer: it says what to change, where a
		// conflict only says it is too late.
		switch cerr := s.checkDecision(ctx, st, p); airlock.ErrorCode(cerr) {
		case airlock.CodeForbidden, airlock.CodeInvalidRequest:
			return airlock.Request{}, cerr
		}
	}
	return r, err
}

// Edit approves request id with the changed arguments in.Arguments
// (docs/protocol.md, "Edits"): the original ends denied, naming the new
// request that replaces it, and the new request, with the edited
// arguments, is approved by c (or has c's vote, when it needs several) in
// the same transaction. Only reviewers edit, never an agent, and only a
// tool call; the refusals and their order are Decide's.
func (s *Service) Edit(ctx context.Context, c airlock.Caller, id string, in airlock.DecisionInput) (original, edited airlock.Request, err error) {
	if c.Role != airlock.RoleReviewer {
		return airlock.Request{}, airlock.Request{}, forbidden("only reviewer tokens decide requests; an agent never edits a call")
	}
	if !in.Edits() {
		return airlock.Request{}, airlock.Request{}, airlock.Invalid("arguments", "an edit needs the changed arguments")
	}
	if err := in.Validate(); err != nil {
		return airlock.Request{}, airlock.Request{}, err
	}
	st := s.storeFor(c)
	if s.requirePasskey != nil {
		r, err := st.GetRequest(ctx, id)
		if err == nil {
			if need, err := s.PasskeyRequired(ctx, r); err != nil || need {
				return airlock.Request{}, airlock.Request{}, cmp.Or(err, forbidden(
					"this request needs a decision signed with a passkey, and an edit cannot be signed yet: approve or deny it as it is, in the inbox"))
			}
		}
	}
	p := store.EditParams{DecideParams: store.DecideParams{
		ID: id, Status: airlock.StateApproved, Note: in.Note,
		Actor: c.ID, Principal: c.Principal, Groups: s.GroupsOf(c), Review: in.Review,
	}, Arguments: in.Arguments}
	validity, verr := s.limits.Validity(in.ValidFor)
	if verr != nil {
		if err := s.checkDecision(ctx, st, p.DecideParams); err != nil {
			return airlock.Request{}, airlock.Request{}, err
		}
		return airlock.Request{}, airlock.Request{}, verr
	}
	p.Validity = validity
	original, edited, err = st.Edit(ctx, p)
	if isConflict(err) {
		switch cerr := s.checkDecision(ctx, st, p.DecideParams); airlock.ErrorCode(cerr) {
		case airlock.CodeForbidden, airlock.CodeInvalidRequest:
			return airlock.Request{}, airlock.Request{}, cerr
		}
	}
	if err != nil {
		_, err = s.transition(original, err)
		return airlock.Request{}, airlock.Request{}, err
	}
	s.transition(original, nil)
	s.transition(edited, nil)
	return original, edited, nil
}

// GroupsOf returns c's reviewer groups: those its sign-in brought
// (c.Groups) and those the configuration lists its principal in. Every
// decision is judged by them (DecideParams.Groups); surfaces call it to
// show a request read-only to a caller who may not decide it.
func (s *Service) GroupsOf(c airlock.Caller) []string {
	if s.groups == nil {
		return c.Groups
	}
	conf := s.groups.GroupsOf(principalOf(c.Token))
	if len(c.Groups) == 0 {
		return conf
	}
	out := slices.Clone(c.Groups)
	for _, g := range conf {
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// MayDecide reports whether c may decide r: a reviewer, in one of r's
// groups when r is routed to some.
func (s *Service) MayDecide(c airlock.Caller, r airlock.Request) bool {
	return c.Role == airlock.RoleReviewer && r.MayDecide(s.GroupsOf(c))
}

// checkDecision reads request p.ID and its creator's token from st, and
// applies p.Check: the refusals a decision gets whatever the request's
// state. Only the paths that refuse anyway pay for these reads.
func (s *Service) checkDecision(ctx context.Context, st store.Store, p store.DecideParams) error {
	r, err := st.GetRequest(ctx, p.ID)
	if err != nil {
		return err
	}
	creator, err := st.GetToken(ctx, r.OwnerID)
	if err != nil && airlock.ErrorCode(err) != airlock.CodeNotFound {
		return err
	}
	return p.Check(r, creator.Principal) // "" for an unknown creator
}

// isConflict tells a decision refused for the request's state.
func isConflict(err error) bool {
	switch airlock.ErrorCode(err) {
	case airlock.CodeNotPending, airlock.CodeDeadlinePassed:
		return true
	}
	return false
}

// transition publishes a successful transition, and a lost one that expired
// the request on the way.
func (s *Service) transition(r airlock.Request, err error) (airlock.Request, error) {
	var e *airlock.Error
	switch {
	case err == nil:
		if r.State != airlock.StatePending { // a vote that did not decide changed no state
			s.metrics.entered(r)
		}
		s.hub.publish(r.ID)
	case errors.As(err, &e) && e.Code == airlock.CodeDeadlinePassed:
		s.hub.publish(r.ID)
	}
	return r, err
}

// Claim claims the one execution attempt of the caller's approved request.
func (s *Service) Claim(ctx context.Context, c airlock.Caller, id string) (airlock.Request, error) {
	if err := agentOnly(c, "claim an execution"); err != nil {
		return airlock.Request{}, err
	}
	st := s.storeFor(c)
	linkToCreation(ctx, st, id)
	var early earlySigning
	var prepare func(airlock.Request)
	if !s.unsigned.Load() {
		prepare = func(r airlock.Request) { early.start(ctx, s, r) }
	}
	r, err := st.ClaimExecution(ctx, id, c.ID, prepare)
	if err != nil {
		return r, err
	}
	s.hub.publish(id)
	var exec airlock.ExecutionStatus
	if r.Execution != nil {
		exec = r.Execution.Status
	}
	if err := airlock.CheckClaimed(id, r.ID, r.State, exec); err != nil {
		// The store's answer is no claim of this request: a broken store.
		// Nothing is signed for it, and every adapter refuses it.
		s.log.Warn("the store's answer to a claim is not a claimed execution; no approval token", "request", id, "err", err)
		return r, nil
	}
	if prepare == nil {
		return r, nil
	}
	token, err := early.token(ctx, s, r)
	if err != nil {
		// The execution is claimed and cannot be claimed again; without
		// its proof a tool server that checks refuses the call, which
		// fails closed. Say so, and hand the claim back.
		s.log.Error("approval token not signed; tool servers that verify tokens will refuse this call", "request", id, "err", err)
		return r, nil
	}
	r.Execution.ApprovalToken = token
	return r, nil
}

// Report records the outcome of the caller's claimed execution.
func (s *Service) Report(ctx context.Context, c airlock.Caller, id string, in airlock.ReportInput) (airlock.Request, error) {
	if err := in.Validate(); err != nil {
		return airlock.Request{}, err
	}
	if err := agentOnly(c, "report an execution"); err != nil {
		return airlock.Request{}, err
	}
	st := s.storeFor(c)
	linkToCreation(ctx, st, id)
	r, err := st.ReportExecution(ctx, id, in, c.ID)
	if err == nil {
		s.hub.publish(id)
	}
	return r, err
}

// Events returns up to limit audit events after the given ID, for reviewers
// and admins.
func (s *Service) Events(ctx context.Context, c airlock.Caller, after int64, limit int) ([]airlock.Event, error) {
	if c.Role != airlock.RoleReviewer && c.Role != airlock.RoleAdmin {
		return nil, forbidden("only reviewer and admin tokens read the event stream")
	}
	return s.storeFor(c).ListEvents(ctx, after, limit)
}

// Changes returns a channel closed at the next change of anything. Take it
// before reading, then wait on it, and no change is missed.
func (s *Service) Changes() <-chan struct{} { return s.hub.changes() }

// Waiters returns how many long-polls are waiting now.
func (s *Service) Waiters() int { return s.hub.waiterCount() }

// CreateToken mints a token (admins only) and returns its secret, which is
// shown this once and stored only as a hash.
func (s *Service) CreateToken(ctx context.Context, c airlock.Caller, in airlock.NewTokenInput) (airlock.Token, string, error) {
	if c.Role != airlock.RoleAdmin {
		return airlock.Token{}, "", forbidden("only admin tokens manage tokens")
	}
	if err := in.Validate(); err != nil {
		return airlock.Token{}, "", err
	}
	secret := airlock.NewTokenSecret()
	t := airlock.Token{
		ID: airlock.NewID(airlock.PrefixToken), Name: in.Name, Role: in.Role, Scopes: in.Scopes,
		Principal: in.Principal, Hash: airlock.HashSecret(secret), CreatedAt: s.clock.Now(), CreatedBy: c.ID,
	}
	if err := s.storeFor(c).CreateToken(ctx, t); err != nil {
		return airlock.Token{}, "", err
	}
	return t, secret, nil
}

// Tokens lists every token (admins only), without secrets.
func (s *Service) Tokens(ctx context.Context, c airlock.Caller) ([]airlock.Token, error) {
	if c.Role != airlock.RoleAdmin {
		return nil, forbidden("only admin tokens manage tokens")
	}
	return s.storeFor(c).ListTokens(ctx)
}

// RevokeToken revokes a token (admins only); it stops working at once.
func (s *Service) RevokeToken(ctx context.Context, c airlock.Caller, id string) (airlock.Token, error) {
	if c.Role != airlock.RoleAdmin {
		return airlock.Token{}, forbidden("only admin tokens manage tokens")
	}
	t, err := s.storeFor(c).RevokeToken(ctx, id, c.ID)
	if err == nil {
		s.hub.tokensChanged(id) // its long-polls and every event stream re-check their token now
	}
	return t, err
}

// BootstrapAdmin stores secret as the bootstrap admin token (ID
// tok_bootstrap), replacing any earlier bootstrap secret.
func (s *Service) BootstrapAdmin(ctx context.Context, secret string) error {
	if len(secret) < 16 {
		return airlock.Invalid("admin-token", "admin-token must be at least 16 characters")
	}
	err := s.system.PutToken(ctx, airlock.Token{
		ID: BootstrapTokenID, Name: "bootstrap admin", Role: airlock.RoleAdmin,
		Hash: airlock.HashSecret(secret), CreatedAt: s.clock.Now(), CreatedBy: "system:bootstrap",
	})
	if err == nil {
		s.hub.tokensChanged(BootstrapTokenID) // the previous secret stops, waiting or not
	}
	return err
}

// BootstrapTokenID is the ID of the admin token set by --admin-token or
// generated at first run.
const BootstrapTokenID = "tok_bootstrap"
