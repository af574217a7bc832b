// The tests declare the sampling and roots capabilities and read the
// logging one, which the SDK marks deprecated from protocol revision
// 2026-07-28, to see the gate pass them on.
//
//lint:file-ignore SA1019 the tests exercise the deprecated sampling, roots and logging features the gate forwards

package gate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fixtures returns testdata/rawupstream/fixtures.json, each entry compact
// as the scripted upstream sends it.
func fixtures(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	data, err := os.ReadFile("testdata/rawupstream/fixtures.json")
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	for k, v := range raw {
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			t.Fatal(err)
		}
		raw[k] = b.Bytes()
	}
	return raw
}

// upstreamInit returns the initialize params the scripted upstream got.
func (g *gateProc) upstreamInit(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(g.init)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// rawAnswer calls a tool of the scripted upstream that asks the client
// something and returns the answer the upstream got, as it got it.
func (g *gateProc) rawAnswer(t *testing.T, tool string) (result, rpcErr map[string]any) {
	t.Helper()
	res, err := g.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("%s: %+v %v", tool, res, err)
	}
	var answer struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(text(res)), &answer); err != nil {
		t.Fatalf("%s answered %q: %v", tool, text(res), err)
	}
	return answer.Result, answer.Error
}

// TestGateForwardsFaithfully puts the gate in front of the scripted
// upstream of testdata/rawupstream, whose JSON is in no alphabetical order
// and carries fields the Go SDK does not know, and compares what reaches
// the client byte for byte with what the upstream sent.
func TestGateForwardsFaithfully(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	raw := rawUpstream(t)
	want := fixtures(t)
	g := s.startGate(t, gateOptions{
		upstream:   []string{raw},
		rules:      `{"rules": [{"tool": "research", "action": "gate", "timeout": "2s"}]}`,
		clientInfo: &mcp.Implementation{Name: "fidelity-client", Title: "Fidelity client", Version: "3.1.4"},
		revision:   "2025-11-25", // byte for byte: no resultType added
	})
	ctx := context.Background()

	t.Run("lists reach the client in the upstream's order, byte for byte, page by page", func(t *testing.T) {
		page, err := g.cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.wire.result(t, "tools/list"); !bytes.Equal(got, want["tools/list"]) {
			t.Errorf("tools/list, first page:\n got %s\nwant %s", got, want["tools/list"])
		}
		if _, err := g.cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: page.NextCursor}); err != nil {
			t.Fatal(err)
		}
		if got := g.wire.result(t, "tools/list"); !bytes.Equal(got, want["tools/list page-2"]) {
			t.Errorf("tools/list, second page:\n got %s\nwant %s", got, want["tools/list page-2"])
		}
		if _, err := g.cs.ListPrompts(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := g.cs.ListResources(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := g.cs.ListResourceTemplates(ctx, nil); err != nil {
			t.Fatal(err)
		}
		for _, method := range []string{"prompts/list", "resources/list", "resources/templates/list"} {
			if got := g.wire.result(t, method); !bytes.Equal(got, want[method]) {
				t.Errorf("%s:\n got %s\nwant %s", method, got, want[method])
			}
		}
	})

	t.Run("the upstream's errors reach the client with their code, message and data", func(t *testing.T) {
		_, err := g.cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: "stale"})
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams || we.Message != "unknown cursor" || string(we.Data) != `{"cursor":"stale","hint":"list from the start"}` {
			t.Errorf("tools/list with a stale cursor: %v (%+v), want the upstream's error as it sent it", err, we)
		}
		// The SDK puts a message of its own on a -32601 (docs/adapters.md).
		_, err = g.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "zz_prompt"})
		if !errors.As(err, &we) || we.Code != jsonrpc.CodeMethodNotFound {
			t.Errorf("prompts/get, which the upstream does not know: %v, want -32601", err)
		}
	})

	t.Run("a tool's result reaches the client byte for byte", func(t *testing.T) {
		if _, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha_read", Arguments: map[string]any{}}); err != nil {
			t.Fatal(err)
		}
		if got := g.wire.result(t, "tools/call"); !bytes.Equal(got, want["result"]) {
			t.Errorf("tools/call:\n got %s\nwant %s", got, want["result"])
		}
	})

	t.Run("the client gets the upstream's capabilities, instructions and server info, but no tasks", func(t *testing.T) {
		ir := g.cs.InitializeResult()
		c := ir.Capabilities
		if c.Tools == nil || !c.Tools.ListChanged || c.Prompts == nil || c.Prompts.ListChanged || c.Resources == nil || c.Logging != nil || c.Completions != nil {
			t.Errorf("capabilities %s, want the upstream's tools, prompts and resources", mustJSON(t, c))
		}
		if got := g.wire.result(t, "initialize"); bytes.Contains(got, []byte(`"tasks"`)) {
			t.Errorf("the gate offers tasks, which it does not relay: %s", got)
		}
		if si := ir.ServerInfo; si.Name != "raw-upstream" || si.Version != "2.0.0" || si.Title != "raw-upstream (behind airlock gate)" {
			t.Errorf("server info %+v", si)
		}
		if !strings.HasPrefix(ir.Instructions, "A scripted server") {
			t.Errorf("instructions %q", ir.Instructions)
		}
	})

	t.Run("the upstream hears the client's name and version, the title noting the gate", func(t *testing.T) {
		info := g.upstreamInit(t)["clientInfo"]
		if want := map[string]any{"name": "fidelity-client", "title": "Fidelity client (via airlock gate)", "version": "3.1.4"}; !reflect.DeepEqual(info, want) {
			t.Errorf("the upstream got clientInfo %v, want %v", info, want)
		}
	})

	t.Run("the client's cancellation of a call reaches the upstream", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := g.cs.CallTool(cctx, &mcp.CallToolParams{Name: "block", Arguments: map[string]any{}})
			done <- err
		}()
		g.waitRun(t, "call block")
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled call returned %v", err)
		}
		g.waitRun(t, "notification notifications/cancelled")
	})

	t.Run("a tool that requires a task is refused before anyone is asked", func(t *testing.T) {
		before := countRequests(t, s)
		res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "research", Arguments: map[string]any{"topic": "tides"}})
		if err != nil || !res.IsError || !strings.Contains(text(res), "requires task augmentation") || !strings.Contains(text(res), "nobody was asked") {
			t.Fatalf("research: %+v %v, want an isError result saying the gate does not relay tasks", res, err)
		}
		if n := countRequests(t, s); n != before {
			t.Errorf("a reviewer was asked: %d requests, were %d", n, before)
		}
		if slices.ContainsFunc(g.runs(), func(r string) bool { return strings.HasPrefix(r, "call research") }) {
			t.Errorf("research reached the upstream: %q", g.runs())
		}
	})

	t.Run("a tool whose definition is not strict JSON is refused", func(t *testing.T) {
		// wipe's annotations say readOnlyHint false, and ReadOnlyHint true,
		// which encoding/json would take for the same key.
		before := countRequests(t, s)
		res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "wipe", Arguments: map[string]any{}})
		if err != nil || !res.IsError || !strings.Contains(text(res), "cannot read") {
			t.Fatalf("wipe: %+v %v, want an isError result saying the gate cannot read the tool", res, err)
		}
		if countRequests(t, s) != before || slices.Contains(g.runs(), "call wipe task=false") {
			t.Errorf("wipe asked for approval or ran: %q", g.runs())
		}
	})

	t.Run("a tool whose task support is optional is gated and runs without a task", func(t *testing.T) {
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "summarize", Arguments: map[string]any{"text": "long"}})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		r := s.pending(t, "summarize")
		if _, err := s.reviewer.Approve(ctx, r.ID, ""); err != nil {
			t.Fatal(err)
		}
		if res := <-done; res == nil || res.IsError {
			t.Fatalf("summarize: %+v", res)
		}
		if got := g.wire.result(t, "tools/call"); !bytes.Equal(got, want["result"]) {
			t.Errorf("the approved call's result:\n got %s\nwant %s", got, want["result"])
		}
		if !slices.Contains(g.runs(), "call summarize task=false") {
			t.Errorf("upstream runs %q", g.runs())
		}
		s.waitState(t, r.ID, airlock.StateApproved)
	})
}

// elicitations records the elicitation requests a test client got.
type elicitations struct {
	mu   sync.Mutex
	reqs []*mcp.ElicitParams
}

func (e *elicitations) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reqs = append(e.reqs, req.Params)
	if req.Params.Mode == "url" {
		return &mcp.ElicitResult{Action: "accept"}, nil
	}
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"zulu": "z"}}, nil
}

func (e *elicitations) last(t *testing.T) *mcp.ElicitParams {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.reqs) == 0 {
		t.Fatal("the client got no elicitation")
	}
	return e.reqs[len(e.reqs)-1]
}

// waitRun waits until the upstream recorded line.
func (g *gateProc) waitRun(t *testing.T, line string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !slices.Contains(g.runs(), line) {
		if time.Now().After(deadline) {
			t.Fatalf("the upstream did not record %q within 20s: %q", line, g.runs())
		}
		time.Sleep(10 * time.Millisecond) // another process: poll with a deadline
	}
}

// TestGateClientCapabilities: the upstream is told the capabilities the
// real client declared and no others; what the upstream asks of the
// client reaches it as sent (URL-mode elicitation too), and what the
// client cannot serve is answered with a real JSON-RPC error code.
func TestGateClientCapabilities(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	raw := rawUpstream(t)

	t.Run("a client that declares nothing", func(t *testing.T) {
		t.Parallel()
		g := s.startGate(t, gateOptions{upstream: []string{raw}, revision: "2025-11-25", client: &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}})
		if caps := g.upstreamInit(t)["capabilities"]; !reflect.DeepEqual(caps, map[string]any{}) {
			t.Errorf("the upstream was told capabilities %v, want none", caps)
		}
		for _, tool := range []string{"sample", "list_roots", "ask_form", "ask_url_anyway"} {
			_, e := g.rawAnswer(t, tool)
			if e["code"] != float64(jsonrpc.CodeMethodNotFound) || !strings.Contains(e["message"].(string), "did not declare") {
				t.Errorf("%s: the upstream got %v, want -32601 saying the client did not declare the capability", tool, e)
			}
		}
		if res, err := g.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask_url", Arguments: map[string]any{}}); err != nil || !res.IsError || !strings.Contains(text(res), "no url-mode") {
			t.Errorf("ask_url, which heeds the capabilities: %+v %v", res, err)
		}
	})

	t.Run("a client with form-mode elicitation only", func(t *testing.T) {
		t.Parallel()
		e := &elicitations{}
		g := s.startGate(t, gateOptions{upstream: []string{raw}, revision: "2025-11-25", client: &mcp.ClientOptions{
			Capabilities:       &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}},
			ElicitationHandler: e.handle,
		}})
		if caps := g.upstreamInit(t)["capabilities"]; !reflect.DeepEqual(caps, map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}) {
			t.Errorf("the upstream was told capabilities %v, want form-mode elicitation only", caps)
		}
		if _, err := g.rawAnswer(t, "ask_url_anyway"); err["code"] != float64(jsonrpc.CodeInvalidParams) {
			t.Errorf("a URL-mode elicitation to a form-only client: the upstream got %v, want -32602", err)
		}
		if res, _ := g.rawAnswer(t, "ask_form"); res["action"] != "accept" {
			t.Errorf("ask_form: the upstream got %v", res)
		}
	})

	t.Run("a client with sampling, both elicitation modes and roots", func(t *testing.T) {
		t.Parallel()
		e := &elicitations{}
		g := s.startGate(t, gateOptions{upstream: []string{raw}, revision: "2025-11-25", client: &mcp.ClientOptions{
			Capabilities: &mcp.ClientCapabilities{
				RootsV2:     &mcp.RootCapabilities{ListChanged: true},
				Sampling:    &mcp.SamplingCapabilities{},
				Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
			},
			ElicitationHandler: e.handle,
			CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				return nil, &jsonrpc.Error{Code: -32099, Message: "no model in this test", Data: json.RawMessage(`{"why":"test"}`)}
			},
		}})
		want := map[string]any{
			"roots":       map[string]any{"listChanged": true},
			"sampling":    map[string]any{},
			"elicitation": map[string]any{"form": map[string]any{}, "url": map[string]any{}},
		}
		if caps := g.upstreamInit(t)["capabilities"]; !reflect.DeepEqual(caps, want) {
			t.Errorf("the upstream was told capabilities %v, want %v", caps, want)
		}

		res, _ := g.rawAnswer(t, "ask_url")
		got := e.last(t)
		if got.Mode != "url" || got.URL != "https://example.com/authorize?state=xyz" || got.ElicitationID != "elicit-1" || res["action"] != "accept" {
			t.Errorf("URL-mode elicitation: the client got %+v, the upstream %v", got, res)
		}

		res, _ = g.rawAnswer(t, "ask_form")
		if got := g.wire.request(t, "elicitation/create"); !bytes.Equal(got, fixtures(t)["elicitation/form"]) {
			t.Errorf("the form reached the client as\n %s\nwant %s", got, fixtures(t)["elicitation/form"])
		}
		if !reflect.DeepEqual(res, map[string]any{"action": "accept", "content": map[string]any{"zulu": "z"}}) {
			t.Errorf("ask_form: the upstream got %v", res)
		}

		_, rpcErr := g.rawAnswer(t, "sample")
		if want := map[string]any{"code": float64(-32099), "message": "no model in this test", "data": map[string]any{"why": "test"}}; !reflect.DeepEqual(rpcErr, want) {
			t.Errorf("the client's sampling error reached the upstream as %v, want %v", rpcErr, want)
		}

		g.client.AddRoots(&mcp.Root{URI: "file:///work/project", Name: "project"})
		g.waitRun(t, "notification notifications/roots/list_changed")
		res, _ = g.rawAnswer(t, "list_roots")
		if roots, _ := res["roots"].([]any); len(roots) != 1 || roots[0].(map[string]any)["uri"] != "file:///work/project" {
			t.Errorf("roots/list: the upstream got %v", res)
		}
	})
}
