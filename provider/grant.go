package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// Grants (docs/policy.md, "Grants"): standing approvals reviewers give.
// A new tool call that no policy rule decided, and that a live grant
// covers, is approved at creation by that grant, which counts the use in
// the same write (store.NewRequestParams.Grant).

// mayGrant refuses callers other than reviewers and admins.
func mayGrant(c airlock.Caller) error {
	if c.Role != airlock.RoleReviewer && c.Role != airlock.RoleAdmin {
		return forbidden("only reviewer and admin tokens make, list and revoke grants")
	}
	return nil
}

// errOwnGrant refuses a grant that would cover the granter's own calls.
func errOwnGrant() error {
	return forbidden("you cannot grant for requests of your own principal; ask another reviewer")
}

// CreateGrant makes a grant from POST /v1/grants. The scope (an instance
// or an agent token) must exist and belong to another principal than the
// caller's; a same_arguments grant needs the arguments it covers, a CEL
// expression must compile.
func (s *Service) CreateGrant(ctx context.Context, c airlock.Caller, in airlock.GrantInput) (airlock.Grant, error) {
	if err := mayGrant(c); err != nil {
		return airlock.Grant{}, err
	}
	if err := in.Validate(); err != nil {
		return airlock.Grant{}, err
	}
	st := s.storeFor(c)
	g := airlock.Grant{
		ID: airlock.NewID(airlock.PrefixGrant), Tool: in.Tool, InstanceID: in.InstanceID, AgentID: in.Agent,
		Uses: in.Uses, CreatedBy: c.ID, CreatedByPrincipal: principalOf(c.Token),
	}
	match, err := s.grantMatch(in.Match, in.Tool, in.Arguments, "arguments")
	if err != nil {
		return airlock.Grant{}, err
	}
	g.Match = match
	if g.Validity, err = s.limits.Validity(in.ValidFor); err != nil {
		return airlock.Grant{}, err
	}
	owner := in.Agent
	if in.InstanceID != "" {
		inst, err := st.GetInstance(ctx, in.InstanceID)
		if err != nil {
			return airlock.Grant{}, err
		}
		if inst.ClosedAt != nil {
			return airlock.Grant{}, airlock.NotFound("instance", in.InstanceID)
		}
		owner = inst.OwnerID
	}
	agent, err := st.GetToken(ctx, owner)
	switch {
	case airlock.ErrorCode(err) == airlock.CodeNotFound && in.Agent != "":
		return airlock.Grant{}, airlock.Invalid("agent", "agent %q is no token's ID", in.Agent)
	case err != nil && airlock.ErrorCode(err) != airlock.CodeNotFound:
		return airlock.Grant{}, err
	case err == nil && in.Agent != "" && agent.Role != airlock.RoleAgent:
		return airlock.Grant{}, airlock.Invalid("agent", "token %s is a %s token, not an agent's", in.Agent, agent.Role)
	case err == nil && principalOf(agent) == g.CreatedByPrincipal:
		return airlock.Grant{}, errOwnGrant()
	}
	lifetime, _ := in.Lifetime()
	return st.CreateGrant(ctx, store.NewGrantParams{Grant: g, Lifetime: lifetime})
}

// principalOf is a token's principal, its ID when it has none.
func principalOf(t airlock.Token) string {
	if t.Principal != "" {
		return t.Principal
	}
	return t.ID
}

// grantMatch turns a grant's match as submitted ("same_arguments", the
// default, or a CEL expression) into what the store keeps. field names
// where a same_arguments grant's arguments come from.
func (s *Service) grantMatch(match, tool string, args json.RawMessage, field string) (airlock.GrantMatch, error) {
	if match == "" || match == string(airlock.MatchSameArguments) {
		if len(args) == 0 || !json.Valid(args) {
			return airlock.GrantMatch{}, airlock.Invalid(field, "a same_arguments grant needs the arguments it covers, as a JSON object")
		}
		fp, err := airlock.ArgumentsFingerprint(tool, args)
		if err != nil {
			return airlock.GrantMatch{}, airlock.Invalid(field, "%v", err)
		}
		return airlock.GrantMatch{Kind: airlock.MatchSameArguments, ArgumentsFingerprint: fp}, nil
	}
	if s.expressions == nil {
		return airlock.GrantMatch{}, airlock.Invalid("match", "match must be \"same_arguments\": this server compiles no CEL expressions")
	}
	if _, err := s.expressions.Compile(match); err != nil {
		return airlock.GrantMatch{}, airlock.Invalid("match", "match is neither \"same_arguments\" nor a CEL expression that compiles: %v", err)
	}
	return airlock.GrantMatch{Kind: airlock.MatchCEL, Expression: match}, nil
}

// Grants lists grants, newest first.
func (s *Service) Grants(ctx context.Context, c airlock.Caller, f store.GrantFilter) ([]airlock.Grant, error) {
	if err := mayGrant(c); err != nil {
		return nil, err
	}
	return s.storeFor(c).ListGrants(ctx, f)
}

// Grant reads a grant.
func (s *Service) Grant(ctx context.Context, c airlock.Caller, id string) (airlock.Grant, error) {
	if err := mayGrant(c); err != nil {
		return airlock.Grant{}, err
	}
	return s.storeFor(c).GetGrant(ctx, id)
}

// RevokeGrant ends a grant; revoking twice keeps the first revocation.
func (s *Service) RevokeGrant(ctx context.Context, c airlock.Caller, id string) (airlock.Grant, error) {
	if err := mayGrant(c); err != nil {
		return airlock.Grant{}, err
	}
	return s.storeFor(c).RevokeGrant(ctx, id, c.ID)
}

// DecideGrant records a reviewer's decision as Decide does and, when the
// decision asks for one (in.Grant), makes a grant from the request
// approved: for its tool, on its instance (or for its agent), matching its
// arguments or an expression, each approval valid as long as this one.
// What the grant needs is checked before the decision is recorded; the
// grant is stored after it, so a grant that then fails to store (its
// instance deleted in between) leaves the approval recorded and answers
// the error.
func (s *Service) DecideGrant(ctx context.Context, c airlock.Caller, id string, in airlock.DecisionInput) (airlock.Request, *airlock.Grant, error) {
	if in.Grant == nil {
		r, err := s.Decide(ctx, c, id, in)
		return r, nil, err
	}
	if c.Role != airlock.RoleReviewer {
		return airlock.Request{}, nil, forbidden("only reviewer tokens decide requests")
	}
	if err := in.Validate(); err != nil {
		return airlock.Request{}, nil, err
	}
	gin := airlock.GrantInput{Uses: in.Grant.Uses, ExpiresIn: in.Grant.ExpiresIn}
	if gin.Uses != nil && (*gin.Uses < 1 || *gin.Uses > airlock.MaxGrantUses) {
		return airlock.Request{}, nil, airlock.Invalid("grant", "a grant's uses must be between 1 and %d, or left out for no limit until it expires", airlock.MaxGrantUses)
	}
	lifetime, err := gin.Lifetime()
	if err != nil {
		return airlock.Request{}, nil, err
	}
	st := s.storeFor(c)
	pre, err := s.read(ctx, c, id)
	if err != nil {
		return airlock.Request{}, nil, err
	}
	if pre.Kind != airlock.KindToolCall || !pre.MayApproveAtCreation() {
		return airlock.Request{}, nil, airlock.Invalid("grant", "grants cover tool calls only, never a command or a question; approve this one without a grant")
	}
	if len(pre.Reviewers) > 0 || pre.NeedsQuorum() {
		return airlock.Request{}, nil, airlock.Invalid("grant", "request %s is routed to reviewer groups or needs several approvals: a grant would let its calls through without them; approve this one without a grant", pre.ID)
	}
	match, err := s.grantMatch(in.Grant.Match, pre.Tool, pre.Arguments, "grant")
	if err != nil {
		return airlock.Request{}, nil, err
	}
	noGrant := in
	noGrant.Grant = nil
	r, err := s.Decide(ctx, c, id, noGrant)
	if err != nil {
		return r, nil, err
	}
	validity := r.Decision.ExpiresAt.Sub(r.Decision.DecidedAt)
	g := airlock.Grant{
		ID: airlock.NewID(airlock.PrefixGrant), Tool: r.Tool, Match: match, Uses: gin.Uses, Validity: validity,
		CreatedBy: c.ID, CreatedByPrincipal: principalOf(c.Token), RequestID: r.ID,
	}
	if in.Grant.Scope == "agent" {
		g.AgentID = r.OwnerID
	} else {
		g.InstanceID = r.InstanceID
	}
	made, err := st.CreateGrant(ctx, store.NewGrantParams{Grant: g, Lifetime: lifetime})
	if err != nil {
		return r, nil, fmt.Errorf("request %s was approved, but its grant was not made: %w", r.ID, err)
	}
	return r, &made, nil
}

// insertOrGrant stores a request no policy rule decided. A live grant may
// approve it before a person is asked, so the create is made unless a
// grant could cover it (store.NewRequestParams.UnlessGranted): when
// none could, as is usual, that one write is all, with no read of grants
// before it. When one could, the grants are read and matched, and the
// request is created again with those that cover it.
func (s *Service) insertOrGrant(ctx context.Context, st store.Store, c airlock.Caller, p store.NewRequestParams) (airlock.Request, bool, error) {
	if p.Initial != nil || p.Request.Kind != airlock.KindToolCall || !p.Request.MayApproveAtCreation() ||
		len(p.Request.Reviewers) > 0 || p.Request.NeedsQuorum() {
		// A request routed to groups or needing several approvals is
		// never approved by a grant: it would skip the group.
		return s.insert(ctx, st, p)
	}
	tool := p.Request.Tool
	if !s.grantedTools.has(tool) {
		unless := p
		unless.UnlessGranted = &store.GrantScope{Principal: principalOf(c.Token)}
		r, created, err := s.insert(ctx, st, unless)
		if !errors.Is(err, store.ErrGrantMayCover) {
			return r, created, err
		}
		s.grantedTools.add(tool)
	}
	use, live, err := s.grantsFor(ctx, st, c, p)
	if err != nil {
		return airlock.Request{}, false, err
	}
	if !live {
		s.grantedTools.remove(tool)
	}
	p.Grant = use
	return s.insert(ctx, st, p)
}

// toolSet is a set of tool names: those that had live grants when last
// looked at, whose creates go straight to reading grants rather than first
// trying a create that only a grant would stop. A name in it that no
// longer has grants costs one read, then leaves it; a name missing from it
// costs one refused write. Neither changes what is decided.
type toolSet struct {
	mu    sync.Mutex
	tools map[string]struct{}
}

// maxGrantedTools bounds the set; it starts over when full.
const maxGrantedTools = 1024

func (t *toolSet) has(tool string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.tools[tool]
	return ok
}

func (t *toolSet) add(tool string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tools == nil || len(t.tools) >= maxGrantedTools {
		t.tools = make(map[string]struct{})
	}
	t.tools[tool] = struct{}{}
}

func (t *toolSet) remove(tool string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.tools, tool)
}

// grantsFor finds the live grants that cover a new tool call of c's, best
// first: for its tool, in its scope, of another principal, whose match
// holds. It returns nil when none does; live tells whether the tool has
// live grants at all.
func (s *Service) grantsFor(ctx context.Context, st store.Store, c airlock.Caller, p store.NewRequestParams) (use *store.GrantUse, live bool, err error) {
	r := p.Request
	gs, err := st.ListGrants(ctx, store.GrantFilter{Live: true, Tool: r.Tool, Limit: airlock.MaxLiveGrantsPerTool})
	if err != nil || len(gs) == 0 {
		return nil, false, err
	}
	fp, err := airlock.ArgumentsFingerprint(r.Tool, r.Arguments)
	if err != nil {
		return nil, true, err
	}
	use = &store.GrantUse{Principal: principalOf(c.Token), ArgumentsFingerprint: fp}
	for _, g := range gs {
		if (g.InstanceID != r.InstanceID && g.AgentID != r.OwnerID) || g.CreatedByPrincipal == use.Principal {
			continue
		}
		switch g.Match.Kind {
		case airlock.MatchSameArguments:
			if g.Match.ArgumentsFingerprint != use.ArgumentsFingerprint {
				continue
			}
		case airlock.MatchCEL:
			if s.expressions == nil {
				s.log.Warn("a grant has an expression, and this server compiles none; it covers nothing", "grant", g.ID)
				continue
			}
			e, err := s.expressions.Compile(g.Match.Expression)
			if err != nil {
				s.log.Warn("a grant's expression no longer compiles; it covers nothing", "grant", g.ID, "err", err)
				continue
			}
			ok, err := e.Matches(ctx, airlock.PolicyInput{Request: r, Window: p.Window, Agent: c.Token,
				Instance: func(ctx context.Context) (airlock.Instance, error) { return st.GetInstance(ctx, r.InstanceID) }})
			if err != nil {
				s.log.Info("a grant's expression failed on a request; it does not cover it", "grant", g.ID, "request", r.ID, "err", err)
			}
			if !ok {
				continue
			}
		default:
			continue
		}
		use.IDs = append(use.IDs, g.ID)
	}
	if len(use.IDs) == 0 {
		return nil, true, nil
	}
	return use, true, nil
}
