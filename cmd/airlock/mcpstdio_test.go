package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
)

// stdioWire drives a real `airlock mcp` process with raw JSON-RPC lines,
// as a client at 2026-07-28 whose capabilities the Go SDK's client cannot
// declare (the Tasks extension) would.
type stdioWire struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *testkit.Output
	seen   []string
}

func (s *mcpServer) wire(t *testing.T) *stdioWire {
	t.Helper()
	w := &stdioWire{t: t, cmd: s.bridge(t, "--log-level", "info"), lines: make(chan string), stderr: testkit.NewOutput()}
	var stdout io.ReadCloser
	w.stdin, stdout = testkit.Pipes(t, w.cmd)
	w.cmd.Stderr = w.stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.cmd.Process.Kill(); w.cmd.Wait() })
	go func() {
		defer close(w.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
	}()
	return w
}

// call sends a request and returns its response, failing t when none
// comes within a minute. Other lines (notifications) are kept in seen.
func (w *stdioWire) call(id int, method, params string) map[string]any {
	w.t.Helper()
	if _, err := fmt.Fprintf(w.stdin, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params); err != nil {
		w.t.Fatal(err)
	}
	timeout := time.After(time.Minute)
	for {
		select {
		case line, ok := <-w.lines:
			if !ok {
				w.t.Fatalf("stdout ended before the response to %d; stderr:\n%s", id, w.stderr)
			}
			w.seen = append(w.seen, line)
			var msg map[string]any
			if err := json.Unmarshal([]byte(line), &msg); err != nil {
				w.t.Fatalf("stdout line is not JSON: %q", line)
			}
			if msg["id"] == float64(id) {
				return msg
			}
		case <-timeout:
			w.t.Fatalf("no response to %d within a minute; stdout:\n%s\nstderr:\n%s", id, strings.Join(w.seen, "\n"), w.stderr)
		}
	}
}

// close ends stdin and waits for exit 0.
func (w *stdioWire) close() {
	w.t.Helper()
	w.stdin.Close()
	for range w.lines {
	}
	if err := w.cmd.Wait(); err != nil {
		w.t.Errorf("airlock mcp after EOF: %v, want exit 0; stderr:\n%s", err, w.stderr)
	}
}

// meta2026 is a request's _meta at 2026-07-28 with the given client
// capabilities (JSON).
func meta2026(caps string) string {
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}`
}

const withTasks = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`

// approvalRequest makes an advisory request over w and returns its ID.
func (w *stdioWire) approvalRequest(id int, meta, key, extra string) string {
	w.t.Helper()
	res := w.call(id, "tools/call", `{"name":"approval_request","arguments":{"kind":"agent_request","title":"Ship 2.4 on Thursday?","proposal":{"mode":"advisory"},"idempotencyKey":"`+key+`"`+extra+`},`+meta+`}`)
	approval, _ := get(res, "result.structuredContent.approvalId").(string)
	if approval == "" {
		w.t.Fatalf("approval_request: %v", res)
	}
	return approval
}

// TestMCPStdioTasks: a client at 2026-07-28 that declares the Tasks
// extension gets tasks through `airlock mcp` as over HTTP, in the server's
// store: server/discover declares the extension; approval_status with a wait answers a task at once; tasks/get
// says working (tasks/update is acknowledged and changes nothing), then,
// after a reviewer's decision over REST, completed
// with approval_status's result; tasks/cancel withdraws another request,
// and its task is cancelled; tasks/get without the extension is -32021. A
// new `airlock mcp` process (the relay restarted) reads the first task
// with its outcome.
func TestMCPStdioTasks(t *testing.T) {
	t.Parallel()
	s := startMCPServer(t)
	w := s.wire(t)
	meta := meta2026(withTasks)
	if res := w.call(0, "server/discover", `{`+meta+`}`); get(res, "result.capabilities.extensions") == nil ||
		get(res, "result.capabilities.extensions").(map[string]any)["io.modelcontextprotocol/tasks"] == nil {
		t.Fatalf("server/discover through airlock mcp: %v, want the Tasks extension declared", res)
	}
	id := w.approvalRequest(1, meta, "stdio-task-1", "")

	res := w.call(2, "tools/call", `{"name":"approval_status","arguments":{"approvalId":"`+id+`","waitSeconds":60},`+meta+`}`)
	task, _ := get(res, "result.taskId").(string)
	if get(res, "result.resultType") != "task" || !strings.HasPrefix(task, "tsk_") || get(res, "result.status") != "working" {
		t.Fatalf("approval_status with a wait: %v, want a working task at once", res)
	}
	taskGet := func(n int, task, meta string) map[string]any {
		t.Helper()
		return w.call(n, "tasks/get", `{"taskId":"`+task+`",`+meta+`}`)
	}
	if res := taskGet(3, task, meta); get(res, "result.status") != "working" || !strings.Contains(fmt.Sprint(get(res, "result.statusMessage")), id) {
		t.Fatalf("tasks/get while pending: %v, want working, naming %s", res, id)
	}
	if res := taskGet(4, task, meta2026(`{}`)); get(res, "error.code") != float64(-32021) {
		t.Errorf("tasks/get without the extension: %v, want -32021", res)
	}
	if res := w.call(40, "tasks/update", `{"taskId":"`+task+`","inputResponses":{},`+meta+`}`); get(res, "result.resultType") != "complete" {
		t.Errorf("tasks/update: %v, want acknowledged", res)
	}
	if res := taskGet(41, task, meta); get(res, "result.status") != "working" {
		t.Errorf("tasks/get after tasks/update: %v, want still working", res)
	}
	s.api.call("POST", "/v1/approval-requests/"+id+"/decision", s.reviewer, `{"status":"approved","note":"Thursday is fine"}`).want(t, 200, "approve")
	res = taskGet(5, task, meta)
	if get(res, "result.status") != "completed" || get(res, "result.result.structuredContent.status") != "approved" ||
		get(res, "result.result.structuredContent.decision.note") != "Thursday is fine" {
		t.Fatalf("tasks/get once approved: %v, want completed with the approval", res)
	}

	other := w.approvalRequest(6, meta, "stdio-task-2", "")
	res = w.call(7, "tools/call", `{"name":"approval_status","arguments":{"approvalId":"`+other+`","waitSeconds":30},`+meta+`}`)
	task2, _ := get(res, "result.taskId").(string)
	if task2 == "" || task2 == task {
		t.Fatalf("a second task: %v", res)
	}
	if res := w.call(8, "tasks/cancel", `{"taskId":"`+task2+`",`+meta+`}`); get(res, "result.resultType") != "complete" {
		t.Fatalf("tasks/cancel: %v", res)
	}
	if res := taskGet(9, task2, meta); get(res, "result.status") != "cancelled" {
		t.Errorf("tasks/get after tasks/cancel: %v, want cancelled", res)
	}
	if r := s.api.call("GET", "/v1/approval-requests/"+other, s.reviewer, "").want(t, 200, "read"); r.Str("state") != "cancelled" {
		t.Errorf("the cancelled task's request is %q, want cancelled", r.Str("state"))
	}
	w.close()

	// The relay restarted: a new process, and nothing of the old one.
	again := s.wire(t)
	res = again.call(1, "tasks/get", `{"taskId":"`+task+`",`+meta+`}`)
	if get(res, "result.status") != "completed" || get(res, "result.result.structuredContent.status") != "approved" {
		t.Fatalf("tasks/get through a new airlock mcp: %v, want the completed task", res)
	}
	again.close()
}

// TestMCPStdioMRTR: a client at 2026-07-28 that declares URL-mode
// elicitation gets, through `airlock mcp` and from a server with
// --public-url, the input_required answer it gets over HTTP: the request's
// inbox page and a requestState; its retry with inputResponses, once a
// reviewer decided, is the decided result. A question's elicitation says
// the question and its choices, and the retry carries the reviewer's
// answer. A client without URL elicitation waits, as before.
func TestMCPStdioMRTR(t *testing.T) {
	t.Parallel()
	const public = "https://airlock.example.test"
	s := startMCPServer(t, "--public-url", public)
	w := s.wire(t)
	meta := meta2026(`{"elicitation":{"url":{}}}`)
	accepted := `"inputResponses":{"airlock_decision":{"action":"accept"}}`

	id := w.approvalRequest(1, meta, "stdio-mrtr-1", "")
	status := `{"name":"approval_status","arguments":{"approvalId":"` + id + `","waitSeconds":1},` + meta
	res := w.call(2, "tools/call", status+`}`)
	if get(res, "result.resultType") != "input_required" || get(res, "result.requestState") != id ||
		get(res, "result.inputRequests.airlock_decision.method") != "elicitation/create" ||
		get(res, "result.inputRequests.airlock_decision.params.mode") != "url" ||
		get(res, "result.inputRequests.airlock_decision.params.url") != public+"/requests/"+id {
		t.Fatalf("approval_status with a wait: %v, want input_required with the inbox page", res)
	}
	s.api.call("POST", "/v1/approval-requests/"+id+"/decision", s.reviewer, `{"status":"approved","note":"go"}`).want(t, 200, "approve")
	res = w.call(3, "tools/call", status+`,"requestState":"`+id+`",`+accepted+`}`)
	if get(res, "result.resultType") != "complete" || get(res, "result.structuredContent.status") != "approved" {
		t.Fatalf("the retry once approved: %v, want the approval", res)
	}

	q := w.approvalRequest(4, meta, "stdio-mrtr-q", `,"question":{"choices":["Tuesday","Thursday"]}`)
	status = `{"name":"approval_status","arguments":{"approvalId":"` + q + `","waitSeconds":1},` + meta
	res = w.call(5, "tools/call", status+`}`)
	msg := fmt.Sprint(get(res, "result.inputRequests.airlock_decision.params.message"))
	if get(res, "result.resultType") != "input_required" || !strings.Contains(msg, `"Ship 2.4 on Thursday?"`) || !strings.Contains(msg, `"Tuesday", "Thursday"`) {
		t.Fatalf("approval_status on a question: %v, want input_required saying the question and its choices", res)
	}
	s.api.call("POST", "/v1/approval-requests/"+q+"/decision", s.reviewer, `{"status":"approved","answer":"Thursday"}`).want(t, 200, "answer")
	res = w.call(6, "tools/call", status+`,"requestState":"`+q+`",`+accepted+`}`)
	if get(res, "result.structuredContent.answer") != "Thursday" {
		t.Fatalf("the retry once answered: %v, want the answer", res)
	}

	plain := w.approvalRequest(7, meta2026(`{}`), "stdio-mrtr-plain", "")
	res = w.call(8, "tools/call", `{"name":"approval_status","arguments":{"approvalId":"`+plain+`","waitSeconds":1},`+meta2026(`{}`)+`}`)
	if get(res, "result.resultType") == "input_required" || get(res, "result.structuredContent.status") != "pending" {
		t.Errorf("approval_status without URL elicitation: %v, want pending after the wait", res)
	}
	w.close()
}
