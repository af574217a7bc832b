package mcpserver

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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

// FuzzDecodeMessage: checkMessage's decoder reads every JSON value as the
// SDK's jsonrpc.DecodeMessage does — the same message, or the same error
// but for the name of the Go type decoded into — so what the transport
// checks is what the SDK will be handed.
//
//	go test -fuzz FuzzDecodeMessage -fuzztime 60s ./mcpserver/
func FuzzDecodeMessage(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"approval_status","arguments":{"approvalId":"apr_1"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"a","result":{}}`,
		`{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"no","data":[1]}}`,
		`{"jsonrpc":"2.0","id":7}`, `{"jsonrpc":"2.0"}`, `{"jsonrpc":"1.0","id":1,"method":"x"}`,
		`{"JSONRPC":"2.0","ID":1,"Method":"x"}`, `{"jsonrpc":"2.0","id":1.5,"method":"x"}`,
		`{"jsonrpc":"2.0","id":true,"method":"x"}`, `{"jsonrpc":"2.0","id":null,"method":""}`,
		`{"jsonrpc":"2.0","id":1,"method":7}`, `{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}`,
		`{"jsonrpc":"2.0","id":1,"method":"x","params":"\ud800"}`, `{"jsonrpc":"2.0","id":[],"method":"x"}`,
		`{"jsonrpc":"2.0","id":1e400,"method":"x"}`, `{"jsonrpc":"2.0","id":1,"error":"x"}`,
		`{"jsonrpc":"2.0","id":1,"method":"x","params":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}`,
		`{"jsonrpc":"2.0","id":1,"method":"x","params":"` + strings.Repeat("[", 1001) + `"}`,
		`[]`, `null`, `"2.0"`, `1`, `{}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return // checkMessage answers these before decoding
		}
		got, gotErr := decodeMessage(data)
		want, wantErr := jsonrpc.DecodeMessage(data)
		// An error names the Go type decoded into: Airlock's, the SDK's.
		sameText := func() bool {
			return strings.ReplaceAll(gotErr.Error(), "mcpserver.wireMessage", "jsonrpc2.wireDecode") == wantErr.Error()
		}
		if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && !sameText()) {
			t.Fatalf("%q: error %v, the SDK's %v", data, gotErr, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decoded %#v, the SDK %#v", data, got, want)
		}
	})
}
