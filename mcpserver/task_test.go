package mcpserver

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/provider"
)

// metaTasks is a 2026-07-28 request's _meta from a client that declares
// the Tasks extension.
const metaTasks = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

var rpcID atomic.Int64

// rpc POSTs one 2026-07-28 request (params without _meta, then meta) as
// the token secret and returns the HTTP status and the JSON-RPC answer,
// read from a JSON body or from the last data line of an SSE one.
func (h *httpBundle) rpc(t *testing.T, secret, method, name, params, meta string) (int, map[string]any) {
	t.Helper()
	if params != "" {
		params += ","
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s%s}}`, rpcID.Add(1), method, params, meta)
	resp, text := h.do(t, raw{body: body, secret: secret, header: modern(method, name)})
	if strings.Contains(text, "data: ") {
		lines := strings.Split(strings.TrimSpace(text), "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			if d, ok := strings.CutPrefix(lines[i], "data: "); ok {
				text = d
				break
			}
		}
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatalf("%s: %d %q: %v", method, resp.StatusCode, text, err)
	}
	return resp.StatusCode, m
}

// result is a JSON-RPC answer's result; the test fails on an error.
func result(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	r, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result: %v", m)
	}
	return r
}

// callTool calls a tool at 2026-07-28 and returns its result.
func (h *httpBundle) callTool(t *testing.T, secret, tool string, args any, meta string) map[string]any {
	t.Helper()
	_, m := h.rpc(t, secret, "tools/call", tool, `"name":"`+tool+`","arguments":`+mustJSON(t, args), meta)
	return result(t, m)
}

// newTask makes a pending request as the agent and an approval_status task
// on it, and returns the request's and the task's IDs.
func (h *httpBundle) newTask(t *testing.T, key string) (string, string) {
	t.Helper()
	alice := h.secrets[h.agent.ID]
	id := str(get(h.callTool(t, alice, ToolApprovalRequest, requestArgs(key, nil), meta), "structuredContent").(map[string]any), "approvalId")
	started := time.Now()
	created := h.callTool(t, alice, ToolApprovalStatus, map[string]any{"approvalId": id, "waitSeconds": 60}, metaTasks)
	if time.Since(started) > 10*time.Second {
		t.Fatalf("approval_status with a task waited %s", time.Since(started))
	}
	if created["resultType"] != "task" || created["status"] != "working" || str(created, "taskId") == "" {
		t.Fatalf("approval_status with waitSeconds from a client with tasks: %v, want a working task", created)
	}
	return id, str(created, "taskId")
}

// TestTasks: a client at 2026-07-28 that declares the Tasks extension gets
// a task for approval_status with a wait on a pending request; tasks/get
// follows the request (working, then completed with the decision);
// another agent's tasks/get, a client without the extension and a wrong
// Mcp-Name are refused; without the extension the call waits as before.
func TestTasks(t *testing.T) {
	t.Parallel()
	h := setupHTTP(t, nil)
	alice := h.secrets[h.agent.ID]
	id, task := h.newTask(t, "task-1")

	got := result(t, second(h.rpc(t, alice, "tasks/get", task, `"taskId":"`+task+`"`, metaTasks)))
	if got["resultType"] != "complete" || got["status"] != "working" || got["pollIntervalMs"] != float64(2000) || got["ttlMs"].(float64) <= 0 {
		t.Fatalf("tasks/get on a pending request: %v", got)
	}
	if _, err := h.decide(t, id, airlock.DecisionInput{Status: airlock.StateApproved, Note: "go"}); err != nil {
		t.Fatal(err)
	}
	got = result(t, second(h.rpc(t, alice, "tasks/get", task, `"taskId":"`+task+`"`, metaTasks)))
	res, _ := got["result"].(map[string]any)
	sc, _ := get(res, "structuredContent").(map[string]any)
	if got["status"] != "completed" || str(sc, "status") != "approved" || str(sc, "approvalId") != id {
		t.Fatalf("tasks/get after the approval: %v", got)
	}

	carol := h.secrets[h.other.ID]
	if _, m := h.rpc(t, carol, "tasks/get", task, `"taskId":"`+task+`"`, metaTasks); get(m, "error.code") != float64(-32602) {
		t.Errorf("another agent's tasks/get: %v, want -32602", m)
	}
	if _, m := h.rpc(t, alice, "tasks/get", "tsk_nosuchtask00000000", `"taskId":"tsk_nosuchtask00000000"`, metaTasks); get(m, "error.code") != float64(-32602) {
		t.Errorf("an unknown task: %v, want -32602", m)
	}
	if _, m := h.rpc(t, alice, "tasks/get", task, `"taskId":"`+task+`"`, meta); get(m, "error.code") != float64(CodeMissingClientCapability) {
		t.Errorf("tasks/get without the extension: %v, want -32021", m)
	}
	if status, m := h.rpc(t, alice, "tasks/get", "tsk_other", `"taskId":"`+task+`"`, metaTasks); status != 400 || get(m, "error.code") != float64(-32020) {
		t.Errorf("Mcp-Name not the taskId: %d %v, want 400 -32020", status, m)
	}
	noHeader := `{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"taskId":"` + task + `",` + metaTasks + `}}`
	if resp, body := h.do(t, raw{body: noHeader, secret: alice, header: map[string]string{"Mcp-Method": "tasks/get", "Mcp-Name": task}}); resp.StatusCode != 400 || !strings.Contains(body, "-32020") {
		t.Errorf("tasks/get without Mcp-Protocol-Version: %d %s, want 400 -32020", resp.StatusCode, body)
	}

	// Without the extension, approval_status waits and answers, as before.
	id2 := str(get(h.callTool(t, alice, ToolApprovalRequest, requestArgs("task-2", nil), meta), "structuredContent").(map[string]any), "approvalId")
	plain := h.callTool(t, alice, ToolApprovalStatus, map[string]any{"approvalId": id2, "waitSeconds": 1}, meta)
	if plain["resultType"] != "complete" || str(get(plain, "structuredContent").(map[string]any), "status") != "pending" {
		t.Fatalf("approval_status without the extension: %v", plain)
	}
	// A decided request is answered at once, with no task.
	decided := h.callTool(t, alice, ToolApprovalStatus, map[string]any{"approvalId": id, "waitSeconds": 30}, metaTasks)
	if decided["resultType"] != "complete" || str(get(decided, "structuredContent").(map[string]any), "status") != "approved" {
		t.Fatalf("approval_status with tasks on a decided request: %v", decided)
	}
}

// TestTaskCancelRacesDecision (T36): tasks/cancel racing a reviewer's
// approval. Each task ends with its request's one outcome: cancelled with
// a cancelled request, completed (approved) with an approved one; never
// both, never neither.
func TestTaskCancelRacesDecision(t *testing.T) {
	t.Parallel()
	h := setupHTTP(t, nil)
	alice := h.secrets[h.agent.ID]
	const n = 12
	var outcomes [2]int
	for i := range n {
		id, task := h.newTask(t, fmt.Sprintf("race-%d", i))
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, m := h.rpc(t, alice, "tasks/cancel", task, `"taskId":"`+task+`"`, metaTasks); result(t, m)["resultType"] != "complete" {
				t.Errorf("tasks/cancel: %v", m)
			}
		})
		wg.Go(func() { h.decide(t, id, airlock.DecisionInput{Status: airlock.StateApproved}) })
		wg.Wait()
		r, err := h.svc.Request(t.Context(), h.agent, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := result(t, second(h.rpc(t, alice, "tasks/get", task, `"taskId":"`+task+`"`, metaTasks)))
		switch {
		case r.State == airlock.StateCancelled && got["status"] == "cancelled" && got["result"] == nil:
			outcomes[0]++
		case r.State == airlock.StateApproved && got["status"] == "completed" &&
			str(get(got, "result.structuredContent").(map[string]any), "status") == "approved":
			outcomes[1]++
		default:
			t.Fatalf("request %s is %s, its task %v", id, r.State, got)
		}
	}
	t.Logf("%d cancelled, %d approved", outcomes[0], outcomes[1])
}

// second returns the second of two values: a JSON-RPC answer after its
// HTTP status.
func second[A, B any](_ A, b B) B { return b }

// TestTaskLifetime (T36): a task's time to live follows its request's
// deadline: ttlMs is the deadline plus provider.TaskKeep, counted from its
// creation; past the deadline the task completes with the expiry; an hour
// after it, the task is gone (-32602).
func TestTaskLifetime(t *testing.T) {
	t.Parallel()
	h := setupHTTP(t, nil)
	alice := h.secrets[h.agent.ID]
	id := str(get(h.callTool(t, alice, ToolApprovalRequest, requestArgs("ttl", func(m map[string]any) { m["expiresInMinutes"] = 5 }), meta), "structuredContent").(map[string]any), "approvalId")
	created := h.callTool(t, alice, ToolApprovalStatus, map[string]any{"approvalId": id, "waitSeconds": 60}, metaTasks)
	task := str(created, "taskId")
	if want := float64((5*time.Minute + provider.TaskKeep).Milliseconds()); created["ttlMs"] != want {
		t.Fatalf("ttlMs %v, want the deadline plus an hour: %v", created["ttlMs"], want)
	}
	getTask := func() map[string]any {
		_, m := h.rpc(t, alice, "tasks/get", task, `"taskId":"`+task+`"`, metaTasks)
		return m
	}
	h.clock.Advance(5*time.Minute + time.Second)
	got := result(t, getTask())
	if got["status"] != "completed" || str(get(got, "result.structuredContent").(map[string]any), "status") != "expired" {
		t.Fatalf("tasks/get past the deadline: %v", got)
	}
	h.clock.Advance(provider.TaskKeep - 2*time.Second)
	sweep := func(want int) {
		t.Helper()
		if n, err := h.svc.SweepTasks(t.Context()); err != nil || n != want {
			t.Fatalf("SweepTasks = %d, %v; want %d", n, err, want)
		}
	}
	sweep(0)
	if got := getTask(); get(got, "result.status") != "completed" {
		t.Fatalf("tasks/get just before the task's end: %v", got)
	}
	h.clock.Advance(2 * time.Second)
	if got := getTask(); get(got, "error.code") != float64(-32602) {
		t.Fatalf("tasks/get after the task's end: %v, want -32602", got)
	}
	// Its row is deleted by the sweep, once.
	sweep(1)
	sweep(0)
	if _, err := h.store.GetTask(t.Context(), task); airlock.ErrorCode(err) != airlock.CodeNotFound {
		t.Fatalf("the task's row after the sweep: %v, want not_found", err)
	}
}

// TestPromptTask (T36): approval_prompt from a client with the Tasks
// extension answers a task at once; tasks/get follows the request: allow
// only once its one execution is claimed for the task's owner, the same
// answer on every poll (two at once among them), deny with the note for a
// denial, cancelled for tasks/cancel, which leaves nothing to run.
func TestPromptTask(t *testing.T) {
	t.Parallel()
	h := setupHTTP(t, nil)
	alice := h.secrets[h.agent.ID]
	prompt := func(useID string) (string, string) {
		t.Helper()
		created := h.callTool(t, alice, ToolApprovalPrompt, map[string]any{"tool_name": "Bash", "input": map[string]any{"command": "rm -rf build", "z": 1}, "tool_use_id": useID}, metaTasks)
		if created["resultType"] != "task" || created["status"] != "working" {
			t.Fatalf("approval_prompt with tasks: %v", created)
		}
		task := str(created, "taskId")
		page, _, err := h.svc.Task(t.Context(), h.agent, task)
		if err != nil {
			t.Fatal(err)
		}
		return page.RequestID, task
	}
	getTask := func(task string) map[string]any {
		t.Helper()
		_, m := h.rpc(t, alice, "tasks/get", task, `"taskId":"`+task+`"`, metaTasks)
		return result(t, m)
	}
	behavior := func(got map[string]any) string {
		sc, _ := get(got, "result.structuredContent").(map[string]any)
		return str(sc, "behavior")
	}

	id, task := prompt("toolu_allow")
	if got := getTask(task); got["status"] != "working" {
		t.Fatalf("a pending prompt's task: %v", got)
	}
	if r, _ := h.svc.Request(t.Context(), h.agent, id, 0); r.Execution != nil {
		t.Fatal("claimed before any decision")
	}
	if _, err := h.decide(t, id, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	answers := make([]map[string]any, 2)
	for i := range answers {
		wg.Go(func() { answers[i] = getTask(task) })
	}
	wg.Wait()
	answers = append(answers, getTask(task))
	for _, got := range answers {
		upd, _ := get(got, "result.structuredContent.updatedInput").(map[string]any)
		if got["status"] != "completed" || behavior(got) != "allow" || upd["command"] != "rm -rf build" {
			t.Fatalf("an approved prompt's task: %v", got)
		}
	}
	if r, _ := h.svc.Request(t.Context(), h.agent, id, 0); r.Execution == nil || r.Execution.ClaimedBy != h.agent.ID {
		t.Fatalf("allowed without its execution claimed for the agent: %+v", r.Execution)
	}

	id, task = prompt("toolu_deny")
	if _, err := h.decide(t, id, airlock.DecisionInput{Status: airlock.StateDenied, Note: "not the build dir"}); err != nil {
		t.Fatal(err)
	}
	if got := getTask(task); got["status"] != "completed" || behavior(got) != "deny" || !strings.Contains(mustJSON(t, got), "not the build dir") {
		t.Fatalf("a denied prompt's task: %v", got)
	}

	id, task = prompt("toolu_cancel")
	h.rpc(t, alice, "tasks/cancel", task, `"taskId":"`+task+`"`, metaTasks)
	if got := getTask(task); got["status"] != "cancelled" {
		t.Fatalf("a cancelled prompt's task: %v", got)
	}
	if r, _ := h.svc.Request(t.Context(), h.agent, id, 0); r.State != airlock.StateCancelled || r.Execution != nil {
		t.Fatalf("after tasks/cancel: %s %+v", r.State, r.Execution)
	}
}
