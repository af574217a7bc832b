package bench

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/approvaltoken"
	"github.com/airlockhq/airlock/internal/testkit"
)

// TestRawHandler drives the raw baseline's HTTP handler by hand: a
// lifecycle answers what it stored, and bad calls (no token, a body past
// its bound, bad JSON, no key, a decision other than approval, a second
// approval) get their 4xx or 500 and change nothing.
func TestRawHandler(t *testing.T) {
	t.Parallel()
	rs, err := openRaw(t.Context(), Config{Progress: io.Discard}, "rawhttp")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.close()
	base, stop, err := serveRaw(rs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	call := func(method, path, token, body string, header ...string) (int, string) {
		t.Helper()
		r, err := testkit.Call(t.Context(), hc, method, base+path, token, body, header...)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Raw) > 4096 {
			r.Raw = r.Raw[:4096] + "…"
		}
		return r.Status, r.Raw
	}
	key := []string{"Idempotency-Key", "key-1"}
	body := requestBody(1, "1h")
	refusals := []struct {
		name, method, path, token, body string
		header                          []string
		want                            int
	}{
		{"no token", "POST", "/raw/r1", "", body, key, http.StatusUnauthorized},
		{"wrong token", "POST", "/raw/r1", "nope", body, key, http.StatusUnauthorized},
		{"read without a token", "GET", "/raw/r1", "", "", nil, http.StatusUnauthorized},
		{"body past its bound", "POST", "/raw/r1", rawHTTPToken,
			`{"arguments":{"pad":"` + strings.Repeat("x", rawHTTPMaxBody) + `"}}`, key, http.StatusBadRequest},
		{"bad JSON", "POST", "/raw/r1", rawHTTPToken, `{"arguments":`, key, http.StatusBadRequest},
		{"no key", "POST", "/raw/r1", rawHTTPToken, body, nil, http.StatusBadRequest},
		{"no arguments", "POST", "/raw/r1", rawHTTPToken, `{"tool":"x"}`, key, http.StatusBadRequest},
		{"approve before create", "POST", "/raw/r1/decision", rawHTTPToken, `{"status":"approved"}`, nil, http.StatusInternalServerError},
	}
	for _, c := range refusals {
		if code, b := call(c.method, c.path, c.token, c.body, c.header...); code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, b, c.want)
		}
	}
	if code, b := call("GET", "/raw/r1", rawHTTPToken, ""); code != http.StatusInternalServerError {
		t.Fatalf("read after refused creates: %d %s, want 500 (no row)", code, b)
	}

	if code, b := call("POST", "/raw/r1", rawHTTPToken, body, key...); code != http.StatusCreated || !strings.Contains(b, `"state":"pending"`) {
		t.Fatalf("create: %d %s", code, b)
	}
	if code, b := call("POST", "/raw/r2", rawHTTPToken, body, key...); code != http.StatusInternalServerError {
		t.Errorf("a second create with the same key: %d %s, want 500 (the unique key)", code, b)
	}
	if code, b := call("POST", "/raw/r1/decision", rawHTTPToken, `{"status":"denied"}`); code != http.StatusBadRequest {
		t.Errorf("deny: %d %s, want 400", code, b)
	}
	if code, b := call("POST", "/raw/r1/decision", rawHTTPToken, `{"status":"approved"}`); code != http.StatusOK || !strings.Contains(b, `"state":"approved"`) {
		t.Fatalf("approve: %d %s", code, b)
	}
	if code, b := call("POST", "/raw/r1/decision", rawHTTPToken, `{"status":"approved"}`); code != http.StatusInternalServerError {
		t.Errorf("a second approval: %d %s, want 500 (the conditional update changes nothing)", code, b)
	}
	code, b := call("GET", "/raw/r1", rawHTTPToken, "")
	if code != http.StatusOK {
		t.Fatalf("read: %d %s", code, b)
	}
	var row rawRow
	if err := json.Unmarshal([]byte(b), &row); err != nil {
		t.Fatal(err)
	}
	if row.ID != "r1" || row.State != "approved" || row.IdempotencyKey != "key-1" || row.DecidedAt == nil || row.ExpiresAt == nil {
		t.Errorf("read %s", b)
	}
	var in struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal([]byte(body), &in); err != nil {
		t.Fatal(err)
	}
	if string(row.Arguments) != string(in.Arguments) {
		t.Errorf("arguments read back as %s, want the %s sent", row.Arguments, in.Arguments)
	}
}

// TestRawConsumeHandler drives the consume's baseline by hand: it holds a
// token to what Airlock's consume holds it to (its signature and key, the
// tool, the arguments up to their canonical form) and records one use a
// request; a refusal records nothing.
func TestRawConsumeHandler(t *testing.T) {
	t.Parallel()
	rs, err := openRaw(t.Context(), Config{Progress: io.Discard}, "rawconsume")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.close()
	key, err := approvaltoken.Generate()
	if err != nil {
		t.Fatal(err)
	}
	other, err := approvaltoken.Generate()
	if err != nil {
		t.Fatal(err)
	}
	base, stop, err := serveRaw(rs, approvaltoken.NewKeySet(key.Public()))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	consume := func(token, tool, args, bearer string) (int, string) {
		t.Helper()
		body, err := json.Marshal(consumeBody{Token: token, Tool: tool, Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatal(err)
		}
		r, err := testkit.Call(t.Context(), hc, "POST", base+"/raw/consume", bearer, string(body))
		if err != nil {
			t.Fatal(err)
		}
		return r.Status, r.Raw
	}
	pool, err := signRawTokens(key, 3, "t")
	if err != nil {
		t.Fatal(err)
	}
	forged, err := signRawTokens(other, 1, "t")
	if err != nil {
		t.Fatal(err)
	}
	first, _ := pool.take()
	second, _ := pool.take()
	tampered := []byte(second)
	tampered[len(tampered)/2] ^= 1
	for _, c := range []struct {
		name, token, tool, args, bearer string
		want                            int
	}{
		{"no bearer token", second, grantTool, grantArgs, "", http.StatusUnauthorized},
		{"another key's token", forged.tokens[0], grantTool, grantArgs, rawHTTPToken, http.StatusUnauthorized},
		{"an altered token", string(tampered), grantTool, grantArgs, rawHTTPToken, http.StatusUnauthorized},
		{"another tool", second, "payments.send", grantArgs, rawHTTPToken, http.StatusUnauthorized},
		{"other arguments", second, grantTool, `{"payment_id":"pay_bench","amount":4901,"currency":"GBP"}`, rawHTTPToken, http.StatusUnauthorized},
	} {
		if code, b := consume(c.token, c.tool, c.args, c.bearer); code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, b, c.want)
		}
	}
	// The arguments reordered and spelled otherwise are the same call.
	code, b := consume(first, grantTool, `{"currency":"GBP","amount":4.9e3,"payment_id":"pay_bench"}`, rawHTTPToken)
	var use tokenUse
	if err := json.Unmarshal([]byte(b), &use); code != http.StatusOK || err != nil || !strings.HasPrefix(use.RequestID, "req_raw") || use.ConsumedAt.IsZero() {
		t.Fatalf("first consume: %d %s, want 200 with its use", code, b)
	}
	if code, b := consume(first, grantTool, grantArgs, rawHTTPToken); code != http.StatusConflict {
		t.Errorf("the same token again: %d %s, want 409", code, b)
	}
	// The refused calls recorded nothing: second is still unused.
	if code, b := consume(second, grantTool, grantArgs, rawHTTPToken); code != http.StatusOK {
		t.Errorf("a token only refused before: %d %s, want 200", code, b)
	}
}
