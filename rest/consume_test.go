package rest

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/approvaltoken"
)

// consumeBody is the body of a consume: the token, and the call when tool
// is set.
func consumeBody(t testing.TB, token, tool, args, audience string) string {
	t.Helper()
	in := map[string]any{"token": token}
	if tool != "" {
		in["tool"] = tool
		in["arguments"] = json.RawMessage(args)
	}
	if audience != "" {
		in["audience"] = audience
	}
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// consume posts a consume as the verifier.
func (b *bundle) consume(t testing.TB, token, tool, args, audience string) resp {
	t.Helper()
	return b.do(t, req{method: "POST", path: "/v1/approval-tokens/consume", token: b.verifier,
		body: consumeBody(t, token, tool, args, audience)})
}

// claimWith has agent A ask for tool with args, the reviewer approve and
// agent A claim it, and returns the request's ID and its approval token.
func (b *bundle) claimWith(t testing.TB, tool, args string) (id, token string) {
	t.Helper()
	ctx := context.Background()
	a := b.callers["agentA"]
	inst, err := b.svc.RegisterInstance(ctx, a, airlock.InstanceInput{Name: "tool server's caller"})
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := b.svc.CreateRequest(ctx, a, inst.ID, airlock.NewID("key_"), airlock.CreateRequestInput{
		Tool: tool, Arguments: json.RawMessage(args), Timeout: "10m",
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Decide(ctx, b.callers["reviewer"], r.ID, airlock.DecisionInput{Status: airlock.StateApproved}); err != nil {
		t.Fatal(err)
	}
	r, err = b.svc.Claim(ctx, a, r.ID)
	if err != nil || r.Execution == nil || r.Execution.ApprovalToken == "" {
		t.Fatalf("claim: %v, no approval token", err)
	}
	return r.ID, r.Execution.ApprovalToken
}

// serverKey is the key the server signs with, read from its store: the
// test forges tokens with the key the server trusts.
func (b *bundle) serverKey(t testing.TB) approvaltoken.Key {
	t.Helper()
	keys, err := b.store.ListSigningKeys(context.Background())
	if err != nil || len(keys) == 0 {
		t.Fatalf("signing keys: %v %v", keys, err)
	}
	k, err := approvaltoken.FromSeed(keys[0].Seed)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestConsumeApprovalToken: the first consume of a claimed request's token
// is 200 with the use, every later one 409 already_used naming the first's
// time, whatever the token's jti; the use is an event on the request.
func TestConsumeApprovalToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, token := b.claimWith(t, "issue_refund", `{"amount":4900}`)
	r := b.consume(t, token, "issue_refund", `{"amount":4900}`, "")
	want(t, r, http.StatusOK, "")
	use := r.obj(t)
	claims := payloadOf(t, token)
	if use["request_id"] != id || use["jti"] != claims["jti"] || use["consumed_at"] == nil {
		t.Fatalf("consume answered %s; want request %s, jti %v", r.body, id, claims["jti"])
	}

	again := b.consume(t, token, "", "", "")
	want(t, again, http.StatusConflict, airlock.CodeAlreadyUsed)
	if p := again.obj(t); p["consumed_at"] != use["consumed_at"] || !strings.Contains(p["detail"].(string), use["consumed_at"].(string)) {
		t.Fatalf("the second consume answered %s; want consumed_at %v, in the detail too", again.body, use["consumed_at"])
	}

	// Another token for the same request, signed with the server's own
	// key: a request is approved to run once, whatever the jti.
	claims["jti"] = "jti_another"
	other := forgeSigned(t, b.serverKey(t), header(b.serverKey(t).ID), claims)
	want(t, b.consume(t, other, "", "", ""), http.StatusConflict, airlock.CodeAlreadyUsed)

	// An admin may consume too; and is refused the same way.
	r = b.do(t, req{method: "POST", path: "/v1/approval-tokens/consume", token: b.admin, body: consumeBody(t, token, "", "", "")})
	want(t, r, http.StatusConflict, airlock.CodeAlreadyUsed)

	log, err := b.store.ListEvents(context.Background(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var consumed []airlock.Event
	for _, e := range log {
		if e.Type == airlock.EventExecutionTokenConsumed {
			consumed = append(consumed, e)
		}
	}
	if len(consumed) != 1 || consumed[0].RequestID != id || consumed[0].Actor != b.callers["verifier"].ID || consumed[0].Subject != use["jti"] {
		t.Fatalf("execution.token_consumed events %+v; want one on %s by the verifier", consumed, id)
	}
}

// TestConsumeReachesEventStream: a consume's event reaches an open event
// stream at once, not at the stream's next heartbeat (15 s here), as every
// other change's does.
func TestConsumeReachesEventStream(t *testing.T) {
	t.Parallel()
	// No scheduler: its token-stamp watch wakes every stream now and then.
	b := setup(t, func(o *options) { o.noScheduler = true })
	id, token := b.claimWith(t, "issue_refund", `{"amount":4900}`)
	s := b.openStream(t, b.reviewer, "", nil)
	s.until(t, airlock.EventExecutionClaimed, id) // the stream has read everything before the consume
	want(t, b.consume(t, token, "issue_refund", `{"amount":4900}`, ""), http.StatusOK, "")
	if e, _ := s.until(t, airlock.EventExecutionTokenConsumed, id); e.typ != string(airlock.EventExecutionTokenConsumed) {
		t.Fatalf("got %s, want execution.token_consumed", e.typ)
	}
}

// TestConsumeInput: tool and arguments go together; a token is required.
func TestConsumeInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, token := b.claimWith(t, "issue_refund", `{"amount":4900}`)
	for _, tt := range []struct{ name, body, field string }{
		{"tool without arguments", `{"token":"` + token + `","tool":"issue_refund"}`, "arguments"},
		{"arguments without tool", `{"token":"` + token + `","arguments":{"amount":4900}}`, "tool"},
		{"no token", `{}`, "token"},
		{"an unknown field", `{"token":"` + token + `","jti":"x"}`, "jti"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := b.do(t, req{method: "POST", path: "/v1/approval-tokens/consume", token: b.verifier, body: tt.body, invalid: true})
			want(t, r, http.StatusBadRequest, airlock.CodeInvalidRequest)
			if f := r.obj(t)["field"]; f != tt.field {
				t.Fatalf("field %v, want %s: %s", f, tt.field, r.body)
			}
		})
	}
	// None of them consumed the token.
	want(t, b.consume(t, token, "", "", ""), http.StatusOK, "")
}

// TestConsumeT34 is T34 at the server: every forged and altered token is
// refused 400 invalid_token with its reason, and consumes nothing (the
// real token still consumes afterwards); the call's arguments equal under
// RFC 8785 are accepted. The forgeries are made against the server's own
// key, read from its store, or need no private key at all.
func TestConsumeT34(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const (
		tool = "send_mail"
		args = `{"to":"ada@example.com","amount":1,"subject":"é"}`
	)
	key := b.serverKey(t)
	stranger, err := approvaltoken.Generate()
	if err != nil {
		t.Fatal(err)
	}
	// Each case changes the genuine token (or the call it is consumed
	// for) and wants the reason.
	cases := []struct {
		name            string
		forge           func(t *testing.T, token string) string
		tool, args, aud string
		reason          string
	}{
		{name: "payload changed", reason: "signature", forge: func(t *testing.T, token string) string {
			h, _, sig := split(t, token)
			c := payloadOf(t, token)
			c["tool"] = "delete_everything"
			return h + "." + segment(t, c) + "." + sig
		}},
		{name: "header changed", reason: "signature", forge: func(t *testing.T, token string) string {
			_, p, sig := split(t, token)
			h := `{"typ":"airlock-approval+jwt","kid":"` + key.ID + `","alg":"EdDSA"}` // the same members, another order
			return base64.RawURLEncoding.EncodeToString([]byte(h)) + "." + p + "." + sig
		}},
		{name: "signature byte changed", reason: "signature", forge: func(t *testing.T, token string) string {
			h, p, sig := split(t, token)
			raw, err := base64.RawURLEncoding.DecodeString(sig)
			if err != nil {
				t.Fatal(err)
			}
			raw[10] ^= 1
			return h + "." + p + "." + base64.RawURLEncoding.EncodeToString(raw)
		}},
		{name: "alg none", reason: "algorithm", forge: func(t *testing.T, token string) string {
			_, p, _ := split(t, token)
			return segment(t, map[string]string{"alg": "none", "kid": key.ID, "typ": approvaltoken.Type}) + "." + p + "."
		}},
		{name: "HS256 with the public key as secret", reason: "algorithm", forge: func(t *testing.T, token string) string {
			_, p, _ := split(t, token)
			h := segment(t, map[string]string{"alg": "HS256", "kid": key.ID, "typ": approvaltoken.Type})
			mac := hmac.New(sha256.New, key.Private.Public().(ed25519.PublicKey))
			mac.Write([]byte(h + "." + p))
			return h + "." + p + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
		}},
		{name: "another key under the server's kid", reason: "signature", forge: func(t *testing.T, token string) string {
			return forgeSigned(t, stranger, header(key.ID), payloadOf(t, token))
		}},
		{name: "unknown kid", reason: "unknown_key", forge: func(t *testing.T, token string) string {
			return forgeSigned(t, stranger, header(stranger.ID), payloadOf(t, token))
		}},
		{name: "typ changed", reason: "type", forge: func(t *testing.T, token string) string {
			h := header(key.ID)
			h["typ"] = "JWT"
			return forgeSigned(t, key, h, payloadOf(t, token))
		}},
		{name: "expired", reason: "expired", forge: func(t *testing.T, token string) string {
			c := payloadOf(t, token)
			now := time.Now().Unix()
			c["iat"], c["exp"] = now-3600, now-60 // a minute ago: beyond the 30 s of leeway
			return forgeSigned(t, key, header(key.ID), c)
		}},
		{name: "audience not the tool server's", reason: "audience", aud: "tools.example.com",
			forge: func(t *testing.T, token string) string { return token }},
		{name: "an audience the tool server does not have", reason: "audience", forge: func(t *testing.T, token string) string {
			c := payloadOf(t, token)
			c["aud"] = "another-tool-server"
			return forgeSigned(t, key, header(key.ID), c)
		}},
		{name: "tool wrong", reason: "tool", tool: "send_fax", args: args,
			forge: func(t *testing.T, token string) string { return token }},
		{name: "one argument byte changed", reason: "arguments", tool: tool, args: strings.Replace(args, `"amount":1`, `"amount":2`, 1),
			forge: func(t *testing.T, token string) string { return token }},
		{name: "not a token", reason: "malformed", forge: func(t *testing.T, token string) string { return "not.a-token" }},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, token := b.claimWith(t, tool, args)
			r := b.consume(t, tt.forge(t, token), tt.tool, tt.args, tt.aud)
			want(t, r, http.StatusBadRequest, airlock.CodeInvalidToken)
			if got := r.obj(t)["reason"]; got != tt.reason {
				t.Fatalf("reason %v, want %s: %s", got, tt.reason, r.body)
			}
			// The refusal consumed nothing: the genuine token still
			// consumes, once.
			want(t, b.consume(t, token, tool, args, ""), http.StatusOK, "")
		})
	}
	for _, equal := range []struct{ name, args string }{
		{"the arguments as approved", args},
		{"keys reordered", `{"subject":"é","amount":1,"to":"ada@example.com"}`},
		{"1.0 for 1", `{"to":"ada@example.com","amount":1.0,"subject":"é"}`},
		{"escaped unicode", `{"to":"ada@example.com","amount":1,"subject":"\u00e9"}`},
	} {
		t.Run("accepted: "+equal.name, func(t *testing.T) {
			t.Parallel()
			_, token := b.claimWith(t, tool, args)
			want(t, b.consume(t, token, tool, equal.args, ""), http.StatusOK, "")
		})
	}
	t.Run("a genuine token of a request the server does not have", func(t *testing.T) {
		t.Parallel()
		_, token := b.claimWith(t, tool, args)
		c := payloadOf(t, token)
		c["sub"] = "apr_nosuchrequestxxxxxxxxxxxx"
		want(t, b.consume(t, forgeSigned(t, key, header(key.ID), c), "", "", ""), http.StatusNotFound, airlock.CodeNotFound)
	})
}

// split returns a compact JWS's three segments.
func split(t *testing.T, token string) (h, p, sig string) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q has %d segments", token, len(parts))
	}
	return parts[0], parts[1], parts[2]
}

// payloadOf decodes a token's claims, unverified.
func payloadOf(t testing.TB, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// segment is v's JSON in base64url.
func segment(t testing.TB, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(raw)
}

// header is a genuine token's header naming kid.
func header(kid string) map[string]string {
	return map[string]string{"alg": "EdDSA", "kid": kid, "typ": approvaltoken.Type}
}

// forgeSigned signs header and claims with k's Ed25519 key by hand, as a
// forger holding k would.
func forgeSigned(t testing.TB, k approvaltoken.Key, header map[string]string, claims map[string]any) string {
	t.Helper()
	input := segment(t, header) + "." + segment(t, claims)
	return input + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(k.Private, []byte(input)))
}

// TestConsumeAfterRotation: a token signed before a rotation still
// consumes, by the retired key the server still publishes, and one signed
// after it by the new key, which the key set the consumes had read before
// the rotation lacked.
func TestConsumeAfterRotation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, warm := b.claimWith(t, "issue_refund", `{"amount":4900}`)
	want(t, b.consume(t, warm, "", "", ""), http.StatusOK, "") // the consumes' key set is read now
	_, token := b.claimWith(t, "issue_refund", `{"amount":4900}`)
	want(t, b.do(t, req{method: "POST", path: "/v1/signing-keys/rotate", token: b.admin}), http.StatusOK, "")
	_, fresh := b.claimWith(t, "issue_refund", `{"amount":4900}`)
	if kid := func(tok string) string { k, _ := approvaltoken.KeyIDOf(tok); return k }; kid(token) == kid(fresh) {
		t.Fatalf("the rotation did not change the signing key")
	}
	want(t, b.consume(t, token, "issue_refund", `{"amount":4900}`, ""), http.StatusOK, "")
	want(t, b.consume(t, fresh, "issue_refund", `{"amount":4900}`, ""), http.StatusOK, "")
}
