package provider_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/provider"
)

// mcpInput returns a valid advisory approval_request input changed by mod.
func mcpInput(mod func(*provider.MCPRequestInput)) provider.MCPRequestInput {
	in := provider.MCPRequestInput{
		Kind: airlock.KindAgentRequest, Title: "Which colour?", IdempotencyKey: "key-1",
		Proposal: &airlock.Proposal{Mode: airlock.ProposalAdvisory},
	}
	if mod != nil {
		mod(&in)
	}
	return in
}

func move(input string) *airlock.Proposal {
	return &airlock.Proposal{Mode: airlock.ProposalCommand, Command: &airlock.Command{
		Method: airlock.MethodWorkMove, Input: json.RawMessage(input)}}
}

func minutes(n int) *int { return &n }

// TestMCPRequestInputValidate reads like the MCP brief: each row is one of
// its rules, and a refusal names the field and the rule.
func TestMCPRequestInputValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		mod   func(*provider.MCPRequestInput)
		field string // "" when the input is valid
		msg   string
	}{
		{"an advisory agent_request is valid", nil, "", ""},
		{"a work_move command is valid", func(in *provider.MCPRequestInput) {
			in.Kind, in.Proposal = airlock.KindWorkChange, move(`{"itemId":"wi_1","columnKey":"done"}`)
		}, "", ""},
		{"kind is required", func(in *provider.MCPRequestInput) { in.Kind = "" }, "kind", "kind is required"},
		{"kind tool_call is for REST adapters", func(in *provider.MCPRequestInput) { in.Kind = airlock.KindToolCall },
			"kind", "kind must be one of work_change, memory_change, life_change, agent_request"},
		{"an unknown kind", func(in *provider.MCPRequestInput) { in.Kind = "chore" }, "kind", "kind must be one of"},
		{"title is required", func(in *provider.MCPRequestInput) { in.Title = "" }, "title", "title is required"},
		{"title is at most 200 bytes", func(in *provider.MCPRequestInput) { in.Title = strings.Repeat("t", 201) },
			"title", "title must be at most 200 bytes"},
		{"title of 200 bytes", func(in *provider.MCPRequestInput) { in.Title = strings.Repeat("t", 200) }, "", ""},
		{"description is at most 4000 bytes", func(in *provider.MCPRequestInput) { in.Description = strings.Repeat("d", 4001) },
			"description", "description must be at most 4000 bytes"},
		{"targetId without NUL", func(in *provider.MCPRequestInput) { in.TargetID = "a\x00b" }, "targetId", "NUL"},
		{"proposal is required", func(in *provider.MCPRequestInput) { in.Proposal = nil }, "proposal", "proposal is required"},
		{"proposal mode is advisory or command", func(in *provider.MCPRequestInput) { in.Proposal = &airlock.Proposal{Mode: "maybe"} },
			"proposal.mode", "proposal.mode must be advisory or command"},
		{"an advisory proposal has no command", func(in *provider.MCPRequestInput) {
			in.Proposal = move(`{"itemId":"wi_1","columnKey":"done"}`)
			in.Proposal.Mode = airlock.ProposalAdvisory
		}, "proposal.command", "only allowed with mode command"},
		{"a command proposal needs its command", func(in *provider.MCPRequestInput) { in.Proposal = &airlock.Proposal{Mode: airlock.ProposalCommand} },
			"proposal.command", "proposal.command is required"},
		{"work_move is the only command", func(in *provider.MCPRequestInput) {
			in.Proposal = move(`{"itemId":"wi_1","columnKey":"done"}`)
			in.Proposal.Command.Method = "work_delete"
		}, "proposal.command.method", "must be work_move"},
		{"work_move needs itemId", func(in *provider.MCPRequestInput) { in.Proposal = move(`{"columnKey":"done"}`) },
			"proposal.command.input.itemId", "proposal.command.input.itemId is required"},
		{"work_move needs a column key", func(in *provider.MCPRequestInput) { in.Proposal = move(`{"itemId":"wi_1","columnKey":"Done!"}`) },
			"proposal.command.input.columnKey", "must be a column key"},
		{"work_move input has no other properties", func(in *provider.MCPRequestInput) {
			in.Proposal = move(`{"itemId":"wi_1","columnKey":"done","force":true}`)
		}, "proposal.command.input.force", `unknown field "force"`},
		{"work_move input is strict JSON", func(in *provider.MCPRequestInput) {
			in.Proposal = move(`{"itemId":"wi_1","columnKey":"done","ItemId":"wi_2"}`)
		}, "proposal.command.input", "proposal.command.input"},
		{"work_move input is an object", func(in *provider.MCPRequestInput) { in.Proposal = move(`["wi_1"]`) },
			"proposal.command.input", "must be a JSON object"},
		{"expiresInMinutes below 5", func(in *provider.MCPRequestInput) { in.ExpiresInMinutes = minutes(4) },
			"expiresInMinutes", "expiresInMinutes must be between 5 and 10080"},
		{"expiresInMinutes above 10080", func(in *provider.MCPRequestInput) { in.ExpiresInMinutes = minutes(10081) },
			"expiresInMinutes", "expiresInMinutes must be between 5 and 10080"},
		{"expiresInMinutes of 5", func(in *provider.MCPRequestInput) { in.ExpiresInMinutes = minutes(5) }, "", ""},
		{"expiresInMinutes of 10080", func(in *provider.MCPRequestInput) { in.ExpiresInMinutes = minutes(10080) }, "", ""},
		{"a free-text question", func(in *provider.MCPRequestInput) { in.Question = &airlock.Question{} }, "", ""},
		{"a question with choices", func(in *provider.MCPRequestInput) {
			in.Question = &airlock.Question{Choices: []string{"blue", "green", "ünïcode ✓"}}
		}, "", ""},
		{"a question needs kind agent_request", func(in *provider.MCPRequestInput) {
			in.Kind, in.Question = airlock.KindLifeChange, &airlock.Question{}
		}, "question", "question is only allowed with kind agent_request and an advisory proposal"},
		{"a question needs an advisory proposal", func(in *provider.MCPRequestInput) {
			in.Proposal, in.Question = move(`{"itemId":"wi_1","columnKey":"done"}`), &airlock.Question{}
		}, "question", "question is only allowed with kind agent_request and an advisory proposal"},
		{"choices must be distinct", func(in *provider.MCPRequestInput) {
			in.Question = &airlock.Question{Choices: []string{"yes", "no", "yes"}}
		}, "question.choices", "choices must be distinct"},
		{"at least 2 choices", func(in *provider.MCPRequestInput) { in.Question = &airlock.Question{Choices: []string{"only"}} },
			"question.choices", "between 2 and 6 choices"},
		{"an empty choices list", func(in *provider.MCPRequestInput) { in.Question = &airlock.Question{Choices: []string{}} },
			"question.choices", "between 2 and 6 choices"},
		{"at most 6 choices", func(in *provider.MCPRequestInput) {
			in.Question = &airlock.Question{Choices: []string{"a", "b", "c", "d", "e", "f", "g"}}
		}, "question.choices", "between 2 and 6 choices"},
		{"a choice is not empty", func(in *provider.MCPRequestInput) { in.Question = &airlock.Question{Choices: []string{"a", ""}} },
			"question.choices[1]", "must be 1 to 120 characters"},
		{"a choice is at most 120 characters", func(in *provider.MCPRequestInput) {
			in.Question = &airlock.Question{Choices: []string{"a", strings.Repeat("é", 121)}}
		}, "question.choices[1]", "must be 1 to 120 characters"},
		{"a choice of 120 two-byte characters", func(in *provider.MCPRequestInput) {
			in.Question = &airlock.Question{Choices: []string{"a", strings.Repeat("é", 120)}}
		}, "", ""},
		{"idempotencyKey is required", func(in *provider.MCPRequestInput) { in.IdempotencyKey = "" },
			"idempotencyKey", "idempotencyKey is required"},
		{"idempotencyKey has no spaces", func(in *provider.MCPRequestInput) { in.IdempotencyKey = "two words" },
			"idempotencyKey", "printable ASCII"},
		{"idempotencyKey is at most 200 characters", func(in *provider.MCPRequestInput) { in.IdempotencyKey = strings.Repeat("k", 201) },
			"idempotencyKey", "at most 200"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := mcpInput(tc.mod)
			err := in.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want valid", err)
				}
				return
			}
			var e *airlock.Error
			if !errors.As(err, &e) || e.Code != airlock.CodeInvalidRequest {
				t.Fatalf("Validate() = %v, want invalid_request", err)
			}
			if e.Field != tc.field || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("Validate() = %q (field %q), want field %q and a message containing %q", e.Message, e.Field, tc.field, tc.msg)
			}
		})
	}
}

// TestMCPFingerprint checks that the fingerprint covers every field of the
// input but its idempotency key, and that formatting of the command's
// input does not matter.
func TestMCPFingerprint(t *testing.T) {
	t.Parallel()
	base := mcpInput(func(in *provider.MCPRequestInput) {
		in.Kind, in.Proposal = airlock.KindWorkChange, move(`{"itemId":"wi_1","columnKey":"done"}`)
	})
	fp := func(in provider.MCPRequestInput) string {
		t.Helper()
		s, err := in.Fingerprint()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	want := fp(base)
	same := []func(*provider.MCPRequestInput){
		func(in *provider.MCPRequestInput) { in.IdempotencyKey = "another-key" },
		func(in *provider.MCPRequestInput) { in.Proposal = move(` { "columnKey" : "done", "itemId":"wi_1" } `) },
		func(in *provider.MCPRequestInput) {
			in.Proposal.Command.Observed = json.RawMessage(`{"fromColumnKey":"doing"}`)
		},
	}
	for i, mod := range same {
		in := base
		in.Proposal = move(string(base.Proposal.Command.Input))
		mod(&in)
		if got := fp(in); got != want {
			t.Errorf("same request %d: fingerprint differs", i)
		}
	}
	differ := map[string]func(*provider.MCPRequestInput){
		"kind":             func(in *provider.MCPRequestInput) { in.Kind = airlock.KindLifeChange },
		"title":            func(in *provider.MCPRequestInput) { in.Title += "!" },
		"description":      func(in *provider.MCPRequestInput) { in.Description = "why" },
		"targetType":       func(in *provider.MCPRequestInput) { in.TargetType = "work_item" },
		"targetId":         func(in *provider.MCPRequestInput) { in.TargetID = "wi_1" },
		"sessionId":        func(in *provider.MCPRequestInput) { in.SessionID = "ses_1" },
		"expiresInMinutes": func(in *provider.MCPRequestInput) { in.ExpiresInMinutes = minutes(30) },
		"command input":    func(in *provider.MCPRequestInput) { in.Proposal = move(`{"itemId":"wi_2","columnKey":"done"}`) },
		"advisory":         func(in *provider.MCPRequestInput) { in.Proposal = &airlock.Proposal{Mode: airlock.ProposalAdvisory} },
		"question":         func(in *provider.MCPRequestInput) { in.Question = &airlock.Question{} },
		"title/description boundary": func(in *provider.MCPRequestInput) {
			in.Title, in.Description = "Which colour", "?"
		},
	}
	seen := map[string]string{want: "base"}
	for name, mod := range differ {
		in := base
		in.Proposal = move(string(base.Proposal.Command.Input))
		mod(&in)
		got := fp(in)
		if prev, dup := seen[got]; dup {
			t.Errorf("changing %s gives the fingerprint of %s", name, prev)
		}
		seen[got] = name
	}
}

func TestMCPWindowAndTimeout(t *testing.T) {
	t.Parallel()
	in := mcpInput(nil)
	if in.Window() != 0 || in.Timeout() != "" {
		t.Fatalf("no expiresInMinutes: window %v timeout %q, want 0 and empty", in.Window(), in.Timeout())
	}
	in.ExpiresInMinutes = minutes(90)
	if in.Window() != 90*time.Minute || in.Timeout() != "90m" {
		t.Fatalf("expiresInMinutes 90: window %v timeout %q", in.Window(), in.Timeout())
	}
	if d, err := airlock.ParseDuration(in.Timeout()); err != nil || d != in.Window() {
		t.Fatalf("Timeout() %q does not parse back to the window: %v, %v", in.Timeout(), d, err)
	}
}
