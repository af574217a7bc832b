package replicas

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// tasksMeta is the _meta of a 2026-07-28 client that declares the MCP
// Tasks extension.
const tasksMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

var mcpID atomic.Int64

// mcp POSTs one 2026-07-28 request to base's /mcp as token and returns the
// JSON-RPC answer (from a JSON body, or the last data line of an SSE one);
// a transport error is returned, for a replica that was killed.
func (c *client) mcp(ctx context.Context, base, token, method, name, params string) (map[string]any, error) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s,%s}}`, mcpID.Add(1), method, params, tasksMeta)
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/mcp", bytes.NewReader([]byte(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	text := string(data)
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
		return nil, fmt.Errorf("%s: %d %q: %v", method, resp.StatusCode, text, err)
	}
	res, ok := m["result"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: %s", method, text)
	}
	return res, nil
}

// mustMCP is mcp for a replica that must answer.
func (c *client) mustMCP(t *testing.T, base, token, method, name, params string) map[string]any {
	t.Helper()
	res, err := c.mcp(context.Background(), base, token, method, name, params)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// taskOutcome is what tasks/get says of a task: "working", "cancelled", or
// "completed/<the request's status>".
func taskOutcome(t *testing.T, res map[string]any) string {
	t.Helper()
	status, _ := res["status"].(string)
	if status != "completed" {
		return status
	}
	r, _ := res["result"].(map[string]any)
	sc, _ := r["structuredContent"].(map[string]any)
	return "completed/" + fmt.Sprint(sc["status"])
}

// TestTasksAcrossReplicas is T36: tasks made through /mcp of one replica,
// which is then killed with SIGKILL; the client polls another replica,
// which reviewers decide through, some decisions racing the client's
// tasks/cancel; then the killed replica is restarted. Every replica
// answers every task with its request's one outcome: none lost, none
// answered two ways.
func TestTasksAcrossReplicas(t *testing.T) {
	t.Parallel()
	cl := startCluster(t, 2)
	made, other := cl.replicas[0], cl.replicas[1].URL
	const n = 8
	ids, tasks := make([]string, n), make([]string, n)
	for i := range n {
		args := fmt.Sprintf(`{"kind":"agent_request","title":"task %d","proposal":{"mode":"advisory"},"idempotencyKey":"task-%d"}`, i, i)
		res := cl.c.mustMCP(t, made.URL, cl.agent, "tools/call", "approval_request", `"name":"approval_request","arguments":`+args)
		sc, _ := res["structuredContent"].(map[string]any)
		ids[i], _ = sc["approvalId"].(string)
		res = cl.c.mustMCP(t, made.URL, cl.agent, "tools/call", "approval_status", fmt.Sprintf(`"name":"approval_status","arguments":{"approvalId":%q,"waitSeconds":60}`, ids[i]))
		if res["resultType"] != "task" || res["status"] != "working" {
			t.Fatalf("approval_status with tasks: %v", res)
		}
		tasks[i], _ = res["taskId"].(string)
	}
	made.Kill()

	get := func(base string, i int) string {
		return taskOutcome(t, cl.c.mustMCP(t, base, cl.agent, "tasks/get", tasks[i], fmt.Sprintf(`"taskId":%q`, tasks[i])))
	}
	for i := range n {
		if got := get(other, i); got != "working" {
			t.Fatalf("task %d through the surviving replica before any decision: %s", i, got)
		}
	}
	// Half approved; half approved while the client cancels.
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := cl.c.call(t, "POST", other, "/v1/approval-requests/"+ids[i]+"/decision", cl.reviewer, `{"status":"approved"}`)
			if r.Status != 200 && r.Status != 409 {
				t.Errorf("decide %s: %d %s", ids[i], r.Status, r.Raw)
			}
		})
		if i%2 == 1 {
			wg.Go(func() {
				cl.c.mustMCP(t, other, cl.agent, "tasks/cancel", tasks[i], fmt.Sprintf(`"taskId":%q`, tasks[i]))
			})
		}
	}
	wg.Wait()

	restarted := startReplica(t, cl.db, cl.flags...)
	var cancelled int
	for i := range n {
		r := cl.c.call(t, "GET", other, "/v1/approval-requests/"+ids[i], cl.agent, "")
		want := map[string]string{"approved": "completed/approved", "cancelled": "cancelled"}[r.Str("state")]
		if want == "" {
			t.Fatalf("request %s is %q after approve and cancel", ids[i], r.Str("state"))
		}
		if want == "cancelled" {
			cancelled++
		}
		for _, base := range []string{other, restarted.URL} {
			if got := get(base, i); got != want {
				t.Errorf("task %d (request %s, %s) through %s: %s", i, ids[i], r.Str("state"), base, got)
			}
		}
	}
	t.Logf("T36: %d tasks made on a replica killed with SIGKILL, answered by the other and by it restarted: %d approved, %d cancelled by a tasks/cancel racing the approval, 0 lost", n, n-cancelled, cancelled)
}
