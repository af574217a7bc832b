package policy

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/airlockhq/airlock"
	"go.yaml.in/yaml/v3"
)

// Limits of a policy file: what a policy needs is small, and a file past
// these is a mistake or an attack (a YAML bomb) rather than a policy.
const (
	// MaxFileBytes is the largest policy file read.
	MaxFileBytes = 1 << 20
	// MaxDepth is the deepest nesting of YAML collections in a file.
	MaxDepth = 16
	// MaxRules is the most rules a file may have.
	MaxRules = 1000
	// MaxNameBytes bounds a rule's name, which labels metrics and decisions.
	MaxNameBytes = 100
	// MaxMatchBytes bounds a rule's CEL expression.
	MaxMatchBytes = 4096
	// MaxNoteBytes bounds a rule's note, as a reviewer's is bounded.
	MaxNoteBytes = 4096
	// MaxGroups is the most groups a file may configure.
	MaxGroups = 1000
	// MaxGroupMembers is the most principals one group may list.
	MaxGroupMembers = 10000
)

// Action is what a matching rule does.
type Action string

// The actions of a rule.
const (
	ActionAllow Action = "allow"
	ActionDeny  Action = "deny"
	ActionAsk   Action = "ask"
)

// Rule is one rule as written in the file. Line and Column are where it
// starts, for messages.
type Rule struct {
	Name     string
	Match    string
	Action   Action
	Note     string
	ValidFor time.Duration // allow: how long the approval lasts (0: the server's default)
	Timeout  time.Duration // ask: a shorter decision window (0: the request's own)
	Shadow   bool
	// Reviewers are the groups whose members alone may decide what an ask
	// rule asks (docs/teams.md); empty: any reviewer. Approvals is how many
	// approvals from distinct principals it needs (0: one decision).
	Reviewers []string
	Approvals int
	// EscalateTo are the groups the request is widened to when it is still
	// pending EscalateAfter after it was made (both or neither).
	EscalateTo    []string
	EscalateAfter time.Duration

	Line, Column int
}

// FileError is a policy file refused: where, and why.
type FileError struct {
	Rule         string // the rule's name, when the error is in a rule that has one
	Index        int    // the rule's position in the list, from 1; 0 when not in a rule
	Line, Column int    // where in the file, from 1; 0 when unknown
	Msg          string
}

func (e *FileError) Error() string {
	var where []string
	if e.Index > 0 {
		where = append(where, fmt.Sprintf("rule %d", e.Index))
	}
	if e.Line > 0 {
		where = append(where, fmt.Sprintf("line %d, column %d", e.Line, e.Column))
	}
	switch {
	case e.Rule != "":
		return fmt.Sprintf("rule %q (%s): %s", e.Rule, strings.Join(where, ", "), e.Msg)
	case len(where) > 0:
		return strings.Join(where, ", ") + ": " + e.Msg
	}
	return e.Msg
}

func errAt(n *yaml.Node, format string, args ...any) *FileError {
	return &FileError{Line: n.Line, Column: n.Column, Msg: fmt.Sprintf(format, args...)}
}

// Groups are a policy file's reviewer groups: each group's name and the
// principals in it. A group listed with no principals gets its members
// from sign-in (the identity provider's groups claim) only.
type Groups map[string][]string

// parseFile reads the rules and groups of a policy file, refusing what is
// not a policy: too large, too deep, anchors and aliases (the YAML bombs),
// unknown or repeated keys, duplicate rule names, values of the wrong
// type, groups with bad names, rules naming groups the file does not
// list, and rules needing more approvals than their groups have members.
func parseFile(data []byte) ([]Rule, Groups, error) {
	rules, groups, err := parseDoc(data)
	if err != nil {
		return nil, nil, err
	}
	for i, r := range rules {
		if err := checkRouting(r, groups); err != nil {
			err.Rule, err.Index = r.Name, i+1
			return nil, nil, err
		}
	}
	return rules, groups, nil
}

// checkRouting refuses a rule whose reviewers name a group the file does
// not list, or whose approvals exceed the distinct principals of its
// groups, when every one of them lists its members.
func checkRouting(r Rule, groups Groups) *FileError {
	at := func(format string, args ...any) *FileError {
		return &FileError{Line: r.Line, Column: r.Column, Msg: fmt.Sprintf(format, args...)}
	}
	for _, g := range r.EscalateTo {
		if _, ok := groups[g]; !ok {
			return at("escalate_to names group %q, which the file's groups: does not list; list it there (with no members when they come from sign-in)", g)
		}
	}
	members := map[string]bool{}
	fromSignIn := false
	for _, g := range r.Reviewers {
		ps, ok := groups[g]
		if !ok {
			return at("reviewers names group %q, which the file's groups: does not list; list it there (with no members when they come from sign-in)", g)
		}
		fromSignIn = fromSignIn || len(ps) == 0
		for _, p := range ps {
			members[p] = true
		}
	}
	if r.Approvals > 1 && len(r.Reviewers) > 0 && !fromSignIn && r.Approvals > len(members) {
		return at("approvals is %d, but its groups (%s) have %d members: the request could never be approved", r.Approvals, strings.Join(r.Reviewers, ", "), len(members))
	}
	return nil
}

func parseDoc(data []byte) ([]Rule, Groups, error) {
	if len(data) > MaxFileBytes {
		return nil, nil, &FileError{Msg: fmt.Sprintf("the file is %d bytes; a policy file may have at most %d", len(data), MaxFileBytes)}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, &FileError{Msg: "not valid YAML: " + err.Error()}
	}
	if doc.Kind == 0 {
		return nil, nil, &FileError{Msg: "the file is empty; write a top-level rules: list (an empty list asks a person for everything)"}
	}
	if err := checkTree(&doc, 0); err != nil {
		return nil, nil, err
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, nil, errAt(root, "the file must be a mapping with a top-level rules: list")
	}
	var (
		list   *yaml.Node
		groups Groups
	)
	err := eachKey(root, func(key string, k, v *yaml.Node) error {
		switch key {
		case "rules":
			list = v
			return nil
		case "groups":
			var err error
			groups, err = parseGroups(v)
			return err
		}
		return errAt(k, "unknown key %q; a policy file has rules: and groups:", key)
	})
	if err != nil {
		return nil, nil, err
	}
	if list == nil {
		return nil, nil, errAt(root, "missing rules: list")
	}
	if list.Kind != yaml.SequenceNode {
		if list.Tag == "!!null" {
			return nil, groups, nil
		}
		return nil, nil, errAt(list, "rules must be a list")
	}
	if len(list.Content) > MaxRules {
		return nil, nil, errAt(list, "%d rules; a policy file may have at most %d", len(list.Content), MaxRules)
	}
	rules := make([]Rule, 0, len(list.Content))
	seen := make(map[string]int, len(list.Content))
	for i, n := range list.Content {
		r, err := parseRule(n)
		if err != nil {
			err.Index = i + 1
			return nil, nil, err
		}
		if prev, ok := seen[r.Name]; ok {
			return nil, nil, &FileError{Rule: r.Name, Index: i + 1, Line: n.Line, Column: n.Column,
				Msg: fmt.Sprintf("the name is already used by rule %d; rule names must be unique (they label decisions and metrics)", prev)}
		}
		seen[r.Name] = i + 1
		rules = append(rules, r)
	}
	return rules, groups, nil
}

// parseGroups reads the groups: mapping, each group's name to a list of
// principals.
func parseGroups(n *yaml.Node) (Groups, error) {
	if n.Kind != yaml.MappingNode {
		return nil, errAt(n, "groups must be a mapping of group names to lists of principals")
	}
	if len(n.Content)/2 > MaxGroups {
		return nil, errAt(n, "%d groups; a policy file may have at most %d", len(n.Content)/2, MaxGroups)
	}
	groups := Groups{}
	err := eachKey(n, func(name string, k, v *yaml.Node) error {
		if err := airlock.CheckGroupName(name); err != nil {
			return errAt(k, "%v", err)
		}
		ps := []string{}
		switch {
		case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
		case v.Kind != yaml.SequenceNode:
			return errAt(v, "group %q must be a list of principals ([] when its members come from sign-in)", name)
		case len(v.Content) > MaxGroupMembers:
			return errAt(v, "group %q has %d principals; at most %d", name, len(v.Content), MaxGroupMembers)
		}
		seen := map[string]bool{}
		for _, c := range v.Content {
			p, err := str(c, "a principal", airlock.MaxPrincipalLen)
			if err != nil {
				return err
			}
			if p == "" || strings.IndexFunc(p, unicode.IsControl) >= 0 {
				return errAt(c, "group %q: principal %q is empty or has a control character", name, p)
			}
			if seen[p] {
				return errAt(c, "group %q lists %q twice", name, p)
			}
			seen[p] = true
			ps = append(ps, p)
		}
		groups[name] = ps
		return nil
	})
	return groups, err
}

// checkTree refuses anchors, aliases and nesting deeper than MaxDepth.
func checkTree(n *yaml.Node, depth int) error {
	if depth > MaxDepth {
		return errAt(n, "nested more than %d levels deep", MaxDepth)
	}
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return errAt(n, "anchors and aliases (& and *) are not allowed in a policy file; write each rule out")
	}
	for _, c := range n.Content {
		if err := checkTree(c, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// eachKey calls fn for each key of mapping n, refusing repeated keys and
// keys that are not strings.
func eachKey(n *yaml.Node, fn func(key string, k, v *yaml.Node) error) error {
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			return errAt(k, "keys must be plain strings")
		}
		if seen[k.Value] {
			return errAt(k, "key %q appears twice", k.Value)
		}
		seen[k.Value] = true
		if err := fn(k.Value, k, v); err != nil {
			return err
		}
	}
	return nil
}

func parseRule(n *yaml.Node) (Rule, *FileError) {
	r := Rule{Line: n.Line, Column: n.Column}
	if n.Kind != yaml.MappingNode {
		return r, errAt(n, "a rule must be a mapping with name, match and action")
	}
	// at holds where each key stood, for the checks across keys below.
	at := map[string]*yaml.Node{}
	err := eachKey(n, func(key string, k, v *yaml.Node) error {
		at[key] = v
		var err error
		switch key {
		case "name":
			r.Name, err = str(v, key, MaxNameBytes)
		case "match":
			r.Match, err = str(v, key, MaxMatchBytes)
		case "action":
			var a string
			a, err = str(v, key, 10)
			r.Action = Action(a)
			if err == nil && r.Action != ActionAllow && r.Action != ActionDeny && r.Action != ActionAsk {
				err = errAt(v, "action must be allow, deny or ask, not %q", a)
			}
		case "note":
			r.Note, err = str(v, key, MaxNoteBytes)
		case "valid_for":
			r.ValidFor, err = duration(v, key)
		case "timeout":
			r.Timeout, err = duration(v, key)
		case "shadow":
			if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" {
				return errAt(v, "shadow must be true or false")
			}
			r.Shadow = v.Value == "true"
		case "reviewers":
			r.Reviewers, err = groupList(v, key)
		case "escalate_to":
			r.EscalateTo, err = groupList(v, key)
		case "escalate_after":
			r.EscalateAfter, err = duration(v, key)
			if err == nil && r.EscalateAfter < time.Second {
				err = errAt(v, "escalate_after must be at least 1s")
			}
		case "approvals":
			if v.Kind != yaml.ScalarNode || v.Tag != "!!int" {
				return errAt(v, "approvals must be a whole number")
			}
			r.Approvals, err = strconv.Atoi(v.Value)
			if err != nil || r.Approvals < 1 || r.Approvals > airlock.MaxApprovals {
				return errAt(v, "approvals must be a whole number from 1 to %d", airlock.MaxApprovals)
			}
		default:
			return errAt(k, "unknown key %q; a rule has name, match, action, note, valid_for, timeout, shadow, reviewers, approvals, escalate_after and escalate_to", key)
		}
		return err
	})
	fail := func(e error) (Rule, *FileError) {
		var fe *FileError
		if !errors.As(e, &fe) {
			fe = errAt(n, "%s", e.Error())
		}
		fe.Rule = r.Name
		return r, fe
	}
	valid, timeout, reviewers, approvals := at["valid_for"], at["timeout"], at["reviewers"], at["approvals"]
	escalateTo, escalateAfter := at["escalate_to"], at["escalate_after"]
	switch {
	case err != nil:
		return fail(err)
	case r.Name == "":
		return fail(errAt(n, "a rule needs a name"))
	case r.Match == "":
		return fail(errAt(n, "a rule needs a match expression (write match: true to match everything)"))
	case r.Action == "":
		return fail(errAt(n, "a rule needs an action: allow, deny or ask"))
	case valid != nil && r.Action != ActionAllow:
		return fail(errAt(valid, "valid_for applies to allow only"))
	case timeout != nil && r.Action != ActionAsk:
		return fail(errAt(timeout, "timeout applies to ask only"))
	case reviewers != nil && r.Action != ActionAsk:
		return fail(errAt(reviewers, "reviewers applies to ask only: allow and deny decide without a person"))
	case approvals != nil && r.Action != ActionAsk:
		return fail(errAt(approvals, "approvals applies to ask only: allow and deny decide without a person"))
	case (escalateTo == nil) != (escalateAfter == nil):
		return fail(errAt(n, "escalate_to and escalate_after go together: whom to widen the request to, and after how long"))
	case escalateTo != nil && reviewers == nil:
		return fail(errAt(escalateTo, "escalate_to widens a request routed to reviewers; set reviewers too"))
	}
	for _, g := range r.EscalateTo {
		if slices.Contains(r.Reviewers, g) {
			return fail(errAt(escalateTo, "escalate_to names %q, which reviewers already has", g))
		}
	}
	return r, nil
}

// groupList reads a group name or a list of them: at most
// airlock.MaxRoutedGroups, each a valid name, none twice.
func groupList(v *yaml.Node, key string) ([]string, error) {
	names := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		names = v.Content
	}
	if len(names) == 0 || len(names) > airlock.MaxRoutedGroups {
		return nil, errAt(v, "%s must name from 1 to %d groups", key, airlock.MaxRoutedGroups)
	}
	var out []string
	for _, c := range names {
		g, err := str(c, "a reviewer group", airlock.MaxGroupNameLen)
		if err != nil {
			return nil, err
		}
		if err := airlock.CheckGroupName(g); err != nil {
			return nil, errAt(c, "%v", err)
		}
		if slices.Contains(out, g) {
			return nil, errAt(c, "%s names %q twice", key, g)
		}
		out = append(out, g)
	}
	return out, nil
}

func str(v *yaml.Node, key string, limit int) (string, error) {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		return "", errAt(v, "%s must be a string", key)
	}
	if len(v.Value) > limit {
		return "", errAt(v, "%s is %d bytes; at most %d", key, len(v.Value), limit)
	}
	return v.Value, nil
}

func duration(v *yaml.Node, key string) (time.Duration, error) {
	s, err := str(v, key, 64)
	if err != nil {
		return 0, err
	}
	d, err := airlock.ParseDuration(s)
	if err != nil {
		return 0, errAt(v, "%s: %v (write e.g. 2m or PT2M)", key, err)
	}
	return d, nil
}
