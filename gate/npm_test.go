package gate_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGateNPMFilesystem puts airlock gate in front of a real MCP server
// from npm, @modelcontextprotocol/server-filesystem, pinned by
// e2e/npm-upstream/package-lock.json. Install it first:
//
//	npm ci --prefix e2e/npm-upstream
//
// Outside CI the test is skipped when node or the package is missing;
// under CI=true it fails instead.
func TestGateNPMFilesystem(t *testing.T) {
	t.Parallel()
	entry, err := filepath.Abs(filepath.Join("..", "e2e", "npm-upstream", "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(entry)
	}
	if err != nil {
		testkit.Unavailable(t, "the npm upstream test needs node and `npm ci --prefix e2e/npm-upstream`: "+err.Error())
	}
	// The server speaks 2025-11-25: a client at 2026-07-28 gets its
	// results with resultType added ahead of the server's bytes.
	for _, rev := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			npmFilesystem(t, node, entry, rev)
		})
	}
}

func npmFilesystem(t *testing.T, node, entry, rev string) {
	s := newServer(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := s.startGate(t, gateOptions{upstream: []string{node, entry, root}, revision: rev})
	ctx := context.Background()
	if v := g.cs.InitializeResult().ProtocolVersion; v != rev {
		t.Fatalf("negotiated %s, want %s", v, rev)
	}

	_, names := g.tools(t)
	for _, want := range []string{"read_text_file", "write_file", "move_file", "list_allowed_directories"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools %v lack %s", names, want)
		}
	}
	// The client gets the server's list as the server writes it: its order
	// of tools, of keys, of schema properties.
	want := directResult(t, []string{node, entry, root}, "tools/list")
	if rev >= "2026-07-28" {
		want = append([]byte(`{"resultType":"complete",`), want[1:]...)
	}
	if got := g.wire.result(t, "tools/list"); !bytes.Equal(got, want) {
		t.Errorf("tools/list through the gate differs from the server's own:\n got %s\nwant %s", got, want)
	}

	// Read-only tools pass straight through.
	before := countRequests(t, s)
	res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_allowed_directories", Arguments: map[string]any{}})
	if err != nil || res.IsError || !strings.Contains(text(res), root) {
		t.Fatalf("list_allowed_directories: %+v %v", res, err)
	}
	if countRequests(t, s) != before {
		t.Fatal("a read-only tool asked for approval")
	}

	// write_file waits for a reviewer, then writes exactly what was approved.
	file := filepath.Join(root, "hello.txt")
	args := json.RawMessage(`{"path":` + quote(file) + `,"content":"hi from behind the gate\n"}`)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_file", Arguments: args})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	r := s.pending(t, "write_file")
	if !jsonEqual(t, r.Arguments, args) {
		t.Fatalf("requested arguments %s, want %s", r.Arguments, args)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("the file exists before approval: %v", err)
	}
	if _, err := s.reviewer.Approve(ctx, r.ID, ""); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res == nil || res.IsError {
		t.Fatalf("approved write_file: %+v", res)
	}
	if data, err := os.ReadFile(file); err != nil || string(data) != "hi from behind the gate\n" {
		t.Fatalf("file after approval: %q %v", data, err)
	}
	if got := s.waitState(t, r.ID, airlock.StateApproved); got.Execution == nil || got.Execution.Status != airlock.ExecSucceeded {
		t.Fatalf("execution %+v", got.Execution)
	}
	res, err = g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": file}})
	if err != nil || res.IsError || !strings.Contains(text(res), "hi from behind the gate") {
		t.Fatalf("read_text_file: %+v %v", res, err)
	}

	// move_file is denied: the note reaches the agent and nothing moves.
	go func() {
		res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "move_file", Arguments: map[string]any{"source": file, "destination": file + ".bak"}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	r = s.pending(t, "move_file")
	if _, err := s.reviewer.Deny(ctx, r.ID, "keep the file where it is"); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res == nil || !res.IsError || !strings.Contains(text(res), "keep the file where it is") {
		t.Fatalf("denied move_file: %+v", res)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the denied move happened: %v", err)
	}
}

// directResult starts an MCP server without the gate, initializes it as a
// client that declares nothing, and returns its raw result for method.
func directResult(t *testing.T, command []string, method string) json.RawMessage {
	t.Helper()
	cmd := exec.Command(command[0], command[1:]...)
	stdin, stdout := testkit.Pipes(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"direct","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"` + method + `","params":{}}`,
	} {
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if m := decodeWire(sc.Bytes()); m.Method == "" && string(m.ID) == "2" {
			if m.Result == nil {
				t.Fatalf("%s answered %s", method, sc.Bytes())
			}
			return m.Result
		}
	}
	t.Fatalf("%s: no answer: %v", method, sc.Err())
	return nil
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
