package notify

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
)

// TestPushMessage: a push is exactly {request_id, tool, deadline_at}
// whatever the request holds; a tool's hidden characters are shown as
// markers, and a long tool is cut on a character boundary.
func TestPushMessage(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2026, 12, 6, 12, 30, 0, 0, time.FixedZone("CET", 3600))
	r := airlock.Request{ID: "apr_x", Tool: "send\u202emoney\nrm", Arguments: json.RawMessage(`{"secret":"ARG"}`),
		AgentReasoning: "REASON", Context: json.RawMessage(`{"c":"CTX"}`), DeadlineAt: deadline}
	b := PushMessage(r).Marshal()
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil || len(m) != 3 || m["request_id"] != "apr_x" || m["deadline_at"] != "2026-12-06T11:30:00Z" {
		t.Fatalf("push %s", b)
	}
	if strings.ContainsAny(m["tool"], "\u202e\n") || !strings.Contains(m["tool"], "send") || !strings.Contains(m["tool"], "money") {
		t.Errorf("tool %q: hidden characters not shown as markers", m["tool"])
	}
	for _, s := range []string{"ARG", "REASON", "CTX"} {
		if strings.Contains(string(b), s) {
			t.Errorf("push %s carries %s", b, s)
		}
	}
	r.Tool = strings.Repeat("é", airlock.MaxPushTool)
	if tool := PushMessage(r).Tool; len(tool) > airlock.MaxPushTool || !utf8.ValidString(tool) || tool == "" {
		t.Errorf("long tool cut to %d bytes, valid %v", len(tool), utf8.ValidString(tool))
	}
}
