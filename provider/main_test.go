package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/approvaltoken"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/internal/testkit/callers"
	"github.com/airlockhq/airlock/policy"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlite"
	"github.com/airlockhq/airlock/store/storetest"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}

// epoch is where fake clocks start.
var epoch = time.Date(2030, time.March, 4, 5, 6, 7, 0, time.UTC)

// bundle is what setup gives a test: a service over a real SQLite store in
// a temporary folder, the clock both judge time by, and one caller of each
// kind with an instance for the agent.
type bundle struct {
	svc   *Service
	store *sqlite.Store
	// clock is the fake clock, nil when the bundle runs on the real clock.
	clock *fakeClock

	admin        airlock.Caller
	agent        airlock.Caller // principal "alice"
	otherAgent   airlock.Caller // principal "carol"
	reviewer     airlock.Caller // principal "bob"
	selfReviewer airlock.Caller // a reviewer token of "alice", who owns agent
	inst         airlock.Instance
}

// options tune setup.
type options struct {
	realClock bool
	// clock, when set, is the clock of both the store and the service.
	clock  airlock.Clock
	limits airlock.Limits
	batch  int
	path   string // reuse this database file instead of a fresh one
	// pageBytes, heavyReads and heavyPerToken are Config.ListPageBytes,
	// MaxHeavyReads and MaxHeavyReadsPerToken.
	pageBytes, heavyReads, heavyPerToken int
	// policy is Config.Policy.
	policy airlock.Policy
	// groups is Config.Groups.
	groups airlock.GroupDirectory
	// wrap, when set, wraps the store the service is given.
	wrap func(store.Store) store.Store
	// noExpressions leaves Config.Expressions nil: no CEL grants.
	noExpressions bool
	// signingKey is Config.SigningKey.
	signingKey *approvaltoken.Key
	// retain is Config.RetainPayloads.
	retain time.Duration
	// log, when set, is where the service logs (text); io.Discard
	// otherwise.
	log io.Writer
}

// setup opens a fresh SQLite store and a service over it. By default both
// run on a fake clock stopped at epoch.
func setup(t testing.TB, opt options) *bundle {
	t.Helper()
	b := &bundle{}
	var clock airlock.Clock
	switch {
	case opt.clock != nil:
		clock = opt.clock
	case opt.realClock:
		clock = airlock.SystemClock{}
	default:
		b.clock = newFakeClock(epoch)
		clock = b.clock
	}
	path := opt.path
	if path == "" {
		path = filepath.Join(t.TempDir(), "airlock.db")
	}
	db, err := sqlite.Open(t.Context(), path, sqlite.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	b.store = db
	var served store.Store = db
	if opt.wrap != nil {
		served = opt.wrap(db)
	}
	var expressions airlock.GrantExpressions = new(policy.Expressions)
	if opt.noExpressions {
		expressions = nil
	}
	logTo := opt.log
	if logTo == nil {
		logTo = io.Discard
	}
	b.svc, err = New(Config{
		Store: served, Clock: clock, Limits: opt.limits, ExpiryBatch: opt.batch, Policy: opt.policy, Groups: opt.groups,
		Expressions: expressions, SigningKey: opt.signingKey,
		Logger:        slog.New(slog.NewTextHandler(logTo, nil)),
		ListPageBytes: opt.pageBytes, MaxHeavyReads: opt.heavyReads, MaxHeavyReadsPerToken: opt.heavyPerToken,
		RetainPayloads: opt.retain,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.svc.LoadSigningKeys(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.admin = callers.Admin(t, b.svc, "bootstrap-secret-for-tests-"+airlock.NewID(""))
	b.agent = b.mint(t, airlock.RoleAgent, "alice")
	b.otherAgent = b.mint(t, airlock.RoleAgent, "carol")
	b.reviewer = b.mint(t, airlock.RoleReviewer, "bob")
	b.selfReviewer = b.mint(t, airlock.RoleReviewer, "alice")
	b.inst = b.instance(t, b.agent)
	return b
}

// mint creates a token, with scopes when given, through the service and
// authenticates with its secret, as a real caller would.
func (b *bundle) mint(t testing.TB, role airlock.Role, principal string, scopes ...string) airlock.Caller {
	t.Helper()
	c, _ := callers.Mint(t, b.svc, b.admin, airlock.NewTokenInput{
		Name: string(role) + " of " + principal, Role: role, Principal: principal, Scopes: scopes,
	})
	return c
}

// instance registers an instance of agent.
func (b *bundle) instance(t testing.TB, agent airlock.Caller) airlock.Instance {
	t.Helper()
	in, err := b.svc.RegisterInstance(t.Context(), agent, airlock.InstanceInput{Name: "adapter"})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

var keys atomic.Int64

// newKey returns a fresh idempotency key.
func newKey() string { return fmt.Sprintf("key-%d", keys.Add(1)) }

// call is a tool call to ask about.
func call(timeout string) airlock.CreateRequestInput {
	return airlock.CreateRequestInput{
		Tool:      "issue_refund",
		Arguments: json.RawMessage(`{"payment_id":"payment_123","amount":4900,"currency":"GBP"}`),
		Timeout:   timeout, AgentReasoning: "The customer was charged twice.",
	}
}

// create makes a pending request on the bundle's instance and fails the
// test if it cannot.
func (b *bundle) create(t *testing.T, timeout string) airlock.Request {
	t.Helper()
	r, created, err := b.svc.CreateRequest(t.Context(), b.agent, b.inst.ID, newKey(), call(timeout))
	if err != nil || !created {
		t.Fatalf("create: created=%v err=%v", created, err)
	}
	return r
}

// approve approves id as the reviewer and fails the test if it cannot.
func (b *bundle) approve(t *testing.T, id string) airlock.Request {
	t.Helper()
	r, err := b.svc.Decide(t.Context(), b.reviewer, id, airlock.DecisionInput{Status: airlock.StateApproved})
	if err != nil {
		t.Fatalf("approve %s: %v", id, err)
	}
	return r
}

// stored reads a request straight from the store, bypassing the service's
// lazy expiry, to see what is recorded.
func (b *bundle) stored(t *testing.T, id string) airlock.Request {
	t.Helper()
	r, err := b.store.GetRequest(context.WithoutCancel(t.Context()), id)
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	return r
}

// events reads the whole audit log.
func (b *bundle) events(t *testing.T) []airlock.Event { return storetest.AllEvents(t, b.store) }

// runScheduler runs the service's expiry scheduler until the test ends.
func (b *bundle) runScheduler(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := b.svc.Run(ctx); err != nil {
			t.Errorf("scheduler: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// wantCode fails the test unless err carries code (and, when state is not
// empty, names state).
func wantCode(t *testing.T, err error, code airlock.Code, state airlock.State) {
	t.Helper()
	if got := airlock.ErrorCode(err); got != code {
		t.Fatalf("error %v (code %q), want code %q", err, got, code)
	}
	if state == "" {
		return
	}
	var e *airlock.Error
	if !errors.As(err, &e) || e.State != state {
		t.Fatalf("error %v names state %v, want %q", err, e, state)
	}
}

// testLimits lets tests use millisecond windows.
func testLimits() airlock.Limits {
	l := airlock.DefaultLimits()
	l.MinTimeout = time.Millisecond
	return l
}

// percentile returns the p-th percentile (0..100) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}
