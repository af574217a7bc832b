package hook_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlockhq/airlock/hook"
)

// FuzzParsePayload: no payload panics the parser or an agent's Call, and a
// call that is made carries the tool input byte for byte, with a key the
// server accepts.
func FuzzParsePayload(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var fx struct{ Payload json.RawMessage }
		if err := json.Unmarshal(b, &fx); err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(fx.Payload))
	}
	f.Add([]byte(`{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_use_id":"t","tool_input":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := hook.ParsePayload(data)
		if err != nil {
			return
		}
		for _, ag := range hook.Agents {
			call, err := ag.Call(p)
			if err != nil {
				continue
			}
			if !bytes.Equal(call.Arguments, p.ToolInput) || len(call.Key) > 200 || call.Tool != p.ToolName {
				t.Fatalf("%s: call %+v from %q", ag.Name, call, data)
			}
			_ = ag.Encode(hook.Answer{Verdict: hook.Deny, Reason: p.ToolName})
		}
	})
}
