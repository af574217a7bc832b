package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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
	// Reviewers and Approvals are kept for reviewer routing, which needs
	// teams; until then a file that sets them is refused.
	Reviewers []string
	Approvals int

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

// parseFile reads the rules of a policy file, refusing what is not a
// policy: too large, too deep, anchors and aliases (the YAML bombs), unknown
// or repeated keys, duplicate rule names, values of the wrong type.
func parseFile(data []byte) ([]Rule, error) {
	if len(data) > MaxFileBytes {
		return nil, &FileError{Msg: fmt.Sprintf("the file is %d bytes; a policy file may have at most %d", len(data), MaxFileBytes)}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &FileError{Msg: "not valid YAML: " + err.Error()}
	}
	if doc.Kind == 0 {
		return nil, &FileError{Msg: "the file is empty; write a top-level rules: list (an empty list asks a person for everything)"}
	}
	if err := checkTree(&doc, 0); err != nil {
		return nil, err
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, errAt(root, "the file must be a mapping with a top-level rules: list")
	}
	var list *yaml.Node
	err := eachKey(root, func(key string, k, v *yaml.Node) error {
		if key != "rules" {
			return errAt(k, "unknown key %q; a policy file has only rules:", key)
		}
		list = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	if list == nil {
		return nil, errAt(root, "missing rules: list")
	}
	if list.Kind != yaml.SequenceNode {
		if list.Tag == "!!null" {
			return nil, nil
		}
		return nil, errAt(list, "rules must be a list")
	}
	if len(list.Content) > MaxRules {
		return nil, errAt(list, "%d rules; a policy file may have at most %d", len(list.Content), MaxRules)
	}
	rules := make([]Rule, 0, len(list.Content))
	seen := make(map[string]int, len(list.Content))
	for i, n := range list.Content {
		r, err := parseRule(n)
		if err != nil {
			err.Index = i + 1
			return nil, err
		}
		if prev, ok := seen[r.Name]; ok {
			return nil, &FileError{Rule: r.Name, Index: i + 1, Line: n.Line, Column: n.Column,
				Msg: fmt.Sprintf("the name is already used by rule %d; rule names must be unique (they label decisions and metrics)", prev)}
		}
		seen[r.Name] = i + 1
		rules = append(rules, r)
	}
	return rules, nil
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
	var valid, timeout *yaml.Node
	err := eachKey(n, func(key string, k, v *yaml.Node) error {
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
			valid = v
			r.ValidFor, err = duration(v, key)
		case "timeout":
			timeout = v
			r.Timeout, err = duration(v, key)
		case "shadow":
			if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" {
				return errAt(v, "shadow must be true or false")
			}
			r.Shadow = v.Value == "true"
		case "reviewers":
			if v.Kind != yaml.SequenceNode {
				return errAt(v, "reviewers must be a list of principals")
			}
			for _, c := range v.Content {
				s, err := str(c, key, MaxNameBytes)
				if err != nil {
					return err
				}
				r.Reviewers = append(r.Reviewers, s)
			}
		case "approvals":
			if v.Kind != yaml.ScalarNode || v.Tag != "!!int" {
				return errAt(v, "approvals must be a whole number")
			}
			r.Approvals, err = strconv.Atoi(v.Value)
			if err != nil || r.Approvals < 1 {
				return errAt(v, "approvals must be a whole number of at least 1")
			}
		default:
			return errAt(k, "unknown key %q; a rule has name, match, action, note, valid_for, timeout, shadow, reviewers and approvals", key)
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
	case len(r.Reviewers) > 0 || r.Approvals > 0:
		// Kept for the teams work: refused, not ignored, so that nobody
		// believes a rule routes to reviewers when it does not.
		return fail(errAt(n, "reviewers and approvals need reviewer teams, which this version of Airlock does not have; remove them"))
	}
	return r, nil
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
