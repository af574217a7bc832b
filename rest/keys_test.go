package rest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/approvaltoken"
)

// The public key set is served to anyone, cacheable, with public keys
// only; a rotation adds the new key first and keeps the old one.
func TestJWKSAndRotation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	jwks := func() []string {
		t.Helper()
		r := b.do(t, req{method: "GET", path: "/.well-known/jwks.json"})
		if r.status != http.StatusOK || r.header.Get("Cache-Control") != "public, max-age=300" ||
			r.header.Get("Content-Type") != "application/jwk-set+json" {
			t.Fatalf("GET jwks: %d %v %s", r.status, r.header, r.body)
		}
		if strings.Contains(string(r.body), `"d"`) {
			t.Fatalf("the key set holds a private key: %s", r.body)
		}
		if _, err := approvaltoken.ParseKeySet(r.body); err != nil {
			t.Fatalf("the key set does not parse: %v: %s", err, r.body)
		}
		var set struct {
			Keys []struct{ Kid, Kty, Crv, Alg string }
		}
		if err := json.Unmarshal(r.body, &set); err != nil {
			t.Fatal(err)
		}
		var kids []string
		for _, k := range set.Keys {
			if k.Kty != "OKP" || k.Crv != "Ed25519" || k.Alg != "EdDSA" {
				t.Fatalf("key %+v is not an Ed25519 EdDSA key", k)
			}
			kids = append(kids, k.Kid)
		}
		return kids
	}
	before := jwks()
	if len(before) != 1 {
		t.Fatalf("a new server publishes keys %v; want one", before)
	}
	r := b.do(t, req{method: "POST", path: "/v1/signing-keys/rotate", token: b.admin})
	if r.status != http.StatusOK {
		t.Fatalf("rotate: %d %s", r.status, r.body)
	}
	next := r.obj(t)
	if next["active"] != true || next["id"] == before[0] || strings.Contains(string(r.body), "seed") {
		t.Fatalf("rotate answered %s", r.body)
	}
	after := jwks()
	if len(after) != 2 || after[0] != next["id"] || after[1] != before[0] {
		t.Fatalf("after a rotation the key set is %v; want [%v %s]", after, next["id"], before[0])
	}
	list := b.do(t, req{method: "GET", path: "/v1/signing-keys", token: b.admin}).obj(t)["items"].([]any)
	if len(list) != 2 || list[1].(map[string]any)["active"] != false || list[1].(map[string]any)["published_until"] == nil {
		t.Fatalf("signing keys %v; want the new one active, the old one published until a time", list)
	}
}

// TestClaimReturnsApprovalToken: the claim's answer over REST carries a
// token that verifies against the served key set for exactly the
// approved call; reading the request again shows no token.
func TestClaimReturnsApprovalToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.approved(t)
	r := b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/execution", token: b.agentA})
	if r.status != http.StatusOK {
		t.Fatalf("claim: %d %s", r.status, r.body)
	}
	token, _ := r.obj(t)["execution"].(map[string]any)["approval_token"].(string)
	set, err := approvaltoken.ParseKeySet(b.do(t, req{method: "GET", path: "/.well-known/jwks.json"}).body)
	if err != nil {
		t.Fatal(err)
	}
	c, err := set.Verify(token, approvaltoken.Expect{Tool: "issue_refund", Args: []byte(`{"amount": 4900.0}`)})
	if err != nil || c.Subject != id {
		t.Fatalf("the claim's token %q: %+v, %v; want it to verify for %s", token, c, err, id)
	}
	if _, err := set.Verify(token, approvaltoken.Expect{Tool: "issue_refund", Args: []byte(`{"amount":4901}`)}); err == nil {
		t.Fatal("the token verifies for other arguments")
	}
	again := b.do(t, req{method: "GET", path: "/v1/approval-requests/" + id, token: b.agentA})
	if strings.Contains(string(again.body), "approval_token") {
		t.Fatalf("a read shows the token again: %s", again.body)
	}
}
