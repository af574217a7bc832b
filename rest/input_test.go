package rest

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// nest returns a JSON object nested depth levels deep.
func nest(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + `{"a":1}` + strings.Repeat("}", depth-1)
}

// TestStrictInputRefusedBeforeStoring is T10 over HTTP: bodies that a
// lenient decoder would read differently from what a reviewer sees are 400
// and store nothing.
func TestStrictInputRefusedBeforeStoring(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, b.agentA)
	cases := []struct {
		name, body, field string
		header            map[string]string
	}{
		{name: "duplicate key", body: `{"tool":"ls","tool":"rm","arguments":{}}`},
		{name: "case-variant key", body: `{"tool":"ls","TOOL":"rm","arguments":{}}`},
		{name: "case-variant key in arguments", body: `{"tool":"ls","arguments":{"path":"/tmp","PATH":"/"}}`, field: "arguments"},
		{name: "duplicate key in arguments", body: `{"tool":"ls","arguments":{"a":1,"a":2}}`, field: "arguments"},
		{name: "invalid UTF-8", body: "{\"tool\":\"ls\",\"arguments\":{\"p\":\"\xff\xfe\"}}"},
		{name: "raw NUL", body: "{\"tool\":\"ls\",\"arguments\":{\"p\":\"a\x00b\"}}"},
		{name: "escaped NUL", body: `{"tool":"ls","arguments":{"p":"a\u0000b"}}`},
		{name: "unpaired surrogate", body: `{"tool":"ls","arguments":{"p":"\ud800"}}`},
		{name: "depth 65", body: `{"tool":"ls","arguments":` + nest(64) + `}`},
		{name: "unknown field", body: `{"tool":"ls","arguments":{},"priority":1}`, field: "priority"},
		{name: "state at create", body: `{"tool":"ls","arguments":{},"state":"approved"}`, field: "state"},
		{name: "decision at create", body: `{"tool":"ls","arguments":{},"decision":{"status":"approved"}}`, field: "decision"},
		{name: "id at create", body: `{"tool":"ls","arguments":{},"id":"apr_x"}`, field: "id"},
		{name: "expires_at at create", body: `{"tool":"ls","arguments":{},"expires_at":"2030-01-01T00:00:00Z"}`, field: "expires_at"},
		{name: "not an object", body: `["ls"]`},
		{name: "trailing data", body: `{"tool":"ls","arguments":{}} {}`},
		{name: "arguments not an object", body: `{"tool":"ls","arguments":"rm -rf /"}`, field: "arguments"},
		{name: "arguments missing", body: `{"tool":"ls"}`, field: "arguments"},
		{name: "bidi in tool name", body: "{\"tool\":\"ls\u202egnp.exe\",\"arguments\":{}}", field: "tool"},
		{name: "wrong type", body: `{"tool":7,"arguments":{}}`, field: "tool"},
		{name: "timeout below minimum", body: `{"tool":"ls","arguments":{},"timeout":"1us"}`, field: "timeout"},
		{name: "timeout in months", body: `{"tool":"ls","arguments":{},"timeout":"P1M"}`, field: "timeout"},
		{name: "number beyond float64", body: `{"tool":"ls","arguments":{"amount":1e400}}`, field: "arguments.amount"},
		{name: "number below float64", body: `{"tool":"ls","arguments":{"n":[1e-400]}}`, field: "arguments.n"},
		{name: "number beyond float64 in context", body: `{"tool":"ls","arguments":{},"context":{"n":-1e309}}`, field: "context.n"},
		{name: "empty body", body: ` `},
	}
	for _, c := range cases {
		h := map[string]string{"Idempotency-Key": "k-" + strings.ReplaceAll(c.name, " ", "-")}
		for k, v := range c.header {
			h[k] = v
		}
		r := b.do(t, req{method: "POST", path: "/v1/instances/" + inst + "/approval-requests", token: b.agentA,
			body: c.body, header: h, invalid: true})
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400; body %s", c.name, r.status, r.body)
			continue
		}
		p := r.obj(t)
		if p["code"] != string(airlock.CodeInvalidRequest) {
			t.Errorf("%s: code %v", c.name, p["code"])
		}
		if c.field != "" && !strings.HasPrefix(p["field"].(string), c.field) {
			t.Errorf("%s: field %v, want %s", c.name, p["field"], c.field)
		}
	}
	r := b.do(t, req{method: "GET", path: "/v1/approval-requests", token: b.reviewer})
	want(t, r, http.StatusOK, "")
	if items := r.obj(t)["items"].([]any); len(items) != 0 {
		t.Fatalf("%d requests stored from refused bodies: %s", len(items), r.body)
	}

	// The boundary: depth 64 is accepted, so the refusal above is about depth.
	ok := b.create(t, b.agentA, inst, "depth-64", `{"tool":"ls","arguments":`+nest(63)+`}`)
	want(t, ok, http.StatusCreated, "")
}

// TestStrictDecisionBody checks the decision body is strict too: a
// case-variant status is refused and the request stays pending.
func TestStrictDecisionBody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, id := b.pending(t, "10m")
	for _, body := range []string{
		`{"status":"denied","STATUS":"approved"}`,
		`{"status":"approved","status":"denied"}`,
		`{"status":"approved","expires_at":"2099-01-01T00:00:00Z"}`,
		`{"status":"expired"}`,
		`{"status":"approved","valid_for":"48h"}`,
		`{"status":"denied","valid_for":"1m"}`,
	} {
		r := b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/decision", token: b.reviewer, body: body, invalid: true})
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400; %s", body, r.status, r.body)
		}
	}
	r := b.do(t, req{method: "GET", path: "/v1/approval-requests/" + id, token: b.reviewer})
	if r.obj(t)["state"] != "pending" {
		t.Fatalf("after refused decisions: %s", r.body)
	}
	for _, body := range []string{`{"status":"done"}`, `{"status":"succeeded","Status":"failed"}`} {
		claimed := b.claimed(t)
		r := b.do(t, req{method: "PUT", path: "/v1/approval-requests/" + claimed + "/execution", token: b.agentA, body: body, invalid: true})
		want(t, r, http.StatusBadRequest, airlock.CodeInvalidRequest)
	}
}

// TestUnsupportedMediaType: a body that is not declared as JSON in UTF-8 is
// 415 on every route that reads one, and stores nothing; UTF-8 in any
// spelling is accepted.
func TestUnsupportedMediaType(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, b.agentA)
	create := "/v1/instances/" + inst + "/approval-requests"
	for _, ct := range []string{"", "text/plain", "application/json; charset=utf-16", "application/json; charset=ISO-8859-1", "application/jsonx", "application/json;;"} {
		for _, route := range []struct{ method, path, token string }{
			{"POST", create, b.agentA},
			{"POST", "/v1/instances", b.agentA},
			{"POST", "/v1/tokens", b.admin},
		} {
			r := b.do(t, req{method: route.method, path: route.path, token: route.token, body: `{"tool":"ls","arguments":{}}`,
				header: map[string]string{"Content-Type": ct, "Idempotency-Key": "media"}, invalid: true})
			if r.status != http.StatusUnsupportedMediaType {
				t.Errorf("%s %s with Content-Type %q: status %d, want 415; %s", route.method, route.path, ct, r.status, r.body)
				continue
			}
			if p := r.obj(t); p["code"] != string(airlock.CodeInvalidRequest) || p["field"] != "Content-Type" || p["status"] != float64(415) {
				t.Errorf("Content-Type %q: problem %s", ct, r.body)
			}
		}
	}
	list := b.do(t, req{method: "GET", path: "/v1/approval-requests", token: b.reviewer})
	if items := list.obj(t)["items"].([]any); len(items) != 0 {
		t.Fatalf("%d requests stored from refused bodies", len(items))
	}
	for i, ct := range []string{"application/json; charset=utf-8", "application/json; charset=UTF-8", "Application/JSON"} {
		r := b.do(t, req{method: "POST", path: create, token: b.agentA, body: `{"tool":"ls","arguments":{}}`,
			header: map[string]string{"Content-Type": ct, "Idempotency-Key": "utf8-" + strconv.Itoa(i)}})
		want(t, r, http.StatusCreated, "")
	}
}
