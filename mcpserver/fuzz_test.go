package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/airlockhq/airlock"
)

// FuzzApprovalRequestArgs (T11, MCP tool input): whatever arguments an
// agent sends, reading them never panics, and arguments that are accepted
// satisfy both the domain's rules and the published input schema.
//
//	go test -fuzz FuzzApprovalRequestArgs -fuzztime 60s ./mcpserver/
func FuzzApprovalRequestArgs(f *testing.F) {
	for _, seed := range []string{
		`{"kind":"agent_request","title":"t","proposal":{"mode":"advisory"},"idempotencyKey":"k"}`,
		`{"kind":"agent_request","title":"Which?","proposal":{"mode":"advisory"},"question":{"choices":["a","b"]},"sessionId":"ses_x","expiresInMinutes":5,"idempotencyKey":"k"}`,
		`{"kind":"work_change","title":"t","proposal":{"mode":"command","command":{"method":"work_move","input":{"itemId":"wi_1","columnKey":"done"}}},"idempotencyKey":"k"}`,
		`{"kind":"agent_request","title":"t","title":"u","proposal":{"mode":"advisory"},"idempotencyKey":"k"}`,
		`{"kind":"agent_request","title":"t","proposal":{"Mode":"advisory"},"idempotencyKey":"k"}`,
		`{"kind":"agent_request","title":"t","proposal":{"mode":"advisory"},"idempotencyKey":"k","expiresInMinutes":1e3}`,
		`{"kind":"agent_request","title":"t","proposal":{"mode":"advisory"},"idempotencyKey":"k","question":{"choices":null}}`,
		`{"kind":"agent_request","title":"\u0000","proposal":{"mode":"advisory"},"idempotencyKey":"k"}`,
		`[]`, `null`, ``, `{`, `{"proposal":[]}`, `{"question":{"choices":[1,2]}}`,
	} {
		f.Add([]byte(seed))
	}
	resolved := resolve(schema(approvalRequestSchema))
	f.Fuzz(func(t *testing.T, args []byte) {
		in, err := parseApprovalRequest(args, resolved)
		if err != nil {
			if airlock.ErrorCode(err) != airlock.CodeInvalidRequest {
				t.Fatalf("%q: error %v is not invalid_request", args, err)
			}
			return
		}
		if err := in.Validate(); err != nil {
			t.Fatalf("%q accepted, but the domain refuses it: %v", args, err)
		}
		var v map[string]any
		if err := json.Unmarshal(args, &v); err != nil {
			t.Fatalf("%q accepted, but it is not a JSON object: %v", args, err)
		}
		if err := resolved.Validate(v); err != nil {
			t.Fatalf("%q accepted, but the schema refuses it: %v", args, err)
		}
		if _, err := in.Fingerprint(); err != nil {
			t.Fatalf("%q accepted, but has no fingerprint: %v", args, err)
		}
	})
}
