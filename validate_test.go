package airlock_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// briefExample is the CreateApprovalRequest of the protocol brief.
const briefExample = `{
  "tool": "issue_refund",
  "arguments": {
    "payment_id": "payment_123",
    "amount": 4900,
    "currency": "GBP"
  },
  "timeout": "30m",
  "agent_reasoning": "The customer was charged twice.",
  "context": {
    "session_id": "session_456"
  }
}`

// body builds a create body from its members, in order, each given as
// raw JSON text.
func body(members ...string) string { return "{" + strings.Join(members, ",") + "}" }

func TestParseCreateRequest(t *testing.T) {
	t.Parallel()
	const args = `"arguments":{}`
	tool := func(name string) string { b, _ := json.Marshal(name); return `"tool":` + string(b) }
	tests := []struct {
		name string
		body string
		want []string
	}{
		{"the brief's example is accepted", briefExample, accepted},
		{"tool and arguments alone are enough", body(tool("ls"), args), accepted},
		// The tool name: ^[A-Za-z0-9_.-]{1,128}$ (T18).
		{"a tool name of letters, digits, _ . - is accepted", body(tool("fs.read_file-v2_X9"), args), accepted},
		{"a tool name of 128 characters is accepted", body(tool(strings.Repeat("a", 128)), args), accepted},
		{"a tool name of 129 characters is refused", body(tool(strings.Repeat("a", 129)), args), refusedWith("tool must match")},
		{"a missing tool is refused", body(args), refusedWith("tool is required")},
		{"an empty tool is refused", body(tool(""), args), refusedWith("tool is required")},
		{"a null tool is refused", body(`"tool":null`, args), refusedWith("tool is required")},
		{"a tool name with a space is refused", body(tool("rm -rf"), args), refusedWith("tool must match")},
		{"a tool name with a right-to-left override (U+202E) is refused", body(tool("ls\u202etxt.exe"), args), refusedWith("tool must match")},
		{"a tool name with a zero-width space is refused", body(tool("l\u200bs"), args), refusedWith("tool must match")},
		{"a tool name with a zero-width joiner is refused", body(tool("ls\u200d"), args), refusedWith("tool must match")},
		{"a tool name with a Cyrillic look-alike is refused", body(tool("l\u0455"), args), refusedWith("tool must match")},
		{"a tool name with a trailing newline is refused", body(tool("ls\n"), args), refusedWith("tool must match")},
		{"a tool name with a tab is refused", body(tool("a\tb"), args), refusedWith("tool must match")},
		{"a tool name with an accent is refused", body(tool("résumé"), args), refusedWith("tool must match")},
		{"a tool name with a slash is refused", body(tool("bin/rm"), args), refusedWith("tool must match")},
		{"a tool given as a number is refused, naming the field", body(`"tool":5`, args), refusedWith("tool must be a JSON string")},
		{"a tool given as an object is refused, naming the field", body(`"tool":{}`, args), refusedWith("tool must be a JSON string")},
		// Arguments: required, an object, kept strict.
		{"missing arguments are refused", body(tool("ls")), refusedWith("arguments is required")},
		{"null arguments are refused", body(tool("ls"), `"arguments":null`), refusedWith("arguments is required")},
		{"arguments given as an array are refused", body(tool("ls"), `"arguments":[]`), refusedWith("arguments must be a JSON object")},
		{"arguments given as a string are refused", body(tool("ls"), `"arguments":"{}"`), refusedWith("arguments must be a JSON object")},
		{"arguments given as a number are refused", body(tool("ls"), `"arguments":5`), refusedWith("arguments must be a JSON object")},
		{"arguments given as true are refused", body(tool("ls"), `"arguments":true`), refusedWith("arguments must be a JSON object")},
		{"nested arguments are accepted", body(tool("ls"), `"arguments":{"a":[1,{"b":null}],"c":"é"}`), accepted},
		{"case-variant keys inside arguments are refused, naming the path", body(tool("sh"), `"arguments":{"cmd":"ls","CMD":"rm -rf /"}`), refusedWith(`arguments: keys "cmd" and "CMD" differ only in case`)},
		{"duplicate keys deep inside arguments are refused, naming the path", body(tool("sh"), `"arguments":{"a":{"b":[{"c":1,"c":2}]}}`), refusedWith(`arguments.a.b[0]: duplicate key "c"`)},
		// Context: an object or null.
		{"a null context is accepted", body(tool("ls"), args, `"context":null`), accepted},
		{"an empty context is accepted", body(tool("ls"), args, `"context":{}`), accepted},
		{"a context given as an array is refused", body(tool("ls"), args, `"context":[]`), refusedWith("context must be a JSON object")},
		{"a context given as a string is refused", body(tool("ls"), args, `"context":"s"`), refusedWith("context must be a JSON object")},
		{"a context of 64 KiB is accepted", body(tool("ls"), args, `"context":{"a":"`+strings.Repeat("x", airlock.MaxContextBytes-8)+`"}`), accepted},
		{"a context over 64 KiB is refused", body(tool("ls"), args, `"context":{"a":"`+strings.Repeat("x", airlock.MaxContextBytes-7)+`"}`), refusedWith("context must be at most 65536 bytes")},
		// Reasoning and timeout: strings with limits.
		{"reasoning of 16 KiB is accepted", body(tool("ls"), args, `"agent_reasoning":"`+strings.Repeat("x", airlock.MaxReasoningLen)+`"`), accepted},
		{"reasoning over 16 KiB is refused", body(tool("ls"), args, `"agent_reasoning":"`+strings.Repeat("x", airlock.MaxReasoningLen+1)+`"`), refusedWith("agent_reasoning must be at most 16384 bytes (got 16385)")},
		{"reasoning given as a number is refused, naming the field", body(tool("ls"), args, `"agent_reasoning":1`), refusedWith("agent_reasoning must be a JSON string")},
		{"reasoning with an escaped NUL is refused", body(tool("ls"), args, `"agent_reasoning":"a\u0000"`), refusedWith("agent_reasoning: NUL character")},
		{"a timeout of 64 characters passes the length check", body(tool("ls"), args, `"timeout":"`+strings.Repeat("1", 62)+`ms"`), accepted},
		{"a timeout of 65 characters is refused", body(tool("ls"), args, `"timeout":"`+strings.Repeat("1", 63)+`ms"`), refusedWith("timeout must be at most 64 bytes")},
		{"a timeout given as a number is refused, naming the field", body(tool("ls"), args, `"timeout":30`), refusedWith("timeout must be a JSON string")},
		// Fields the provider sets are refused by name.
		{"state is set by the provider", body(tool("ls"), args, `"state":"approved"`), refusedWith(`field "state" is set by the provider; remove it`)},
		{"decision is set by the provider", body(tool("ls"), args, `"decision":{"status":"approved"}`), refusedWith(`field "decision" is set by the provider`)},
		{"id is set by the provider", body(`"id":"apr_x"`, tool("ls"), args), refusedWith(`field "id" is set by the provider`)},
		{"instance_id is set by the provider", body(tool("ls"), args, `"instance_id":"ins_x"`), refusedWith(`field "instance_id" is set by the provider`)},
		{"deadline_at is set by the provider", body(tool("ls"), args, `"deadline_at":"2030-01-01T00:00:00Z"`), refusedWith(`field "deadline_at" is set by the provider`)},
		{"expires_at is set by the provider", body(tool("ls"), args, `"expires_at":"2030-01-01T00:00:00Z"`), refusedWith(`field "expires_at" is set by the provider`)},
		{"execution is set by the provider", body(tool("ls"), args, `"execution":{}`), refusedWith(`field "execution" is set by the provider`)},
		{"fingerprint is set by the provider", body(tool("ls"), args, `"fingerprint":"x"`), refusedWith(`field "fingerprint" is set by the provider`)},
		{"created_at is set by the provider", body(tool("ls"), args, `"created_at":"x"`), refusedWith(`field "created_at" is set by the provider`)},
		// Unknown fields are refused by name, listing the allowed ones.
		{"an unknown field is refused by name", body(tool("ls"), args, `"args":{}`), refusedWith(`unknown field "args"`, "allowed fields are tool, arguments, timeout, agent_reasoning, context")},
		{"a known field in another case is refused as unknown", body(`"Tool":"rm"`, args), refusedWith(`unknown field "Tool"`)},
		{"a known field with a long s is refused as unknown", body(tool("ls"), `"argumentſ":{}`), refusedWith(`unknown field "argumentſ"`)},
		{"a long unknown field is clipped in the message", body(tool("ls"), args, `"`+strings.Repeat("x", 1000)+`":1`), refusedWith(`unknown field "` + strings.Repeat("x", 61) + `..."`)},
		{"kind is not a create field", body(tool("ls"), args, `"kind":"tool_call"`), refusedWith(`unknown field "kind"`)},
		{"a case variant of a known field beside it is refused", body(tool("ls"), `"TOOL":"rm -rf /"`, args), refusedWith(`keys "tool" and "TOOL" differ only in case`)},
		// The body itself.
		{"an empty body is refused", ``, refusedWith("body must be a JSON object")},
		{"an array body is refused", `[]`, refusedWith("body must be a JSON object")},
		{"trailing data after the body is refused", body(tool("ls"), args) + `{}`, refusedWith("unexpected data after the JSON object")},
		{"invalid UTF-8 in the tool is refused", "{\"tool\":\"l\xffs\",\"arguments\":{}}", refusedWith("tool: invalid UTF-8")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := airlock.ParseCreateRequest([]byte(tc.body))
			checkOutcome(t, err, tc.want)
		})
	}
}

// Errors name the field at fault, so the API can point at it.
func TestParseCreateRequestErrorField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body  string
		field string
	}{
		{body(`"tool":"a b"`, `"arguments":{}`), "tool"},
		{body(`"tool":5`, `"arguments":{}`), "tool"},
		{body(`"tool":"ls"`), "arguments"},
		{body(`"tool":"ls"`, `"arguments":{"x":{"y":1,"Y":2}}`), "arguments.x"},
		{body(`"tool":"ls"`, `"arguments":{}`, `"context":1`), "context"},
		{body(`"tool":"ls"`, `"arguments":{}`, `"state":"approved"`), "state"},
		{body(`"tool":"ls"`, `"arguments":{}`, `"extra":1`), "extra"},
	}
	for _, tc := range tests {
		_, err := airlock.ParseCreateRequest([]byte(tc.body))
		var e *airlock.Error
		if !errors.As(err, &e) || e.Field != tc.field {
			t.Errorf("%s: error %v, want one with Field %q", tc.body, err, tc.field)
		}
	}
}

// The tool and arguments stored are exactly those submitted
// (docs/protocol.md L11).
func TestParseCreateRequestKeepsArgumentsVerbatim(t *testing.T) {
	t.Parallel()
	const arguments = `{ "b" : "\u00e9\/",  "a":[1, 2.0, 1e2],"c":{} }`
	const context = `{"z":1, "a" : null}`
	in, err := airlock.ParseCreateRequest([]byte(`{"context": ` + context + `,"arguments":` + arguments + `, "tool":"issue_refund","timeout":"PT30M","agent_reasoning":"é\n"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := airlock.CreateRequestInput{
		Tool: "issue_refund", Arguments: json.RawMessage(arguments), Timeout: "PT30M",
		AgentReasoning: "é\n", Context: json.RawMessage(context),
	}
	if in.Tool != want.Tool || string(in.Arguments) != string(want.Arguments) || in.Timeout != want.Timeout ||
		in.AgentReasoning != want.AgentReasoning || string(in.Context) != string(want.Context) {
		t.Fatalf("got %+v\nwant %+v", in, want)
	}
	for _, null := range []string{``, `,"context":null`} {
		in, err := airlock.ParseCreateRequest([]byte(`{"tool":"ls","arguments":{}` + null + `}`))
		if err != nil {
			t.Fatal(err)
		}
		if in.Context != nil {
			t.Errorf("context %q, want nil for %q", in.Context, null)
		}
	}
}

// Validate is the gate for inputs that did not come through
// ParseCreateRequest (an MCP call, the Go SDK): it must be as strict.
func TestCreateRequestInputValidate(t *testing.T) {
	t.Parallel()
	valid := func() airlock.CreateRequestInput {
		return airlock.CreateRequestInput{Tool: "ls", Arguments: json.RawMessage(`{"path":"/"}`)}
	}
	tests := []struct {
		name   string
		change func(*airlock.CreateRequestInput)
		want   []string
	}{
		{"a valid input is accepted", func(*airlock.CreateRequestInput) {}, accepted},
		{"arguments with duplicate keys are refused", func(in *airlock.CreateRequestInput) { in.Arguments = json.RawMessage(`{"a":1,"a":2}`) }, refusedWith(`arguments: duplicate key "a"`)},
		{"arguments with case-variant keys are refused", func(in *airlock.CreateRequestInput) {
			in.Arguments = json.RawMessage(`{"tool":"ls","TOOL":"rm -rf /"}`)
		}, refusedWith("arguments: keys")},
		{"arguments followed by more data are refused", func(in *airlock.CreateRequestInput) { in.Arguments = json.RawMessage(`{"a":1} {"a":2}`) }, refusedWith("arguments: unexpected data")},
		{"arguments that are not JSON are refused", func(in *airlock.CreateRequestInput) { in.Arguments = json.RawMessage(`{oops`) }, refusedWith("arguments: invalid JSON")},
		{"arguments with invalid UTF-8 are refused", func(in *airlock.CreateRequestInput) { in.Arguments = json.RawMessage("{\"a\":\"\xff\"}") }, refusedWith("arguments.a: invalid UTF-8")},
		{"a context with duplicate keys is refused", func(in *airlock.CreateRequestInput) { in.Context = json.RawMessage(`{"a":1,"a":2}`) }, refusedWith(`context: duplicate key "a"`)},
		{"a context followed by more data is refused", func(in *airlock.CreateRequestInput) { in.Context = json.RawMessage(`{} x`) }, refusedWith("context: unexpected data")},
		{"reasoning with invalid UTF-8 is refused", func(in *airlock.CreateRequestInput) { in.AgentReasoning = "\xff" }, refusedWith("agent_reasoning is not valid UTF-8")},
		{"reasoning with a NUL is refused", func(in *airlock.CreateRequestInput) { in.AgentReasoning = "a\x00" }, refusedWith("agent_reasoning contains a NUL character")},
		{"a timeout with a NUL is refused", func(in *airlock.CreateRequestInput) { in.Timeout = "1m\x00" }, refusedWith("timeout contains a NUL character")},
		{"a null context becomes no context", func(in *airlock.CreateRequestInput) { in.Context = json.RawMessage(`null`) }, accepted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := valid()
			tc.change(&in)
			checkOutcome(t, in.Validate(), tc.want)
		})
	}
}

func TestCreateRequestInputValidateClearsNullContext(t *testing.T) {
	t.Parallel()
	in := airlock.CreateRequestInput{Tool: "ls", Arguments: json.RawMessage(`{}`), Context: json.RawMessage(`null`)}
	if err := in.Validate(); err != nil {
		t.Fatal(err)
	}
	if in.Context != nil {
		t.Fatalf("context %q after Validate, want nil", in.Context)
	}
}

// An idempotent replay is recognised by meaning, not by bytes: the same call
// re-encoded has the same fingerprint; any change of call, claim, context or
// instance gives another.
func TestFingerprint(t *testing.T) {
	t.Parallel()
	const base = `{"tool":"issue_refund","arguments":{"payment_id":"payment_123","amount":4900,"currency":"GBP"},"timeout":"30m","agent_reasoning":"The customer was charged twice.","context":{"session_id":"session_456"}}`
	tests := []struct {
		name     string
		body     string
		instance string
		same     bool
	}{
		{"the brief's example, pretty-printed, is the same call", briefExample, "ins_1", true},
		{"reordered fields are the same call", `{"context":{"session_id":"session_456"},"agent_reasoning":"The customer was charged twice.","timeout":"30m","arguments":{"currency":"GBP","amount":4900,"payment_id":"payment_123"},"tool":"issue_refund"}`, "ins_1", true},
		{"reordered and re-spaced arguments are the same call", `{"tool":"issue_refund","arguments":{ "currency" : "GBP" ,"amount":4900,   "payment_id":"payment_\u0031\u00323"},"timeout":"30m","agent_reasoning":"The customer was charged twice.","context":{ "session_id" : "session_456" }}`, "ins_1", true},
		{"another instance is another call", base, "ins_2", false},
		{"another tool is another call", strings.Replace(base, `"issue_refund"`, `"issue_refunds"`, 1), "ins_1", false},
		{"another amount is another call", strings.Replace(base, `4900`, `49000`, 1), "ins_1", false},
		{"the amount written as 4900.0 is another call", strings.Replace(base, `4900`, `4900.0`, 1), "ins_1", false},
		{"the amount as a string is another call", strings.Replace(base, `4900`, `"4900"`, 1), "ins_1", false},
		{"an extra argument is another call", strings.Replace(base, `"currency":"GBP"`, `"currency":"GBP","to":"x"`, 1), "ins_1", false},
		{"another timeout is another call", strings.Replace(base, `"30m"`, `"31m"`, 1), "ins_1", false},
		{"the same window written PT30M is another call (the timeout is kept as asked)", strings.Replace(base, `"30m"`, `"PT30M"`, 1), "ins_1", false},
		{"other reasoning is another call", strings.Replace(base, `twice.`, `twice!`, 1), "ins_1", false},
		{"other context is another call", strings.Replace(base, `session_456`, `session_457`, 1), "ins_1", false},
		{"no context is another call", strings.Replace(base, `,"context":{"session_id":"session_456"}`, ``, 1), "ins_1", false},
	}
	want := fingerprint(t, base, "ins_1")
	if len(want) != 64 {
		t.Fatalf("fingerprint %q is not a hex SHA-256", want)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := fingerprint(t, tc.body, tc.instance)
			if (got == want) != tc.same {
				t.Fatalf("fingerprint equal = %v, want %v", got == want, tc.same)
			}
		})
	}
}

// Fields are length-prefixed in the hash: moving text from one field to its
// neighbour changes the fingerprint.
func TestFingerprintSeparatesFields(t *testing.T) {
	t.Parallel()
	tests := []struct{ a, b airlock.CreateRequestInput }{
		{
			airlock.CreateRequestInput{Tool: "ls", Arguments: json.RawMessage(`{}`), Timeout: "1m"},
			airlock.CreateRequestInput{Tool: "ls", Arguments: json.RawMessage(`{}`), AgentReasoning: "1m"},
		},
		{
			airlock.CreateRequestInput{Tool: "ls", Arguments: json.RawMessage(`{}`), Timeout: "1m", AgentReasoning: "x"},
			airlock.CreateRequestInput{Tool: "ls", Arguments: json.RawMessage(`{}`), Timeout: "1mx"},
		},
		{
			airlock.CreateRequestInput{Tool: "ls", Arguments: json.RawMessage(`{}`), Context: json.RawMessage(`{}`)},
			airlock.CreateRequestInput{Tool: "ls", Arguments: json.RawMessage(`{}`)},
		},
	}
	for _, tc := range tests {
		fa, err := tc.a.Fingerprint("ins_1")
		if err != nil {
			t.Fatal(err)
		}
		fb, err := tc.b.Fingerprint("ins_1")
		if err != nil {
			t.Fatal(err)
		}
		if fa == fb {
			t.Errorf("%+v and %+v share a fingerprint", tc.a, tc.b)
		}
	}
	// A null context is no context.
	a := airlock.CreateRequestInput{Tool: "ls", Arguments: json.RawMessage(`{}`)}
	b := airlock.CreateRequestInput{Tool: "ls", Arguments: json.RawMessage(`{}`), Context: json.RawMessage(`null`)}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	fa, _ := a.Fingerprint("ins_1")
	fb, _ := b.Fingerprint("ins_1")
	if fa != fb {
		t.Errorf("null context and no context differ")
	}
}

// Fingerprint never hashes what the strict parser would refuse.
func TestFingerprintRefusesNonStrictArguments(t *testing.T) {
	t.Parallel()
	for _, args := range []string{`{"a":1,"a":2}`, `{"a":2} x`, "{\"a\":\"\xff\"}"} {
		in := airlock.CreateRequestInput{Tool: "ls", Arguments: json.RawMessage(args)}
		if fp, err := in.Fingerprint("ins_1"); err == nil {
			t.Errorf("arguments %q fingerprinted as %s", args, fp)
		}
	}
}

func fingerprint(t *testing.T, body, instance string) string {
	t.Helper()
	in, err := airlock.ParseCreateRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	fp, err := in.Fingerprint(instance)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

func TestDecisionInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want []string
	}{
		{"an approval is accepted", `{"status":"approved"}`, accepted},
		{"a denial with a note is accepted", `{"status":"denied","note":"not today"}`, accepted},
		{"an approval with a note, an answer and a validity is accepted", `{"status":"approved","note":"ok","answer":"yes","valid_for":"10m"}`, accepted},
		{"a decision without a status is refused", `{"note":"x"}`, refusedWith("status must be approved or denied")},
		{"pending is not a decision", `{"status":"pending"}`, refusedWith("status must be approved or denied")},
		{"expired is not a reviewer's decision", `{"status":"expired"}`, refusedWith("status must be approved or denied")},
		{"cancelled is not a reviewer's decision", `{"status":"cancelled"}`, refusedWith("status must be approved or denied")},
		{"APPROVED in capitals is refused", `{"status":"APPROVED"}`, refusedWith("status must be approved or denied")},
		{"a status given as true is refused, naming the field", `{"status":true}`, refusedWith("status must be a JSON string")},
		{"a note of 4000 bytes is accepted", `{"status":"denied","note":"` + strings.Repeat("n", airlock.MaxNoteLen) + `"}`, accepted},
		{"a note over 4000 bytes is refused", `{"status":"denied","note":"` + strings.Repeat("n", airlock.MaxNoteLen+1) + `"}`, refusedWith("note must be at most 4000 bytes")},
		{"an answer of 2000 bytes is accepted", `{"status":"approved","answer":"` + strings.Repeat("a", airlock.MaxAnswerLen) + `"}`, accepted},
		{"an answer over 2000 bytes is refused", `{"status":"approved","answer":"` + strings.Repeat("a", airlock.MaxAnswerLen+1) + `"}`, refusedWith("answer must be at most 2000 bytes")},
		{"a valid_for over 64 bytes is refused", `{"status":"approved","valid_for":"` + strings.Repeat("1", 64) + `s"}`, refusedWith("valid_for must be at most 64 bytes")},
		{"a denial with an answer is refused", `{"status":"denied","answer":"yes"}`, refusedWith("answer applies only to approvals")},
		{"a denial with a validity is refused", `{"status":"denied","valid_for":"5m"}`, refusedWith("valid_for applies only to approvals")},
		{"decided_by is set by the provider", `{"status":"approved","decided_by":"me"}`, refusedWith(`field "decided_by" is set by the provider`)},
		{"expires_at is set by the provider", `{"status":"approved","expires_at":"2030-01-01T00:00:00Z"}`, refusedWith(`field "expires_at" is set by the provider`)},
		{"an unknown field is refused by name", `{"status":"approved","reason":"x"}`, refusedWith(`unknown field "reason"`, "status, note, answer, valid_for")},
		{"status given twice is refused", `{"status":"denied","status":"approved"}`, refusedWith(`duplicate key "status"`)},
		{"status and STATUS are refused", `{"status":"denied","STATUS":"approved"}`, refusedWith("differ only in case")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var in airlock.DecisionInput
			err := airlock.DecodeObject([]byte(tc.body), &in)
			if err == nil {
				err = in.Validate()
			}
			checkOutcome(t, err, tc.want)
		})
	}
}

// A question is answered by an approval carrying an answer, one of the
// choices when there are choices (docs/mcp.md, "Questions").
func TestDecisionInputCheckAnswer(t *testing.T) {
	t.Parallel()
	yesNo := &airlock.Question{Choices: []string{"yes", "no"}}
	freeText := &airlock.Question{}
	tests := []struct {
		name     string
		decision airlock.DecisionInput
		question *airlock.Question
		want     []string
	}{
		{"an answer among the choices is accepted", airlock.DecisionInput{Status: airlock.StateApproved, Answer: "no"}, yesNo, accepted},
		{"an answer outside the choices is refused, listing them", airlock.DecisionInput{Status: airlock.StateApproved, Answer: "maybe"}, yesNo, refusedWith("answer must be one of the choices: yes | no")},
		{"choices are matched exactly, case included", airlock.DecisionInput{Status: airlock.StateApproved, Answer: "Yes"}, yesNo, refusedWith("one of the choices")},
		{"choices are matched exactly, spaces included", airlock.DecisionInput{Status: airlock.StateApproved, Answer: "yes "}, yesNo, refusedWith("one of the choices")},
		{"any answer to a free-text question is accepted", airlock.DecisionInput{Status: airlock.StateApproved, Answer: "Tuesday"}, freeText, accepted},
		{"an answer without a question is refused", airlock.DecisionInput{Status: airlock.StateApproved, Answer: "yes"}, nil, refusedWith("answer is only for requests that ask a question")},
		{"an approval without an answer is accepted without a question", airlock.DecisionInput{Status: airlock.StateApproved}, nil, accepted},
		{"an approval without an answer to a choices question is refused", airlock.DecisionInput{Status: airlock.StateApproved}, yesNo, refusedWith("this request asks a question: approve with an answer, or deny to decline")},
		{"an approval without an answer to a free-text question is refused", airlock.DecisionInput{Status: airlock.StateApproved}, freeText, refusedWith("approve with an answer")},
		{"a denial declines the question", airlock.DecisionInput{Status: airlock.StateDenied, Note: "no time"}, yesNo, accepted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.decision.Validate()
			if err == nil {
				err = tc.decision.CheckAnswer(airlock.Request{Kind: airlock.KindAgentRequest, Question: tc.question})
			}
			checkOutcome(t, err, tc.want)
		})
	}
}

func TestReportInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want []string
	}{
		{"succeeded is an outcome", `{"status":"succeeded"}`, accepted},
		{"failed with a detail is an outcome", `{"status":"failed","detail":"exit 1"}`, accepted},
		{"unknown is an outcome (an interrupted run)", `{"status":"unknown"}`, accepted},
		{"claimed is not an outcome", `{"status":"claimed"}`, refusedWith("status must be succeeded, failed or unknown")},
		{"a report without a status is refused", `{}`, refusedWith("status must be succeeded, failed or unknown")},
		{"SUCCEEDED in capitals is refused", `{"status":"SUCCEEDED"}`, refusedWith("status must be succeeded")},
		{"a detail of 4000 bytes is accepted", `{"status":"failed","detail":"` + strings.Repeat("d", airlock.MaxDetailLen) + `"}`, accepted},
		{"a detail over 4000 bytes is refused", `{"status":"failed","detail":"` + strings.Repeat("d", airlock.MaxDetailLen+1) + `"}`, refusedWith("detail must be at most 4000 bytes")},
		{"a detail given as an object is refused, naming the field", `{"status":"failed","detail":{}}`, refusedWith("detail must be a JSON string")},
		{"finished_at is set by the provider", `{"status":"failed","finished_at":"x"}`, refusedWith(`field "finished_at" is set by the provider`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var in airlock.ReportInput
			err := airlock.DecodeObject([]byte(tc.body), &in)
			if err == nil {
				err = in.Validate()
			}
			checkOutcome(t, err, tc.want)
		})
	}
}

func TestInstanceInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want []string
	}{
		{"a name alone is accepted", `{"name":"laptop agent"}`, accepted},
		{"a name with metadata is accepted", `{"name":"a","metadata":{"host":"x"}}`, accepted},
		{"null metadata is accepted", `{"name":"a","metadata":null}`, accepted},
		{"a missing name is refused", `{}`, refusedWith("name is required")},
		{"a name of 200 bytes is accepted", `{"name":"` + strings.Repeat("n", airlock.MaxInstanceNameLen) + `"}`, accepted},
		{"a name over 200 bytes is refused", `{"name":"` + strings.Repeat("n", airlock.MaxInstanceNameLen+1) + `"}`, refusedWith("name must be at most 200 bytes")},
		{"a token audience is accepted", `{"name":"a","token_audience":"https://tools.example"}`, accepted},
		{"a token audience over 512 bytes is refused", `{"name":"a","token_audience":"` + strings.Repeat("a", airlock.MaxTokenAudienceLen+1) + `"}`, refusedWith("token_audience must be at most 512 bytes")},
		{"metadata given as an array is refused", `{"name":"a","metadata":[]}`, refusedWith("metadata must be a JSON object")},
		{"metadata over 16 KiB is refused", `{"name":"a","metadata":{"a":"` + strings.Repeat("m", airlock.MaxMetadataBytes) + `"}}`, refusedWith("metadata must be at most 16384 bytes")},
		{"metadata with case-variant keys is refused", `{"name":"a","metadata":{"k":1,"K":2}}`, refusedWith("metadata: keys")},
		{"id is set by the provider", `{"name":"a","id":"ins_1"}`, refusedWith(`field "id" is set by the provider`)},
		{"pending_count is set by the provider", `{"name":"a","pending_count":0}`, refusedWith(`field "pending_count" is set by the provider`)},
		{"an unknown field is refused by name", `{"name":"a","owner":"b"}`, refusedWith(`unknown field "owner"`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var in airlock.InstanceInput
			err := airlock.DecodeObject([]byte(tc.body), &in)
			if err == nil {
				err = in.Validate()
			}
			checkOutcome(t, err, tc.want)
		})
	}
}

// Validate is as strict for instances built in Go as for decoded bodies.
func TestInstanceInputValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   airlock.InstanceInput
		want []string
	}{
		{"a name with a NUL is refused", airlock.InstanceInput{Name: "a\x00"}, refusedWith("name contains a NUL character")},
		{"a name with invalid UTF-8 is refused", airlock.InstanceInput{Name: "\xff"}, refusedWith("name is not valid UTF-8")},
		{"metadata with duplicate keys is refused", airlock.InstanceInput{Name: "a", Metadata: json.RawMessage(`{"a":1,"a":2}`)}, refusedWith(`metadata: duplicate key "a"`)},
		{"metadata followed by more data is refused", airlock.InstanceInput{Name: "a", Metadata: json.RawMessage(`{}{}`)}, refusedWith("metadata: unexpected data")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkOutcome(t, tc.in.Validate(), tc.want)
		})
	}
}

func TestNewTokenInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   airlock.NewTokenInput
		want []string
	}{
		{"an agent token is accepted", airlock.NewTokenInput{Name: "ci", Role: airlock.RoleAgent}, accepted},
		{"an agent token with work:write is accepted", airlock.NewTokenInput{Name: "ci", Role: airlock.RoleAgent, Scopes: []string{airlock.ScopeWorkWrite}}, accepted},
		{"a reviewer with a principal is accepted", airlock.NewTokenInput{Name: "alice", Role: airlock.RoleReviewer, Principal: "alice@example.com"}, accepted},
		{"a token without a name is refused", airlock.NewTokenInput{Role: airlock.RoleAdmin}, refusedWith("name is required")},
		{"a name over 200 bytes is refused", airlock.NewTokenInput{Name: strings.Repeat("n", airlock.MaxTokenNameLen+1), Role: airlock.RoleAdmin}, refusedWith("name must be at most 200 bytes")},
		{"a token without a role is refused", airlock.NewTokenInput{Name: "x"}, refusedWith("role must be one of admin, agent, reviewer")},
		{"an unknown role is refused", airlock.NewTokenInput{Name: "x", Role: "root"}, refusedWith("role must be one of")},
		{"an unknown scope is refused by name", airlock.NewTokenInput{Name: "x", Role: airlock.RoleAgent, Scopes: []string{"work:write", "work:delete"}}, refusedWith(`unknown scope "work:delete"`, "known scopes: work:write")},
		{"a principal over 200 bytes is refused", airlock.NewTokenInput{Name: "x", Role: airlock.RoleAgent, Principal: strings.Repeat("p", airlock.MaxPrincipalLen+1)}, refusedWith("principal must be at most 200 bytes")},
		{"a principal with a NUL is refused", airlock.NewTokenInput{Name: "x", Role: airlock.RoleAgent, Principal: "a\x00"}, refusedWith("principal contains a NUL")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkOutcome(t, tc.in.Validate(), tc.want)
		})
	}
}

func TestCheckIdempotencyKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  string
		want []string
	}{
		{"a UUID is a key", "0b6f1f7e-3f5c-4c47-9a53-b1d5f1c1e8a9", accepted},
		{"one printable character is a key", "!", accepted},
		{"a key of 200 characters is accepted", strings.Repeat("k", airlock.MaxIdempotencyKey), accepted},
		{"every printable ASCII character is allowed", "!\"#$%&'()*+,-./0123456789:;<=>?@AZ[\\]^_`az{|}~", accepted},
		{"a missing key is refused, saying what to send", "", refusedWith("the Idempotency-Key header is required", "reuse it on retries")},
		{"a key over 200 characters is refused", strings.Repeat("k", airlock.MaxIdempotencyKey+1), refusedWith("at most 200 characters")},
		{"a key with a space is refused", "a b", refusedWith("printable ASCII without spaces")},
		{"a key with a tab is refused", "a\tb", refusedWith("printable ASCII")},
		{"a key with DEL is refused", "a\x7f", refusedWith("printable ASCII")},
		{"a key with a NUL is refused", "a\x00", refusedWith("printable ASCII")},
		{"a key in Cyrillic is refused", "ключ", refusedWith("printable ASCII")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := airlock.CheckIdempotencyKey(tc.key)
			checkOutcome(t, err, tc.want)
			var e *airlock.Error
			if err != nil && (!errors.As(err, &e) || e.Field != "Idempotency-Key") {
				t.Fatalf("error %v does not name the Idempotency-Key header", err)
			}
		})
	}
}
