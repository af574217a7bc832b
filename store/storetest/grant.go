package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// The reviewer who makes the tests' grants, and their principal.
const (
	granter          = "tok_granter"
	granterPrincipal = "alice"
	agentPrincipal   = "agent-a"
)

// grantFP is the arguments fingerprint of the requests b.params makes.
func grantFP(t *testing.T) string {
	t.Helper()
	fp, err := airlock.ArgumentsFingerprint("shell.exec", json.RawMessage(`{"cmd":"ls -la"}`))
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// grant stores a same_arguments grant on b's instance for the requests
// b.params makes, changed by mods.
func (b *bundle) grant(t *testing.T, mods ...func(*store.NewGrantParams)) airlock.Grant {
	t.Helper()
	p := store.NewGrantParams{
		Grant: airlock.Grant{
			ID: airlock.NewID(airlock.PrefixGrant), Tool: "shell.exec",
			Match:      airlock.GrantMatch{Kind: airlock.MatchSameArguments, ArgumentsFingerprint: grantFP(t)},
			InstanceID: b.inst.ID, Uses: new(3), Validity: validity,
			CreatedBy: granter, CreatedByPrincipal: granterPrincipal,
		},
		Lifetime: time.Hour,
	}
	for _, m := range mods {
		m(&p)
	}
	g, err := b.store.CreateGrant(b.ctx, p)
	if err != nil {
		t.Fatalf("CreateGrant: %v", err)
	}
	return g
}

// byGrant makes a request's parameters ask to be approved by grants ids.
func byGrant(t *testing.T, ids ...string) func(*store.NewRequestParams) {
	fp := grantFP(t)
	return func(p *store.NewRequestParams) {
		p.Grant = &store.GrantUse{IDs: ids, ArgumentsFingerprint: fp, Principal: agentPrincipal}
	}
}

func (b *bundle) getGrant(t *testing.T, id string) airlock.Grant {
	t.Helper()
	g, err := b.store.GetGrant(b.ctx, id)
	if err != nil {
		t.Fatalf("GetGrant(%s): %v", id, err)
	}
	return g
}

// wantGrant fails t unless g has state and usesLeft uses left.
func wantGrant(t *testing.T, g airlock.Grant, state airlock.GrantState, usesLeft int) {
	t.Helper()
	if g.State != state || g.UsesLeft == nil || *g.UsesLeft != usesLeft {
		left := "nil"
		if g.UsesLeft != nil {
			left = fmt.Sprint(*g.UsesLeft)
		}
		t.Fatalf("grant %s is %s with %s uses left, want %s with %d", g.ID, g.State, left, state, usesLeft)
	}
}

// wantByGrant fails t unless r was approved by grant id, valid for the
// grant's validity.
func wantByGrant(t *testing.T, r airlock.Request, id string) {
	t.Helper()
	d := r.Decision
	if r.State != airlock.StateApproved || d == nil || d.DecidedBy != airlock.GrantActor(id) ||
		d.DecidedByName != airlock.GrantActor(id) || d.ExpiresAt == nil || !d.ExpiresAt.Equal(d.DecidedAt.Add(validity)) {
		t.Fatalf("request = %s, want approved by %s for %s", show(r), airlock.GrantActor(id), validity)
	}
}

func wantPending(t *testing.T, r airlock.Request) {
	t.Helper()
	if r.State != airlock.StatePending || r.Decision != nil {
		t.Fatalf("request = %s, want pending", show(r))
	}
}

// testGrants checks grants: what a store keeps of them, and that a create
// approved by one counts its use in the same write.
func (s *suite) testGrants(t *testing.T) {
	runAll(t, []test{
		{"create, read, list, revoke", s.grantRoundTrip},
		{"a grant on a deleted or unknown instance is refused", s.grantUnknownInstance},
		{"a create unless granted is made only when no live grant could cover it", s.unlessGranted},
		{"a create covered by a grant is approved by it and uses it", s.grantCovers},
		{"what a grant does not cover is created pending, using nothing", s.grantDoesNotCover},
		{"an agent's grant covers that agent's calls on any instance", s.agentGrant},
		{"the first grant still live is used", s.firstLiveGrant},
		{"a cel grant is used when asked: the provider judged its expression", s.celGrant},
		{"a grant ends at its last use, expiry, revocation, its instance's deletion, its creator's revocation", s.grantEnds},
		{"an OIDC reviewer's grant ends when an admin ends their sessions, as a token's at its revocation", s.oidcGrantEnds},
		{"a replay uses no grant", s.replayUsesNoGrant},
		{"grants approve tool calls only", s.grantToolCallsOnly},
		{"16 concurrent creates on a grant of 5 uses: exactly 5 approved", s.grantUsesRace},
	})
}

func (s *suite) grantRoundTrip(t *testing.T) {
	b := s.setup(t)
	now := epoch.Truncate(time.Microsecond)
	g := b.grant(t)
	if g.Tool != "shell.exec" || g.InstanceID != b.inst.ID || g.AgentID != "" || g.Uses == nil || *g.Uses != 3 ||
		g.Validity != validity || !g.CreatedAt.Equal(now) || !g.ExpiresAt.Equal(now.Add(time.Hour)) ||
		g.CreatedBy != granter || g.CreatedByPrincipal != granterPrincipal || g.RevokedAt != nil ||
		g.Match.Kind != airlock.MatchSameArguments || g.Match.ArgumentsFingerprint != grantFP(t) {
		t.Fatalf("created grant = %+v", g)
	}
	wantGrant(t, g, airlock.GrantLive, 3)
	if got := b.getGrant(t, g.ID); !reflect.DeepEqual(got, g) {
		t.Fatalf("read back %+v, want %+v", got, g)
	}
	cel := b.grant(t, func(p *store.NewGrantParams) {
		p.Grant.Match = airlock.GrantMatch{Kind: airlock.MatchCEL, Expression: `request.arguments.cmd == "ls"`}
		p.Grant.InstanceID, p.Grant.AgentID, p.Grant.Uses = "", ownerA, nil
		p.Grant.Tool = "fs.read"
	})
	if cel.UsesLeft != nil || cel.Uses != nil || cel.AgentID != ownerA || cel.Match.Expression != `request.arguments.cmd == "ls"` {
		t.Fatalf("unlimited cel grant = %+v", cel)
	}
	all, err := b.store.ListGrants(b.ctx, store.GrantFilter{})
	wantOK(t, err)
	if len(all) != 2 || all[0].ID != cel.ID || all[1].ID != g.ID {
		t.Fatalf("ListGrants = %+v, want the cel grant then the first", all)
	}
	byTool, err := b.store.ListGrants(b.ctx, store.GrantFilter{Tool: "shell.exec", Live: true})
	wantOK(t, err)
	if len(byTool) != 1 || byTool[0].ID != g.ID {
		t.Fatalf("ListGrants(shell.exec, live) = %+v", byTool)
	}

	b.clock.Advance(time.Second)
	rv, err := b.store.RevokeGrant(b.ctx, g.ID, reviewer)
	wantOK(t, err)
	if rv.State != airlock.GrantRevoked || rv.RevokedAt == nil || !rv.RevokedAt.Equal(now.Add(time.Second)) || rv.RevokedBy != reviewer {
		t.Fatalf("revoked grant = %+v", rv)
	}
	b.clock.Advance(time.Second)
	again, err := b.store.RevokeGrant(b.ctx, g.ID, "tok_other")
	wantOK(t, err)
	if !again.RevokedAt.Equal(*rv.RevokedAt) || again.RevokedBy != reviewer {
		t.Fatalf("revoked twice = %+v, want the first revocation kept", again)
	}
	live, err := b.store.ListGrants(b.ctx, store.GrantFilter{Live: true})
	wantOK(t, err)
	if len(live) != 1 || live[0].ID != cel.ID {
		t.Fatalf("live grants = %+v, want only the cel grant", live)
	}
	_, err = b.store.RevokeGrant(b.ctx, "grt_missing", reviewer)
	wantErr(t, err, airlock.CodeNotFound, "")
	_, err = b.store.GetGrant(b.ctx, "grt_missing")
	wantErr(t, err, airlock.CodeNotFound, "")

	var types []string
	for _, e := range b.events(t) {
		if e.Subject == g.ID {
			types = append(types, fmt.Sprintf("%s by %s", e.Type, e.Actor))
		}
	}
	if fmt.Sprint(types) != fmt.Sprintf("[%s by %s %s by %s]", airlock.EventGrantCreated, granter, airlock.EventGrantRevoked, reviewer) {
		t.Fatalf("grant events = %v", types)
	}
}

func (s *suite) grantUnknownInstance(t *testing.T) {
	b := s.setup(t)
	_, err := b.store.CreateGrant(b.ctx, store.NewGrantParams{Grant: airlock.Grant{
		ID: airlock.NewID(airlock.PrefixGrant), Tool: "shell.exec",
		Match: airlock.GrantMatch{Kind: airlock.MatchSameArguments, ArgumentsFingerprint: "x"}, InstanceID: "ins_missing",
		Validity: validity, CreatedBy: granter, CreatedByPrincipal: granterPrincipal,
	}, Lifetime: time.Hour})
	wantErr(t, err, airlock.CodeNotFound, "")
}

func (s *suite) unlessGranted(t *testing.T) {
	b := s.setup(t)
	unless := func(p *store.NewRequestParams) { p.UnlessGranted = &store.GrantScope{Principal: agentPrincipal} }
	wantPending(t, b.create(t, unless))

	// A live grant of the tool in the request's scope, whatever its
	// match: nothing is created, and the same key is free afterwards.
	g := b.grant(t, func(p *store.NewGrantParams) { p.Grant.Match.ArgumentsFingerprint = "other arguments" })
	p := b.params(unless)
	r, created, err := b.store.CreateRequest(b.ctx, p)
	if !errors.Is(err, store.ErrGrantMayCover) || created {
		t.Fatalf("create unless granted, with a grant of the tool = %s, created %v, %v; want ErrGrantMayCover", show(r), created, err)
	}
	_, err = b.store.GetRequest(b.ctx, p.Request.ID)
	wantErr(t, err, airlock.CodeNotFound, "")
	p.UnlessGranted, p.Grant = nil, &store.GrantUse{IDs: []string{g.ID}, ArgumentsFingerprint: grantFP(t), Principal: agentPrincipal}
	r, created, err = b.store.CreateRequest(b.ctx, p)
	wantOK(t, err)
	if !created {
		t.Fatal("the same key after ErrGrantMayCover was taken")
	}
	wantPending(t, r) // the grant's match is for other arguments
	// A replay is a replay, grants or not.
	p.Grant, p.UnlessGranted = nil, &store.GrantScope{Principal: agentPrincipal}
	again, created, err := b.store.CreateRequest(b.ctx, p)
	wantOK(t, err)
	if created || again.ID != r.ID {
		t.Fatalf("replay unless granted = %s, created %v; want the original %s", show(again), created, r.ID)
	}

	// Grants that could not cover it: the creator's own, another tool's,
	// another agent's, a revoked one, an expired one.
	_, err = b.store.RevokeGrant(b.ctx, g.ID, granter)
	wantOK(t, err)
	b.grant(t, func(p *store.NewGrantParams) { p.Grant.CreatedByPrincipal = agentPrincipal })
	b.grant(t, func(p *store.NewGrantParams) { p.Grant.Tool = "fs.read" })
	b.grant(t, func(p *store.NewGrantParams) { p.Grant.InstanceID, p.Grant.AgentID = "", ownerB })
	b.grant(t, func(p *store.NewGrantParams) { p.Lifetime = time.Second })
	b.clock.Advance(2 * time.Second)
	wantPending(t, b.create(t, unless))
	// An agent-wide grant covers the agent's instances.
	b.grant(t, func(p *store.NewGrantParams) { p.Grant.InstanceID, p.Grant.AgentID = "", b.inst.OwnerID })
	_, _, err = b.store.CreateRequest(b.ctx, b.params(unless))
	if !errors.Is(err, store.ErrGrantMayCover) {
		t.Fatalf("create unless granted, with an agent-wide grant = %v; want ErrGrantMayCover", err)
	}

	// No live instance: not_found, as any create.
	_, err = b.store.DeleteInstance(b.ctx, b.inst.ID, b.inst.OwnerID)
	wantOK(t, err)
	_, _, err = b.store.CreateRequest(b.ctx, b.params(unless))
	wantErr(t, err, airlock.CodeNotFound, "")

	// UnlessGranted goes with neither Grant nor a decision at creation.
	_, _, err = b.store.CreateRequest(b.ctx, b.params(unless, byGrant(t, g.ID)))
	wantErr(t, err, airlock.CodeInvalidRequest, "")
	_, _, err = b.store.CreateRequest(b.ctx, b.params(func(p *store.NewRequestParams) {
		p.UnlessGranted = &store.GrantScope{}
	}))
	wantErr(t, err, airlock.CodeInvalidRequest, "")
}

func (s *suite) grantCovers(t *testing.T) {
	b := s.setup(t)
	g := b.grant(t)
	r := b.create(t, byGrant(t, g.ID))
	wantByGrant(t, r, g.ID)
	if !r.Decision.DecidedAt.Equal(r.CreatedAt) {
		t.Fatalf("decided at %v, created at %v: want the same instant", r.Decision.DecidedAt, r.CreatedAt)
	}
	wantGrant(t, b.getGrant(t, g.ID), airlock.GrantLive, 2)
	evs := b.events(t)
	last := evs[len(evs)-2:]
	if last[0].Type != airlock.EventRequestCreated || last[1].Type != airlock.EventRequestApproved ||
		last[1].Actor != airlock.GrantActor(g.ID) || last[1].RequestID != r.ID {
		t.Fatalf("events = %+v, want request.created then request.approved by %s", last, airlock.GrantActor(g.ID))
	}
	_, err := b.claim(r.ID)
	wantOK(t, err)
}

func (s *suite) grantDoesNotCover(t *testing.T) {
	b := s.setup(t)
	g := b.grant(t)
	other := b.instance(t, ownerA)
	for name, mod := range map[string]func(*store.NewRequestParams){
		"other arguments": func(p *store.NewRequestParams) { p.Grant.ArgumentsFingerprint = "other" },
		"other tool":      func(p *store.NewRequestParams) { p.Request.Tool = "fs.read" },
		"other instance":  func(p *store.NewRequestParams) { p.Request.InstanceID = other.ID },
		"same principal":  func(p *store.NewRequestParams) { p.Grant.Principal = granterPrincipal },
		"unknown grant":   func(p *store.NewRequestParams) { p.Grant.IDs = []string{"grt_missing"} },
	} {
		r := b.create(t, byGrant(t, g.ID), mod)
		if r.State != airlock.StatePending || r.Decision != nil {
			t.Fatalf("%s: request = %s, want pending", name, show(r))
		}
	}
	wantGrant(t, b.getGrant(t, g.ID), airlock.GrantLive, 3)
}

func (s *suite) agentGrant(t *testing.T) {
	b := s.setup(t)
	g := b.grant(t, func(p *store.NewGrantParams) { p.Grant.InstanceID, p.Grant.AgentID = "", ownerA })
	other := b.instance(t, ownerA)
	wantByGrant(t, b.create(t, byGrant(t, g.ID), func(p *store.NewRequestParams) { p.Request.InstanceID = other.ID }), g.ID)
	theirs := b.instance(t, ownerB)
	r := b.create(t, byGrant(t, g.ID), func(p *store.NewRequestParams) {
		p.Request.InstanceID, p.Request.OwnerID = theirs.ID, ownerB
	})
	wantPending(t, r)
}

func (s *suite) firstLiveGrant(t *testing.T) {
	b := s.setup(t)
	dead := b.grant(t)
	_, err := b.store.RevokeGrant(b.ctx, dead.ID, reviewer)
	wantOK(t, err)
	live := b.grant(t)
	wantByGrant(t, b.create(t, byGrant(t, "grt_missing", dead.ID, live.ID)), live.ID)
}

func (s *suite) celGrant(t *testing.T) {
	b := s.setup(t)
	g := b.grant(t, func(p *store.NewGrantParams) {
		p.Grant.Match = airlock.GrantMatch{Kind: airlock.MatchCEL, Expression: "true"}
	})
	wantByGrant(t, b.create(t, byGrant(t, g.ID), func(p *store.NewRequestParams) { p.Grant.ArgumentsFingerprint = "other" }), g.ID)
}

func (s *suite) grantEnds(t *testing.T) {
	b := s.setup(t)
	used := b.grant(t, func(p *store.NewGrantParams) { p.Grant.Uses = new(2) })
	wantByGrant(t, b.create(t, byGrant(t, used.ID)), used.ID)
	wantByGrant(t, b.create(t, byGrant(t, used.ID)), used.ID)
	wantPending(t, b.create(t, byGrant(t, used.ID)))
	wantGrant(t, b.getGrant(t, used.ID), airlock.GrantUsedUp, 0)

	expiring := b.grant(t)
	b.clock.Advance(time.Hour - time.Microsecond)
	wantByGrant(t, b.create(t, byGrant(t, expiring.ID)), expiring.ID)
	b.clock.Advance(time.Microsecond)
	wantPending(t, b.create(t, byGrant(t, expiring.ID)))
	wantGrant(t, b.getGrant(t, expiring.ID), airlock.GrantExpired, 2)

	revoked := b.grant(t)
	_, err := b.store.RevokeGrant(b.ctx, revoked.ID, reviewer)
	wantOK(t, err)
	wantPending(t, b.create(t, byGrant(t, revoked.ID)))
	wantGrant(t, b.getGrant(t, revoked.ID), airlock.GrantRevoked, 3)

	tok := airlock.Token{ID: airlock.NewID(airlock.PrefixToken), Name: "alice", Role: airlock.RoleReviewer,
		Principal: granterPrincipal, Hash: airlock.HashSecret(airlock.NewTokenSecret())}
	wantOK(t, b.store.CreateToken(b.ctx, tok))
	orphan := b.grant(t, func(p *store.NewGrantParams) { p.Grant.CreatedBy = tok.ID })
	wantByGrant(t, b.create(t, byGrant(t, orphan.ID)), orphan.ID)
	_, err = b.store.RevokeToken(b.ctx, tok.ID, "tok_admin")
	wantOK(t, err)
	wantPending(t, b.create(t, byGrant(t, orphan.ID)))
	wantGrant(t, b.getGrant(t, orphan.ID), airlock.GrantCreatorRevoked, 2)

	gone := b.grant(t)
	_, err = b.store.DeleteInstance(b.ctx, b.inst.ID, ownerA)
	wantOK(t, err)
	wantGrant(t, b.getGrant(t, gone.ID), airlock.GrantInstanceDeleted, 3)
	live, err := b.store.ListGrants(b.ctx, store.GrantFilter{Live: true})
	wantOK(t, err)
	if len(live) != 0 {
		t.Fatalf("live grants = %+v, want none", live)
	}
}

func (s *suite) oidcGrantEnds(t *testing.T) {
	b := s.setup(t)
	b.oidcSignIn(t, adaOIDC)
	oidcGrant := func() airlock.Grant {
		return b.grant(t, func(p *store.NewGrantParams) {
			p.Grant.CreatedBy, p.Grant.CreatedByPrincipal = adaOIDC.Principal, adaOIDC.Principal
		})
	}
	before := oidcGrant()
	wantByGrant(t, b.create(t, byGrant(t, before.ID)), before.ID)
	// A token whose principal is hers is not her: its grant outlives
	// the end of her sessions.
	tok := airlock.Token{ID: airlock.NewID(airlock.PrefixToken), Name: "ada's token", Role: airlock.RoleReviewer,
		Principal: adaOIDC.Principal, Hash: airlock.HashSecret(airlock.NewTokenSecret())}
	wantOK(t, b.store.CreateToken(b.ctx, tok))
	byToken := b.grant(t, func(p *store.NewGrantParams) {
		p.Grant.CreatedBy, p.Grant.CreatedByPrincipal = tok.ID, adaOIDC.Principal
	})

	b.clock.Advance(time.Minute)
	_, err := b.store.DeleteWebSessions(b.ctx, store.WebSessionFilter{Principal: adaOIDC.Principal, Actor: "tok_admin"})
	wantOK(t, err)
	wantPending(t, b.create(t, byGrant(t, before.ID)))
	wantGrant(t, b.getGrant(t, before.ID), airlock.GrantCreatorRevoked, 2)
	wantGrant(t, b.getGrant(t, byToken.ID), airlock.GrantLive, 3)
	live, err := b.store.ListGrants(b.ctx, store.GrantFilter{Live: true})
	wantOK(t, err)
	if len(live) != 1 || live[0].ID != byToken.ID {
		t.Fatalf("live grants = %+v, want the token's only", live)
	}

	// Signed in again, a grant she makes then is live; her next sign-in
	// does not bring back the one that ended.
	b.clock.Advance(time.Minute)
	b.oidcSignIn(t, adaOIDC)
	after := oidcGrant()
	wantByGrant(t, b.create(t, byGrant(t, after.ID)), after.ID)
	wantGrant(t, b.getGrant(t, before.ID), airlock.GrantCreatorRevoked, 2)
}

func (s *suite) replayUsesNoGrant(t *testing.T) {
	b := s.setup(t)
	g := b.grant(t)
	p := b.params(byGrant(t, g.ID))
	r, created, err := b.store.CreateRequest(b.ctx, p)
	if err != nil || !created {
		t.Fatalf("CreateRequest = %v, %v", created, err)
	}
	wantByGrant(t, r, g.ID)
	again, created, err := b.store.CreateRequest(b.ctx, p)
	if err != nil || created {
		t.Fatalf("replay = %v, %v; want the original", created, err)
	}
	sameRequest(t, "replay", again, b.get(t, r.ID))
	wantGrant(t, b.getGrant(t, g.ID), airlock.GrantLive, 2)
	// A create on a deleted instance fails, and uses nothing either.
	_, err = b.store.DeleteInstance(b.ctx, b.inst.ID, ownerA)
	wantOK(t, err)
	_, _, err = b.store.CreateRequest(b.ctx, b.params(byGrant(t, g.ID)))
	wantErr(t, err, airlock.CodeNotFound, "")
}

func (s *suite) grantToolCallsOnly(t *testing.T) {
	b := s.setup(t)
	g := b.grant(t)
	_, _, err := b.store.CreateRequest(b.ctx, b.params(byGrant(t, g.ID), func(p *store.NewRequestParams) {
		p.Request.Kind, p.Request.Question = airlock.KindAgentRequest, &airlock.Question{}
	}))
	wantInvalid(t, err, "grant", "grants approve tool calls only, never a command or a question")
	wantGrant(t, b.getGrant(t, g.ID), airlock.GrantLive, 3)
}

func (s *suite) grantUsesRace(t *testing.T) {
	b := s.setup(t)
	const uses, creates = 5, 16
	g := b.grant(t, func(p *store.NewGrantParams) { p.Grant.Uses = new(uses) })
	rs := make([]airlock.Request, creates)
	errs := make([]error, creates)
	var wg sync.WaitGroup
	for i := range creates {
		wg.Go(func() { rs[i], _, errs[i] = b.store.CreateRequest(b.ctx, b.params(byGrant(t, g.ID))) })
	}
	wg.Wait()
	approved := 0
	for i, r := range rs {
		wantOK(t, errs[i])
		switch r.State {
		case airlock.StateApproved:
			wantByGrant(t, r, g.ID)
			approved++
		default:
			wantPending(t, r)
		}
	}
	if approved != uses {
		t.Fatalf("%d of %d creates approved by a grant of %d uses", approved, creates, uses)
	}
	wantGrant(t, b.getGrant(t, g.ID), airlock.GrantUsedUp, 0)
}
