package gate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"

	"github.com/airlockhq/airlock"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Action is what the gate does with a call of a tool.
type Action string

// The actions a rule may name.
const (
	// ActionGate asks Airlock for approval; the call runs only if approved.
	ActionGate Action = "gate"
	// ActionAllow forwards the call without asking.
	ActionAllow Action = "allow"
	// ActionDeny refuses the call without asking: an isError result.
	ActionDeny Action = "deny"
	// ActionAnnotations, as the default only, gates every tool that is not
	// annotated readOnlyHint and allows the rest.
	ActionAnnotations Action = "annotations"
)

// Rules select which tool calls need approval. The first rule whose Tool
// pattern matches the tool's name decides; a tool no rule matches gets
// Default. The zero value gates every tool not annotated read-only.
//
// A rules file is JSON:
//
//	{
//	  "default": "annotations",
//	  "timeout": "15m",
//	  "rules": [
//	    {"tool": "read_*", "action": "allow"},
//	    {"tool": "delete_*", "action": "gate", "timeout": "5m"},
//	    {"tool": "drop_database", "action": "deny"}
//	  ]
//	}
//
// Patterns use path.Match syntax (*, ?, [a-z]). Annotations come from the
// upstream server and are only hints: name the tools that must always be
// gated in rules rather than trusting readOnlyHint.
type Rules struct {
	// Default is the action for tools no rule matches: annotations (the
	// default), gate or allow.
	Default Action `json:"default,omitempty"`
	// Timeout is the decision window asked for gated calls, a Go or ISO
	// 8601 duration ("" takes the server's default, 15m).
	Timeout string `json:"timeout,omitempty"`
	// Rules are tried in order.
	Rules []Rule `json:"rules,omitempty"`
}

// Rule is one line of the rules: tools whose name matches Tool get Action.
type Rule struct {
	Tool   string `json:"tool"`
	Action Action `json:"action"`
	// Timeout overrides the rules' Timeout for these tools.
	Timeout string `json:"timeout,omitempty"`
}

// LoadRules reads and checks a rules file.
func LoadRules(file string) (Rules, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Rules{}, fmt.Errorf("rules: %w", err)
	}
	r, err := ParseRules(data)
	if err != nil {
		return Rules{}, fmt.Errorf("rules %s: %w", file, err)
	}
	return r, nil
}

// ParseRules decodes and checks rules. Unknown fields, duplicate keys and
// malformed patterns are errors: a typo in a rule must not silently let a
// dangerous tool through.
func ParseRules(data []byte) (Rules, error) {
	if err := airlock.CheckJSON("rules", data); err != nil {
		return Rules{}, err
	}
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		return Rules{}, fmt.Errorf("rules must be a JSON object (see docs/adapters.md for the format)")
	}
	var r Rules
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Rules{}, fmt.Errorf("%w (see docs/adapters.md for the format)", err)
	}
	return r, r.Validate()
}

// Validate checks the actions, patterns and timeouts.
func (r Rules) Validate() error {
	switch r.Default {
	case "", ActionAnnotations, ActionGate, ActionAllow:
	default:
		return fmt.Errorf("default %q: want annotations, gate or allow", r.Default)
	}
	if err := checkTimeout("timeout", r.Timeout); err != nil {
		return err
	}
	for i, rule := range r.Rules {
		if rule.Tool == "" {
			return fmt.Errorf("rules[%d]: tool is required (a name or a pattern such as \"write_*\")", i)
		}
		if _, err := path.Match(rule.Tool, ""); err != nil {
			return fmt.Errorf("rules[%d]: tool pattern %q: %v", i, rule.Tool, err)
		}
		switch rule.Action {
		case ActionGate, ActionAllow, ActionDeny:
		default:
			return fmt.Errorf("rules[%d] (%s): action %q: want gate, allow or deny", i, rule.Tool, rule.Action)
		}
		if err := checkTimeout(fmt.Sprintf("rules[%d].timeout", i), rule.Timeout); err != nil {
			return err
		}
	}
	return nil
}

func checkTimeout(field, s string) error {
	if s == "" {
		return nil
	}
	if d, err := airlock.ParseDuration(s); err != nil || d <= 0 {
		return fmt.Errorf("%s %q: want a positive duration such as 15m or PT15M", field, s)
	}
	return nil
}

// Decide returns the action for a call of tool and the decision window to
// ask for it.
func (r Rules) Decide(tool *mcp.Tool) (Action, string) {
	for _, rule := range r.Rules {
		if ok, _ := path.Match(rule.Tool, tool.Name); ok {
			timeout := rule.Timeout
			if timeout == "" {
				timeout = r.Timeout
			}
			return rule.Action, timeout
		}
	}
	switch r.Default {
	case ActionGate, ActionAllow:
		return r.Default, r.Timeout
	}
	if tool.Annotations != nil && tool.Annotations.ReadOnlyHint {
		return ActionAllow, r.Timeout
	}
	return ActionGate, r.Timeout
}
