package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/mcpsdk"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPMRTR: under 2026-07-28, with --public-url, the Go SDK client
// declaring URL-mode elicitation gets input_required for a pending request
// from approval_status with a wait and from approval_prompt: one URL-mode
// elicitation of the request's inbox page. Its handler decides the request
// through the REST API, as a reviewer would, and accepts; the SDK's MRTR
// middleware retries and gets the decided result. A requestState that does
// not name the call's own request is refused; a retry on a request still
// pending is answered input_required again; a client without URL
// elicitation, and a server without a public URL, wait as before.
func TestMCPMRTR(t *testing.T) {
	const public = "https://airlock.example.test"
	srv, a := serveNew(t, "--public-url", public)
	agent := a.mintToken(testAdmin, "mrtr agent", "agent")
	other := a.mintToken(testAdmin, "mrtr other agent", "agent")
	reviewer := a.mintToken(testAdmin, "mrtr reviewer", "reviewer")

	var (
		mu    sync.Mutex
		asked []*mcp.ElicitParams
	)
	// The reviewer decides what the elicitation links to, then the user
	// accepts, as a client that opened the page would.
	decideThere := func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		p := req.Params
		mu.Lock()
		asked = append(asked, p)
		mu.Unlock()
		id, ok := strings.CutPrefix(p.URL, public+"/requests/")
		if p.Mode != "url" || !ok || !strings.Contains(p.Message, "person must approve or deny") {
			return nil, fmt.Errorf("elicitation %+v: want URL mode, the request's inbox page and a message saying a person decides there", p)
		}
		r, err := a.try("POST", "/v1/approval-requests/"+id+"/decision", reviewer, `{"status":"approved","note":"looked at it"}`)
		if err != nil || r.Status != http.StatusOK {
			return nil, fmt.Errorf("decide %s: %v %d %s", id, err, r.Status, r.Raw)
		}
		return &mcp.ElicitResult{Action: "accept"}, nil
	}
	urlCaps := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
	connect := func(url, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
		t.Helper()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "mrtr", Version: "v0"}, opts).Connect(t.Context(),
			&mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: mcpsdk.Bearer{Token: token, Next: http.DefaultTransport}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		if got := cs.InitializeResult().ProtocolVersion; got != "2026-07-28" {
			t.Fatalf("negotiated %s, want 2026-07-28", got)
		}
		return cs
	}
	call := func(cs *mcp.ClientSession, p *mcp.CallToolParams) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(t.Context(), p)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		if res.IsError {
			t.Fatalf("%s: %v", p.Name, res.Content)
		}
		return res
	}
	request := func(cs *mcp.ClientSession, key string) string {
		t.Helper()
		res := call(cs, &mcp.CallToolParams{Name: "approval_request", Arguments: map[string]any{
			"kind": "agent_request", "title": "Deploy on Friday?", "proposal": map[string]any{"mode": "advisory"}, "idempotencyKey": key}})
		return res.StructuredContent.(map[string]any)["approvalId"].(string)
	}
	status := func(res *mcp.CallToolResult) string {
		t.Helper()
		sc, _ := res.StructuredContent.(map[string]any)
		s, _ := sc["status"].(string)
		return s
	}

	cs := connect(srv.url, agent, &mcp.ClientOptions{ElicitationHandler: decideThere, Capabilities: urlCaps})
	t.Run("approval_status with a wait", func(t *testing.T) {
		id := request(cs, "mrtr-status")
		start := time.Now()
		res := call(cs, &mcp.CallToolParams{Name: "approval_status", Arguments: map[string]any{"approvalId": id, "waitSeconds": 60}})
		if got := status(res); got != "approved" {
			t.Fatalf("approval_status after the elicitation: %s, want approved; %v", got, res.StructuredContent)
		}
		mu.Lock()
		n, last := len(asked), asked[len(asked)-1]
		mu.Unlock()
		if n != 1 || last.URL != public+"/requests/"+id || last.ElicitationID != id {
			t.Fatalf("elicitations %d, last %+v; want one, of %s", n, last, public+"/requests/"+id)
		}
		t.Logf("approval_status: input_required, decided through REST, retried: %s", time.Since(start))
	})
	t.Run("approval_prompt", func(t *testing.T) {
		res := call(cs, &mcp.CallToolParams{Name: "approval_prompt", Arguments: map[string]any{
			"tool_name": "Bash", "input": map[string]any{"command": "make deploy"}, "tool_use_id": "toolu_mrtr_1"}})
		sc, _ := res.StructuredContent.(map[string]any)
		if sc["behavior"] != "allow" {
			t.Fatalf("approval_prompt after the elicitation: %v, want allow", sc)
		}
		mu.Lock()
		n := len(asked)
		mu.Unlock()
		if n != 2 {
			t.Fatalf("%d elicitations, want 2", n)
		}
	})

	// Without the SDK's retry loop: the wire's input_required, a forged
	// requestState, and a retry on a request still pending.
	manual := connect(srv.url, agent, &mcp.ClientOptions{Capabilities: urlCaps, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, errors.New("not called: the test answers the input requests itself")
		}})
	t.Run("requestState is checked, and a pending retry asks again", func(t *testing.T) {
		id := request(manual, "mrtr-manual")
		args := map[string]any{"approvalId": id, "waitSeconds": 1}
		res := call(manual, &mcp.CallToolParams{Name: "approval_status", Arguments: args})
		ir, ok := res.InputRequests["airlock_decision"].(*mcp.ElicitParams)
		if !res.NeedsInput() || !ok || ir.URL != public+"/requests/"+id || res.RequestState != id {
			t.Fatalf("approval_status on a pending request: %+v (%+v), want input_required with the inbox page and requestState %s", res, ir, id)
		}
		accepted := mcp.InputResponseMap{"airlock_decision": &mcp.ElicitResult{Action: "accept"}}
		theirs := request(connect(srv.url, other, nil), "mrtr-theirs")
		for _, forged := range []string{theirs, "apr_nosuchrequest00000000", "x"} {
			_, err := manual.CallTool(t.Context(), &mcp.CallToolParams{Name: "approval_status", Arguments: args, RequestState: forged, InputResponses: accepted})
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
				t.Fatalf("retry with requestState %q: %v, want -32602", forged, err)
			}
		}
		start := time.Now()
		res = call(manual, &mcp.CallToolParams{Name: "approval_status", Arguments: args, RequestState: id, InputResponses: accepted})
		if !res.NeedsInput() || res.RequestState != id {
			t.Fatalf("retry on a request still pending: %+v, want input_required again", res)
		}
		if took := time.Since(start); took < 900*time.Millisecond {
			t.Fatalf("the pending retry answered after %s, want after its wait of 1s", took)
		}
		a.call("POST", "/v1/approval-requests/"+id+"/decision", reviewer, `{"status":"denied","note":"not on a Friday"}`).want(t, 200, "deny")
		res = call(manual, &mcp.CallToolParams{Name: "approval_status", Arguments: args, RequestState: id, InputResponses: accepted})
		if res.NeedsInput() || status(res) != "denied" {
			t.Fatalf("retry once denied: %+v, want the denied result", res)
		}
	})
	t.Run("without URL elicitation the call waits", func(t *testing.T) {
		plain := connect(srv.url, agent, nil)
		id := request(plain, "mrtr-plain")
		res := call(plain, &mcp.CallToolParams{Name: "approval_status", Arguments: map[string]any{"approvalId": id, "waitSeconds": 1}})
		if res.NeedsInput() || status(res) != "pending" {
			t.Fatalf("approval_status without URL elicitation: %+v, want pending after the wait", res)
		}
	})
	t.Run("without a public URL the call waits", func(t *testing.T) {
		bare, b := serveNew(t)
		tok := b.mintToken(testAdmin, "bare agent", "agent")
		c := connect(bare.url, tok, &mcp.ClientOptions{Capabilities: urlCaps, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return nil, errors.New("not called")
			}})
		id := request(c, "mrtr-bare")
		res := call(c, &mcp.CallToolParams{Name: "approval_status", Arguments: map[string]any{"approvalId": id, "waitSeconds": 1}})
		if res.NeedsInput() || status(res) != "pending" {
			t.Fatalf("approval_status without --public-url: %+v, want pending after the wait", res)
		}
	})
}

// TestMCPMRTRQuestion: a question's answer through MRTR, over HTTP in raw
// JSON-RPC at 2026-07-28. The agent asked a reviewer (approval_request
// with question); approval_status with a wait, from a client declaring
// URL-mode elicitation, answers input_required at once: a URL elicitation
// of the question's inbox page whose message says the question and what
// kind of answer it takes. A retry before the reviewer answered waits its
// wait and asks again; once answered, the retry carries the answer. A
// reviewer who declines is the retry's denial with the note. A client that
// declares form-mode elicitation only is not asked to answer itself (its
// user is not the reviewer): its call waits, as before.
func TestMCPMRTRQuestion(t *testing.T) {
	const public = "https://airlock.example.test"
	srv, a := serveNew(t, "--public-url", public)
	agent := a.mintToken(testAdmin, "question agent", "agent")
	reviewer := a.mintToken(testAdmin, "question reviewer", "reviewer")
	hc := &http.Client{Timeout: time.Minute}
	n := 0
	// call posts one tools/call at 2026-07-28 and returns its result.
	call := func(name, args, caps, retry string) map[string]any {
		t.Helper()
		n++
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s%s,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":%s}}}`,
			n, name, args, retry, caps)
		r, err := testkit.Call(t.Context(), hc, "POST", srv.url+"/mcp", agent, body,
			"Accept", "application/json, text/event-stream", "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", name)
		if err != nil || r.Status != http.StatusOK {
			t.Fatalf("%s: %v %d %s", name, err, r.Status, r.Raw)
		}
		raw := r.Raw
		if i := strings.LastIndex(raw, "data: "); i >= 0 { // an SSE stream: its last event is the response
			raw, _, _ = strings.Cut(raw[i+len("data: "):], "\n")
		}
		var msg map[string]any
		if err := json.Unmarshal([]byte(raw), &msg); err != nil || msg["result"] == nil {
			t.Fatalf("%s: %s, want a result", name, r.Raw)
		}
		return msg["result"].(map[string]any)
	}
	const urlCaps, formCaps = `{"elicitation":{"url":{}}}`, `{"elicitation":{"form":{}}}`
	accepted := func(id string) string {
		return `,"requestState":"` + id + `","inputResponses":{"airlock_decision":{"action":"accept"}}`
	}
	ask := func(key, question string) string {
		t.Helper()
		res := call("approval_request", `{"kind":"agent_request","title":"When should the 2.4 release go out?","proposal":{"mode":"advisory"},"question":`+question+`,"idempotencyKey":"`+key+`"}`, urlCaps, "")
		id, _ := get(res, "structuredContent.approvalId").(string)
		if id == "" {
			t.Fatalf("approval_request: %v", res)
		}
		return id
	}
	wait := func(id string) string { return `{"approvalId":"` + id + `","waitSeconds":1}` }

	t.Run("answered", func(t *testing.T) {
		id := ask("q-free", `{}`)
		res := call("approval_status", wait(id), urlCaps, "")
		msg, _ := get(res, "inputRequests.airlock_decision.params.message").(string)
		if res["resultType"] != "input_required" || res["requestState"] != id ||
			get(res, "inputRequests.airlock_decision.params.mode") != "url" ||
			get(res, "inputRequests.airlock_decision.params.url") != public+"/requests/"+id ||
			!strings.Contains(msg, `"When should the 2.4 release go out?"`) || !strings.Contains(msg, "answer: free text") {
			t.Fatalf("approval_status on an open question: %v, want input_required with the question's page and the question", res)
		}
		start := time.Now()
		if res := call("approval_status", wait(id), urlCaps, accepted(id)); res["resultType"] != "input_required" {
			t.Fatalf("the retry before an answer: %v, want input_required again", res)
		}
		if took := time.Since(start); took < 900*time.Millisecond {
			t.Fatalf("the retry before an answer came after %s, want after its wait of 1s", took)
		}
		a.call("POST", "/v1/approval-requests/"+id+"/decision", reviewer, `{"status":"approved","answer":"Thursday morning"}`).want(t, 200, "answer")
		res = call("approval_status", wait(id), urlCaps, accepted(id))
		if res["resultType"] != "complete" || get(res, "structuredContent.answer") != "Thursday morning" ||
			get(res, "structuredContent.decision.answer") != "Thursday morning" {
			t.Fatalf("the retry once answered: %v, want the answer", res)
		}
	})
	t.Run("choices", func(t *testing.T) {
		id := ask("q-choices", `{"choices":["Tuesday","Thursday"]}`)
		res := call("approval_status", wait(id), urlCaps, "")
		if msg, _ := get(res, "inputRequests.airlock_decision.params.message").(string); !strings.Contains(msg, `answer: one of "Tuesday", "Thursday"`) {
			t.Fatalf("the elicitation of a question with choices: %v, want the choices", res)
		}
	})
	t.Run("declined", func(t *testing.T) {
		id := ask("q-declined", `{}`)
		if res := call("approval_status", wait(id), urlCaps, ""); res["resultType"] != "input_required" {
			t.Fatalf("approval_status on an open question: %v", res)
		}
		a.call("POST", "/v1/approval-requests/"+id+"/decision", reviewer, `{"status":"denied","note":"ask the release manager"}`).want(t, 200, "decline")
		res := call("approval_status", wait(id), urlCaps, accepted(id))
		if get(res, "structuredContent.status") != "denied" || get(res, "structuredContent.decision.note") != "ask the release manager" || get(res, "structuredContent.answer") != nil {
			t.Fatalf("the retry once declined: %v, want the denial with its note and no answer", res)
		}
	})
	t.Run("form mode only waits", func(t *testing.T) {
		id := ask("q-form", `{}`)
		res := call("approval_status", wait(id), formCaps, "")
		if res["resultType"] == "input_required" || get(res, "structuredContent.status") != "pending" {
			t.Fatalf("approval_status from a form-mode client: %v, want pending after the wait", res)
		}
	})
}
