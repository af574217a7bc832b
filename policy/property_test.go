package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// A small reference evaluator: random rule sets are built from atoms whose
// meaning is written out in Go, and the engine's outcome for random
// requests is compared with the reference's. CEL's && and || absorb an
// error when the other side decides (false && error is false), which the
// reference copies.

var errEval = errors.New("evaluation error")

type refReq struct {
	tool, kind, principal, instance string
	n                               *int    // request.arguments.n
	path                            *string // request.arguments.path
	question, command               bool
}

type expr interface {
	cel() string
	eval(r refReq) (bool, error)
}

type atom struct {
	src string
	fn  func(refReq) (bool, error)
}

func (a atom) cel() string                   { return a.src }
func (a atom) eval(r refReq) (bool, error)   { return a.fn(r) }
func (n not) cel() string                    { return "!(" + n.x.cel() + ")" }
func (b binary) cel() string                 { return "(" + b.l.cel() + " " + b.op + " " + b.r.cel() + ")" }
func (n not) eval(r refReq) (bool, error)    { v, err := n.x.eval(r); return !v, err }
func (b binary) eval(r refReq) (bool, error) { return b.apply(r) }

type not struct{ x expr }

type binary struct {
	op   string
	l, r expr
}

func (b binary) apply(req refReq) (bool, error) {
	lv, le := b.l.eval(req)
	rv, re := b.r.eval(req)
	if b.op == "&&" {
		if (le == nil && !lv) || (re == nil && !rv) {
			return false, nil
		}
		if le != nil || re != nil {
			return false, errEval
		}
		return true, nil
	}
	if (le == nil && lv) || (re == nil && rv) {
		return true, nil
	}
	if le != nil || re != nil {
		return false, errEval
	}
	return false, nil
}

var (
	tools      = []string{"read_file", "shell", "refund", "deploy"}
	kinds      = []string{"tool_call", "agent_request", "work_change"}
	principals = []string{"alice", "bob"}
	instances  = []string{"laptop", "ci"}
	paths      = []string{"/tmp/a", "/etc/passwd", "tmp"}
)

func randomAtom(rng *rand.Rand) expr {
	switch rng.IntN(7) {
	case 0:
		t := tools[rng.IntN(len(tools))]
		return atom{fmt.Sprintf("request.tool == %q", t), func(r refReq) (bool, error) { return r.tool == t, nil }}
	case 1:
		k := rng.IntN(100)
		return atom{fmt.Sprintf("request.arguments.n < %d", k), func(r refReq) (bool, error) {
			if r.n == nil {
				return false, errEval
			}
			return *r.n < k, nil
		}}
	case 2:
		return atom{"has(request.arguments.n)", func(r refReq) (bool, error) { return r.n != nil, nil }}
	case 3:
		k := kinds[rng.IntN(len(kinds))]
		return atom{fmt.Sprintf("request.kind == %q", k), func(r refReq) (bool, error) { return r.kind == k, nil }}
	case 4:
		p := principals[rng.IntN(len(principals))]
		return atom{fmt.Sprintf("agent.principal == %q", p), func(r refReq) (bool, error) { return r.principal == p, nil }}
	case 5:
		return atom{`request.arguments.path.startsWith("/tmp")`, func(r refReq) (bool, error) {
			if r.path == nil {
				return false, errEval
			}
			return strings.HasPrefix(*r.path, "/tmp"), nil
		}}
	default:
		n := instances[rng.IntN(len(instances))]
		return atom{fmt.Sprintf("instance.name == %q", n), func(r refReq) (bool, error) { return r.instance == n, nil }}
	}
}

func randomExpr(rng *rand.Rand, depth int) expr {
	if depth == 0 || rng.IntN(3) == 0 {
		return randomAtom(rng)
	}
	switch rng.IntN(3) {
	case 0:
		return not{randomExpr(rng, depth-1)}
	case 1:
		return binary{"&&", randomExpr(rng, depth-1), randomExpr(rng, depth-1)}
	default:
		return binary{"||", randomExpr(rng, depth-1), randomExpr(rng, depth-1)}
	}
}

type refRule struct {
	name     string
	match    expr
	action   Action
	shadow   bool
	validFor time.Duration
	timeout  time.Duration
}

// reference is the rules' meaning, written out: in order, the first
// non-shadow rule that matches or errors decides; an error asks; allow on
// a command or a question asks; no match asks.
func reference(rules []refRule, r refReq) (rule string, action Action, shadowed []string) {
	for _, rl := range rules {
		m, err := rl.match.eval(r)
		switch {
		case err != nil && rl.shadow:
			continue
		case err != nil:
			return rl.name, ActionAsk, shadowed
		case !m:
			continue
		case rl.shadow:
			shadowed = append(shadowed, rl.name)
			continue
		case rl.action == ActionAllow && (r.question || r.command):
			return rl.name, ActionAsk, shadowed
		}
		return rl.name, rl.action, shadowed
	}
	return "", ActionAsk, shadowed
}

func (rl refRule) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  - name: %q\n    match: %q\n    action: %s\n", rl.name, rl.match.cel(), rl.action)
	if rl.shadow {
		b.WriteString("    shadow: true\n")
	}
	if rl.validFor > 0 {
		fmt.Fprintf(&b, "    valid_for: %s\n", rl.validFor)
	}
	if rl.timeout > 0 {
		fmt.Fprintf(&b, "    timeout: %s\n", rl.timeout)
	}
	return b.String()
}

func (r refReq) input() airlock.PolicyInput {
	args := map[string]any{}
	if r.n != nil {
		args["n"] = *r.n
	}
	if r.path != nil {
		args["path"] = *r.path
	}
	raw, _ := json.Marshal(args)
	in := airlock.PolicyInput{
		Request: airlock.Request{ID: "apr_p", Kind: airlock.Kind(r.kind), Tool: r.tool, Arguments: raw},
		Window:  time.Minute,
		Agent:   airlock.Token{ID: "tok_p", Principal: r.principal},
		Instance: func(context.Context) (airlock.Instance, error) {
			return airlock.Instance{ID: "ins_p", Name: r.instance}, nil
		},
	}
	if r.question {
		in.Request.Question = &airlock.Question{}
	}
	if r.command {
		in.Request.Proposal = &airlock.Proposal{Mode: airlock.ProposalCommand, Command: &airlock.Command{Method: r.tool, Input: raw}}
	}
	return in
}

func randomRequest(rng *rand.Rand) refReq {
	r := refReq{
		tool: tools[rng.IntN(len(tools))], kind: kinds[rng.IntN(len(kinds))],
		principal: principals[rng.IntN(len(principals))], instance: instances[rng.IntN(len(instances))],
	}
	if rng.IntN(4) > 0 {
		n := rng.IntN(100)
		r.n = &n
	}
	if rng.IntN(3) > 0 {
		p := paths[rng.IntN(len(paths))]
		r.path = &p
	}
	switch rng.IntN(5) {
	case 0:
		r.question = true
	case 1:
		r.command = true
	}
	return r
}

// TestAgainstReference compares 1,000 random requests, each against its
// own random rule set, with the reference evaluator: no divergence in the
// rule that decides, the outcome, what is recorded, or the shadows.
func TestAgainstReference(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 20))
	actions := []Action{ActionAllow, ActionDeny, ActionAsk}
	autoApproved := 0
	for i := range 1000 {
		rules := make([]refRule, 1+rng.IntN(6))
		var src strings.Builder
		src.WriteString("rules:\n")
		for j := range rules {
			rl := refRule{name: fmt.Sprintf("r%d", j), match: randomExpr(rng, 3), action: actions[rng.IntN(3)], shadow: rng.IntN(4) == 0}
			switch {
			case rl.action == ActionAllow && rng.IntN(2) == 0:
				rl.validFor = time.Duration(1+rng.IntN(10)) * time.Minute
			case rl.action == ActionAsk && rng.IntN(2) == 0:
				rl.timeout = time.Duration(1+rng.IntN(10)) * time.Second
			}
			rules[j] = rl
			src.WriteString(rl.yaml())
		}
		s, err := Compile([]byte(src.String()))
		if err != nil {
			t.Fatalf("seed %d case %d: Compile: %v\n%s", seed, i, err, src.String())
		}
		req := randomRequest(rng)
		out := s.Decide(t.Context(), req.input())
		rule, action, shadowed := reference(rules, req)
		if out.Rule != rule || out.Action != action || !slices.Equal(out.Shadowed, shadowed) {
			t.Fatalf("seed %d case %d: engine %s by %q (shadows %v), reference %s by %q (shadows %v)\nrequest %+v\n%s",
				seed, i, out.Action, out.Rule, out.Shadowed, action, rule, shadowed, req, src.String())
		}
		d := out.Verdict.Initial
		switch action {
		case ActionAllow:
			autoApproved++
			if req.question || req.command {
				t.Fatalf("case %d: a command or question was approved", i)
			}
			want := rules[slices.IndexFunc(rules, func(r refRule) bool { return r.name == rule })]
			if d == nil || d.Status != airlock.StateApproved || d.DecidedBy != "policy:"+rule || d.Validity != want.validFor || d.PolicyHash != s.Hash {
				t.Fatalf("seed %d case %d: allow recorded as %+v", seed, i, d)
			}
		case ActionDeny:
			if d == nil || d.Status != airlock.StateDenied || d.DecidedBy != "policy:"+rule {
				t.Fatalf("seed %d case %d: deny recorded as %+v", seed, i, d)
			}
		case ActionAsk:
			if d != nil {
				t.Fatalf("seed %d case %d: ask recorded a decision %+v", seed, i, d)
			}
		}
	}
	t.Logf("seed %d: 1,000 cases, %d approved at creation", seed, autoApproved)
}
