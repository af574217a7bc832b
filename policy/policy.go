// Package policy decides requests at creation by the rules of a policy
// file (docs/policy.md): YAML rules checked in order, each a CEL
// expression over the request, its instance and its agent, the first
// match deciding allow, deny or ask; no match asks a person. Rules are
// compiled once, at load; a rule that errors at evaluation asks, never
// allows.
package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// Set is a compiled policy file.
type Set struct {
	rules []compiledRule
	// Hash is the hex SHA-256 of the file's bytes, recorded on every
	// decision a rule of it makes.
	Hash string
	// evalTimeout is EvalTimeout, shorter in tests.
	evalTimeout time.Duration
	// reads is what any rule may read of the request's JSON documents.
	reads documents
	// groups are the file's reviewer groups, and memberOf each
	// principal's groups, sorted.
	groups   Groups
	memberOf map[string][]string
}

// Groups returns the file's reviewer groups.
func (s *Set) Groups() Groups { return s.groups }

// GroupsOf returns the groups the file lists principal in, sorted; nil
// when none. The slice is shared: callers must not change it.
func (s *Set) GroupsOf(principal string) []string { return s.memberOf[principal] }

type compiledRule struct {
	Rule
	compiled
	stats *ruleStats
}

// ruleStats counts what a rule did, across reloads that keep its name.
type ruleStats struct {
	matched, shadowMatched, errors atomic.Uint64
}

// Rules returns the set's rules, in order.
func (s *Set) Rules() []Rule {
	out := make([]Rule, len(s.rules))
	for i, r := range s.rules {
		out[i] = r.Rule
	}
	return out
}

// Compile parses and compiles a policy file. Its errors are *FileError,
// naming the rule and where it is.
func Compile(data []byte) (*Set, error) {
	rules, groups, err := parseFile(data)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	s := &Set{Hash: hex.EncodeToString(sum[:]), rules: make([]compiledRule, len(rules)), evalTimeout: EvalTimeout,
		groups: groups, memberOf: map[string][]string{}}
	for g, ps := range groups {
		for _, p := range ps {
			s.memberOf[p] = append(s.memberOf[p], g)
		}
	}
	for _, gs := range s.memberOf {
		slices.Sort(gs)
	}
	for i, r := range rules {
		c, err := compile(r)
		if err != nil {
			return nil, &FileError{Rule: r.Name, Index: i + 1, Line: r.Line, Column: r.Column, Msg: err.Error()}
		}
		s.rules[i] = compiledRule{Rule: r, compiled: c, stats: new(ruleStats)}
		s.reads = s.reads.or(c.reads)
	}
	return s, nil
}

// ReadFile reads a policy file, refusing one over MaxFileBytes without
// reading the rest of it.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, &FileError{Msg: fmt.Sprintf("%s is over %d bytes, the most a policy file may have", path, MaxFileBytes)}
	}
	return data, nil
}

// Load reads and compiles the policy file at path.
func Load(path string) (*Set, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Compile(data)
}

// Outcome is what a set of rules decides for one request, with what led
// there, for `airlock policy test`, logs and metrics.
type Outcome struct {
	// Rule is the rule that decided; empty when none matched (ask).
	Rule string
	// Action is what happens: allow, deny or ask.
	Action Action
	// Why explains an ask that a matching rule did not choose: the rule's
	// evaluation failed, or allow does not apply to this request.
	Why string
	// Shadowed names the shadow rules that matched on the way, each of
	// which would have decided had it not been a shadow.
	Shadowed []string
	// Errors are the evaluation errors on the way, by rule.
	Errors []RuleError
	// Verdict is the outcome as the provider applies it.
	Verdict airlock.PolicyVerdict
	// hits are the rules' counters (matched, shadow-matched, errors) that
	// count adds one to.
	hits []*atomic.Uint64
}

// count adds the outcome to its rules' counters.
func (o Outcome) count() {
	for _, h := range o.hits {
		h.Add(1)
	}
}

// RuleError is a rule whose evaluation failed.
type RuleError struct {
	Rule string
	Err  error
}

// Decide runs the rules in order against in. The first rule that matches
// decides, unless it is a shadow: that is recorded and the next rule is
// tried. A rule whose evaluation fails decides ask (a shadow rule's
// failure is recorded and passed over). allow never approves a command
// proposal or a question: such a request is asked.
//
// Decide counts nothing: the outcome's count does, once the request it
// judged is stored (Engine.Evaluate's Verdict.Record).
func (s *Set) Decide(ctx context.Context, in airlock.PolicyInput) Outcome {
	act := newActivation(ctx, in, s.reads)
	ctx, cancel := context.WithTimeout(ctx, s.evalTimeout)
	defer cancel()
	var out Outcome
	for i := range s.rules {
		r := &s.rules[i]
		matched, err := r.eval(ctx, act)
		if err != nil {
			out.hits = append(out.hits, &r.stats.errors)
			out.Errors = append(out.Errors, RuleError{Rule: r.Name, Err: err})
			if r.Shadow {
				continue
			}
			out.Rule, out.Action = r.Name, ActionAsk
			out.Why = "the rule's match failed to evaluate: " + err.Error()
			return out
		}
		if !matched {
			continue
		}
		if r.Shadow {
			out.hits = append(out.hits, &r.stats.shadowMatched)
			out.Shadowed = append(out.Shadowed, r.Name)
			continue
		}
		out.hits = append(out.hits, &r.stats.matched)
		out.Rule, out.Action = r.Name, r.Action
		switch r.Action {
		case ActionAllow:
			if !in.Request.MayApproveAtCreation() {
				out.Action = ActionAsk
				out.Why = "allow never applies to a command proposal or a question; a person decides"
				return out
			}
			out.Verdict.Initial = &airlock.InitialDecision{Status: airlock.StateApproved, Note: r.Note, Validity: r.ValidFor,
				DecidedBy: airlock.PolicyActor(r.Name), PolicyHash: s.Hash}
		case ActionDeny:
			out.Verdict.Initial = &airlock.InitialDecision{Status: airlock.StateDenied, Note: r.Note,
				DecidedBy: airlock.PolicyActor(r.Name), PolicyHash: s.Hash}
		case ActionAsk:
			out.Verdict.Window = r.Timeout
			out.Verdict.Reviewers, out.Verdict.Approvals = r.Reviewers, r.Approvals
			out.Verdict.EscalateTo, out.Verdict.EscalateAfter = r.EscalateTo, r.EscalateAfter
		}
		return out
	}
	out.Action = ActionAsk
	return out
}

func (r *compiledRule) eval(ctx context.Context, act interpreter.Activation) (bool, error) {
	var (
		v   ref.Val
		err error
	)
	if r.loops {
		v, _, err = r.prg.ContextEval(ctx, act)
	} else {
		v, _, err = r.prg.Eval(act)
	}
	if err != nil {
		return false, err
	}
	b, ok := v.Value().(bool)
	if !ok {
		// The checker saw to a boolean; a dyn value may still surprise.
		return false, fmt.Errorf("match yielded %v, not a boolean", v.Type())
	}
	return b, nil
}

// newActivation is the three variables as maps. The instance is read
// only if a rule looks at it, and then once; the arguments and context
// are decoded only if a rule may read them (reads).
func newActivation(ctx context.Context, in airlock.PolicyInput, reads documents) interpreter.Activation {
	r := in.Request
	args := r.Arguments
	if r.Proposal != nil && r.Proposal.Command != nil {
		args = r.Proposal.Command.Input
	}
	req := map[string]any{"tool": r.Tool, "kind": string(r.Kind), "title": r.Title, "timeout": in.Window, "reversibility": r.Reversibility}
	if r.Proposal != nil && r.Proposal.Command != nil {
		req["tool"] = r.Proposal.Command.Method
	}
	if reads.arguments {
		req["arguments"] = decodeJSON(args)
	}
	if reads.context {
		req["context"] = decodeJSON(r.Context)
	}
	scopes := in.Agent.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	agent := map[string]any{"id": in.Agent.ID, "name": in.Agent.Name, "principal": in.Agent.Principal, "scopes": scopes}
	var inst ref.Val
	loaded := false
	act, _ := interpreter.NewActivation(map[string]any{
		"request": types.DefaultTypeAdapter.NativeToValue(req),
		"agent":   types.DefaultTypeAdapter.NativeToValue(agent),
		"instance": func() ref.Val {
			if loaded {
				return inst
			}
			loaded = true
			if in.Instance == nil {
				inst = types.NewErr("the request's instance is not known here")
				return inst
			}
			i, err := in.Instance(ctx)
			if err != nil {
				inst = types.NewErr("reading the request's instance: %v", err)
				return inst
			}
			inst = types.DefaultTypeAdapter.NativeToValue(map[string]any{"id": i.ID, "name": i.Name, "metadata": decodeJSON(i.Metadata)})
			return inst
		},
	})
	return act
}

// decodeJSON turns a JSON document into the maps, lists, strings, numbers
// and booleans CEL reads; an absent document is an empty map, so that
// has(request.context.x) is false rather than an error.
func decodeJSON(raw json.RawMessage) any {
	if len(raw) == 0 {
		return map[string]any{}
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return map[string]any{}
	}
	return v
}
