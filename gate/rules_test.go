package gate_test

import (
	"strings"
	"testing"

	"github.com/airlockhq/airlock/gate"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestRulesDecide(t *testing.T) {
	t.Parallel()
	readOnly := &mcp.Tool{Name: "read_file", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}
	plain := &mcp.Tool{Name: "write_file"}
	destructive := &mcp.Tool{Name: "drop_table", Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true)}}
	rules, err := gate.ParseRules([]byte(`{
		"timeout": "10m",
		"rules": [
			{"tool": "read_secrets", "action": "gate", "timeout": "2m"},
			{"tool": "read_*", "action": "allow"},
			{"tool": "drop_*", "action": "deny"},
			{"tool": "write_?ile", "action": "gate"}
		]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		rules   gate.Rules
		tool    *mcp.Tool
		action  gate.Action
		timeout string
	}{
		{gate.Rules{}, readOnly, gate.ActionAllow, ""},
		{gate.Rules{}, plain, gate.ActionGate, ""},
		{gate.Rules{}, destructive, gate.ActionGate, ""},
		{gate.Rules{Default: gate.ActionGate}, readOnly, gate.ActionGate, ""},
		{gate.Rules{Default: gate.ActionAllow}, plain, gate.ActionAllow, ""},
		{rules, &mcp.Tool{Name: "read_secrets", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, gate.ActionGate, "2m"},
		{rules, readOnly, gate.ActionAllow, "10m"},
		{rules, destructive, gate.ActionDeny, "10m"},
		{rules, plain, gate.ActionGate, "10m"},
		{rules, &mcp.Tool{Name: "other"}, gate.ActionGate, "10m"},
	}
	for _, tt := range tests {
		a, to := tt.rules.Decide(tt.tool)
		if a != tt.action || to != tt.timeout {
			t.Errorf("%+v on %s: %s %q, want %s %q", tt.rules, tt.tool.Name, a, to, tt.action, tt.timeout)
		}
	}
}

// TestParseRulesRefuses: a typo must not silently let a tool through.
func TestParseRulesRefuses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{`{"rules":[{"tool":"x","action":"alow"}]}`, `action "alow"`},
		{`{"rules":[{"tool":"x","acton":"allow"}]}`, `unknown field "acton"`},
		{`{"rules":[{"tool":"[x","action":"allow"}]}`, "pattern"},
		{`{"rules":[{"action":"allow"}]}`, "tool is required"},
		{`{"default":"deny"}`, `default "deny"`},
		{`{"timeout":"soon"}`, `timeout "soon"`},
		{`{"rules":[{"tool":"x","action":"gate","timeout":"-1m"}]}`, "rules[0].timeout"},
		{`{"default":"allow","default":"gate"}`, "duplicate"},
		{`[]`, "object"},
	} {
		_, err := gate.ParseRules([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseRules(%s) = %v, want an error mentioning %q", tt.in, err, tt.want)
		}
	}
}
