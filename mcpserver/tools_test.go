package mcpserver

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/provider"
)

// briefSchema returns the approval_request input schema as the MCP brief
// gives it: the JSON block after "Input schema". The brief is read from the
// shared folder when present (and must then equal the copy in testdata),
// else from testdata.
func briefSchema(t *testing.T) map[string]any {
	t.Helper()
	brief, err := os.ReadFile("testdata/mcp-brief.txt")
	if err != nil {
		t.Fatal(err)
	}
	if shared, _ := filepath.Glob("../../shared/brief/002_*.txt"); len(shared) == 1 {
		orig, err := os.ReadFile(shared[0])
		if err != nil {
			t.Fatal(err)
		}
		if string(orig) != string(brief) {
			t.Fatalf("testdata/mcp-brief.txt differs from %s: copy the brief again", shared[0])
		}
	}
	_, after, ok := strings.Cut(string(brief), "\nInput schema\n")
	if !ok {
		t.Fatal("the brief has no Input schema section")
	}
	start := strings.Index(after, "\n{\n")
	end := strings.Index(after, "\n}\n")
	if start < 0 || end < start {
		t.Fatal("no JSON object in the brief's Input schema section")
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(after[start:end+2]), &m); err != nil {
		t.Fatalf("the brief's schema is not JSON: %v", err)
	}
	return m
}

// TestToolsList: tools/list shows the eight tools; approval_request's input
// schema is the brief's, structurally equal (same properties, enums,
// consts, bounds, required list, additionalProperties: false); every tool
// refuses unknown arguments and has an output schema and a description
// that says what happens next.
func TestToolsList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cl := b.connect(t, b.agent)
	res, err := cl.cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		var in map[string]any
		remarshal(t, tool.InputSchema, &in)
		if in["type"] != "object" || in["additionalProperties"] != false {
			t.Errorf("%s: input schema must be an object with additionalProperties false: %v", tool.Name, in)
		}
		if tool.OutputSchema == nil {
			t.Errorf("%s has no output schema", tool.Name)
		}
		if len(tool.Description) < 80 {
			t.Errorf("%s: description too short to tell an agent what happens: %q", tool.Name, tool.Description)
		}
		if tool.Name == ToolApprovalRequest {
			want := briefSchema(t)
			if !reflect.DeepEqual(in, want) {
				t.Errorf("approval_request's input schema differs from the brief's:\ngot  %s\nwant %s", mustJSON(t, in), mustJSON(t, want))
			}
			for _, phrase := range []string{"Advisory proposals record the decision but execute nothing", `"pending"`, "approval_status", "session_heartbeat", "idempotencyKey"} {
				if !strings.Contains(tool.Description, phrase) {
					t.Errorf("approval_request's description lacks %q", phrase)
				}
			}
		}
	}
	slices.Sort(names)
	want := slices.Clone(ToolNames)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}
}

// TestBriefSchemaEmbedded: the schema file embedded is the brief's,
// structurally.
func TestBriefSchemaEmbedded(t *testing.T) {
	t.Parallel()
	var embedded map[string]any
	if err := json.Unmarshal(approvalRequestSchema, &embedded); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(embedded, briefSchema(t)) {
		t.Error("approval_request.schema.json is not the brief's schema")
	}
}

// TestApprovalRequestValidation: every invalid call is an isError result
// whose text names the field and the rule, and stores nothing.
func TestApprovalRequestValidation(t *testing.T) {
	t.Parallel()
	b, item, cl := setupBoard(t)
	move := func(itemID, col string) map[string]any {
		return map[string]any{"mode": "command", "command": map[string]any{
			"method": "work_move", "input": map[string]any{"itemId": itemID, "columnKey": col}}}
	}
	long := strings.Repeat("x", 121)
	tests := []struct {
		name string
		args any
		want string
	}{
		{"expiresInMinutes below 5", requestArgs("k", func(m map[string]any) { m["expiresInMinutes"] = 4 }), "expiresInMinutes must be between 5 and 10080"},
		{"expiresInMinutes above 10080", requestArgs("k", func(m map[string]any) { m["expiresInMinutes"] = 10081 }), "expiresInMinutes must be between 5 and 10080"},
		{"expiresInMinutes not whole", `{"kind":"agent_request","title":"t","proposal":{"mode":"advisory"},"idempotencyKey":"k","expiresInMinutes":5.5}`, "expiresInMinutes must be a whole number"},
		{"expiresInMinutes beyond float64", `{"kind":"agent_request","title":"t","proposal":{"mode":"advisory"},"idempotencyKey":"k","expiresInMinutes":1e400}`, "expiresInMinutes: number 1e400 is beyond the range of a 64-bit float"},
		{"a number below float64 in a command's input", `{"kind":"work_change","title":"t","proposal":{"mode":"command","command":{"method":"work_move","input":{"itemId":"w","columnKey":"done","n":1e-400}}},"idempotencyKey":"k"}`, "number 1e-400 is too small for a 64-bit float"},
		{"expiresInMinutes a string", requestArgs("k", func(m map[string]any) { m["expiresInMinutes"] = "10" }), "expiresInMinutes must be a JSON number"},
		{"question with another kind", requestArgs("k", func(m map[string]any) { m["kind"] = "work_change"; m["question"] = map[string]any{} }),
			"question is only allowed with kind agent_request and an advisory proposal"},
		{"question with a command", requestArgs("k", func(m map[string]any) { m["proposal"] = move(item.ID, "done"); m["question"] = map[string]any{} }),
			"question is only allowed with kind agent_request and an advisory proposal"},
		{"choices not distinct", requestArgs("k", func(m map[string]any) { m["question"] = map[string]any{"choices": []string{"red", "red"}} }), "choices must be distinct"},
		{"one choice", requestArgs("k", func(m map[string]any) { m["question"] = map[string]any{"choices": []string{"red"}} }), "between 2 and 6 choices"},
		{"seven choices", requestArgs("k", func(m map[string]any) {
			m["question"] = map[string]any{"choices": []string{"a", "b", "c", "d", "e", "f", "g"}}
		}), "between 2 and 6 choices"},
		{"empty choice", requestArgs("k", func(m map[string]any) { m["question"] = map[string]any{"choices": []string{"a", ""}} }), "question.choices[1] must be 1 to 120 characters"},
		{"choice too long", requestArgs("k", func(m map[string]any) { m["question"] = map[string]any{"choices": []string{"a", long}} }), "question.choices[1] must be 1 to 120 characters"},
		{"unknown question field", requestArgs("k", func(m map[string]any) { m["question"] = map[string]any{"multiple": true} }), `question: unknown field "multiple"`},
		{"kind missing", requestArgs("k", func(m map[string]any) { delete(m, "kind") }), "kind is required"},
		{"kind unknown", requestArgs("k", func(m map[string]any) { m["kind"] = "tool_call" }), "kind must be one of work_change, memory_change, life_change, agent_request"},
		{"title missing", requestArgs("k", func(m map[string]any) { delete(m, "title") }), "title is required"},
		{"title too long", requestArgs("k", func(m map[string]any) { m["title"] = strings.Repeat("t", 201) }), "title must be at most 200 bytes"},
		{"description too long", requestArgs("k", func(m map[string]any) { m["description"] = strings.Repeat("d", 4001) }), "description must be at most 4000 bytes"},
		{"proposal missing", requestArgs("k", func(m map[string]any) { delete(m, "proposal") }), "proposal is required"},
		{"proposal mode unknown", requestArgs("k", func(m map[string]any) { m["proposal"] = map[string]any{"mode": "execute"} }), "proposal.mode must be advisory or command"},
		{"advisory with a command", requestArgs("k", func(m map[string]any) {
			p := move(item.ID, "done")
			p["mode"] = "advisory"
			m["proposal"] = p
		}), "proposal.command is only allowed with mode command"},
		{"unknown proposal field", requestArgs("k", func(m map[string]any) { m["proposal"] = map[string]any{"mode": "advisory", "force": true} }), `proposal: unknown field "force"`},
		{"case-variant proposal key", requestArgs("k", func(m map[string]any) { m["proposal"] = map[string]any{"Mode": "advisory"} }), `proposal: unknown field "Mode"`},
		{"unknown command method", requestArgs("k", func(m map[string]any) {
			m["proposal"] = map[string]any{"mode": "command", "command": map[string]any{"method": "shell", "input": map[string]any{}}}
		}), "proposal.command.method must be work_move"},
		{"unknown command field", requestArgs("k", func(m map[string]any) {
			p := move(item.ID, "done")
			p["command"].(map[string]any)["when"] = "now"
			m["proposal"] = p
		}), `proposal.command: unknown field "when"`},
		{"command input without columnKey", requestArgs("k", func(m map[string]any) {
			p := move(item.ID, "done")
			delete(p["command"].(map[string]any)["input"].(map[string]any), "columnKey")
			m["proposal"] = p
		}), "columnKey is required"},
		{"command input with an extra field", requestArgs("k", func(m map[string]any) {
			p := move(item.ID, "done")
			p["command"].(map[string]any)["input"].(map[string]any)["position"] = 1
			m["proposal"] = p
		}), `unknown field "position"`},
		{"work_move of an unknown item", requestArgs("k", func(m map[string]any) { m["proposal"] = move("wi_nope", "done") }), `work item "wi_nope" does not exist`},
		{"work_move to an unknown column", requestArgs("k", func(m map[string]any) { m["proposal"] = move(item.ID, "archive") }), `column "archive" does not exist`},
		{"work_move to the item's own column", requestArgs("k", func(m map[string]any) { m["proposal"] = move(item.ID, "todo") }), "already in column todo"},
		{"idempotencyKey missing", requestArgs("", nil), "idempotencyKey is required"},
		{"idempotencyKey with a space", requestArgs("a b", nil), "idempotencyKey must be printable ASCII"},
		{"unknown argument", requestArgs("k", func(m map[string]any) { m["priority"] = "high" }), `unknown field "priority"`},
		{"a field the provider sets", requestArgs("k", func(m map[string]any) { m["state"] = "approved" }), `field "state" is set by the provider`},
		{"duplicate keys", `{"kind":"agent_request","title":"ok","title":"rm -rf /","proposal":{"mode":"advisory"},"idempotencyKey":"k"}`, "duplicate"},
		{"arguments not an object", `["kind"]`, "arguments must be a JSON object"},
		{"unknown session", requestArgs("k", func(m map[string]any) { m["sessionId"] = "ses_nope" }), `session "ses_nope" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := &client{t: t, cs: cl.cs, outputs: cl.outputs}
			got := cl.fail(ToolApprovalRequest, tt.args)
			if !strings.Contains(got, tt.want) {
				t.Errorf("error %q does not contain %q", got, tt.want)
			}
			if !strings.HasPrefix(got, "invalid_request: ") && !strings.HasPrefix(got, "not_found: ") {
				t.Errorf("error %q does not start with its code", got)
			}
		})
	}

	t.Run("work_move without the work:write scope is forbidden", func(t *testing.T) {
		got := b.connect(t, b.noScope).fail(ToolApprovalRequest, requestArgs("k", func(m map[string]any) { m["proposal"] = move(item.ID, "done") }))
		if !strings.HasPrefix(got, "forbidden: ") || !strings.Contains(got, "work:write") {
			t.Errorf("error %q; want forbidden naming work:write", got)
		}
	})
	t.Run("reviewers do not create requests", func(t *testing.T) {
		got := b.connect(t, b.reviewer).fail(ToolApprovalRequest, requestArgs("k", nil))
		if !strings.HasPrefix(got, "forbidden: ") {
			t.Errorf("error %q; want forbidden", got)
		}
	})

	for _, c := range []airlock.Caller{b.agent, b.noScope} {
		page, err := b.svc.ListRequests(t.Context(), c, provider.ListQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Requests) != 0 {
			t.Errorf("invalid calls stored %d requests", len(page.Requests))
		}
	}
}

// TestErrorResult: an *airlock.Error reads "code: message", with the state
// that holds when the message does not name it; any other error is an
// internal error whose details stay in the log.
func TestErrorResult(t *testing.T) {
	t.Parallel()
	var logged strings.Builder
	s := &Server{log: slog.New(slog.NewTextHandler(&logged, nil))}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{airlock.Conflict(airlock.CodeNotPending, airlock.StateApproved, "request apr_1 is already approved"), "not_pending: request apr_1 is already approved"},
		{airlock.Conflict(airlock.CodeDeadlinePassed, airlock.StateExpired, "the deadline has passed"), "deadline_passed: the deadline has passed (the request is expired)"},
		{airlock.Invalid("title", "title is required"), "invalid_request: title is required"},
		{errors.New("disk I/O error at /var/lib/airlock.db"), "internal: internal error; the call may not have taken effect"},
	} {
		res := s.errorResult("approval_request", tt.err)
		if got := text(res); !res.IsError || !strings.HasPrefix(got, tt.want) {
			t.Errorf("%v: %q (isError %v), want %q", tt.err, got, res.IsError, tt.want)
		}
	}
	if !strings.Contains(logged.String(), "disk I/O error") {
		t.Error("the internal error was not logged")
	}
}
