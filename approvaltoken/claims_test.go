package approvaltoken

import (
	"encoding/json"
	"reflect"
	"testing"
)

// plainClaims reads Sign's layout without encoding/json; whatever it reads
// must be what encoding/json reads, and every other spelling must go to
// encoding/json.
func TestPlainClaimsAreJSONs(t *testing.T) {
	f := newFixture(t)
	quorum := f.claims
	quorum.Audience = "tools.example"
	quorum.DecidedBy = []Decider{{Principal: "alice", Name: "Alice"}, {Principal: "bob"}, {Principal: "policy:rule_1", Name: "refunds under $50"}}
	var signed []string
	for _, c := range []Claims{f.claims, quorum} {
		p, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		signed = append(signed, string(p))
		got, plain := plainClaims(p)
		if !plain || !reflect.DeepEqual(got, c) {
			t.Errorf("Sign's claims %s: plain %v, read %+v", p, plain, got)
		}
	}
	for _, p := range append(signed,
		`{"iss":"i","sub":"s","jti":"j","iat":1,"exp":2,"tool":"t","args_digest":"d","instance_id":"n","decided_by":[{"principal":"p"}],"decision_source":"human"}`,
		`{"iss":"i","sub":"s","jti":"j","iat":-0,"exp":-12,"tool":"t","args_digest":"d","instance_id":"n","decided_by":[{"principal":"p","name":""}],"decision_source":"human"}`,
		`{"iss":"i","sub":"s","jti":"j","iat":01,"exp":2,"tool":"t","args_digest":"d","instance_id":"n","decided_by":[{"principal":"p"}],"decision_source":"human"}`,
		`{"iss":"i","sub":"s","jti":"j","iat":1.0,"exp":2,"tool":"t","args_digest":"d","instance_id":"n","decided_by":[{"principal":"p"}],"decision_source":"human"}`,
		`{"iss":"i","sub":"s","jti":"j","iat":1,"exp":99999999999999999999,"tool":"t","args_digest":"d","instance_id":"n","decided_by":[{"principal":"p"}],"decision_source":"human"}`,
		`{"iss":"i","sub":"s","jti":"j","iat":1,"exp":2,"tool":"t\u0041","args_digest":"d","instance_id":"n","decided_by":[{"principal":"p"}],"decision_source":"human"}`,
		`{"iss":"i","sub":"s","jti":"j","iat":1,"exp":2,"tool":"é","args_digest":"d","instance_id":"n","decided_by":[{"principal":"p"}],"decision_source":"human"}`,
		`{"iss":"i","sub":"s","jti":"j","iat":1,"exp":2,"tool":"t","args_digest":"d","instance_id":"n","decided_by":[],"decision_source":"human"}`,
		`{"iss":"i","sub":"s","jti":"j","iat":1,"exp":2,"tool":"t","args_digest":"d","instance_id":"n","decided_by":null,"decision_source":"human"}`,
		`{"iss":"i","sub":"s","jti":"j","iat":1,"exp":2,"tool":"t","args_digest":"d","instance_id":"n","decided_by":[{"principal":"p"}],"decision_source":"human","tool":"u"}`,
		`{"iss":"i","sub":"s","jti":"j","iat":1,"exp":2,"tool":"t","args_digest":"d","instance_id":"n","decided_by":[{"principal":"p"}],"decision_source":"human"} `,
		`{"iss":"i","sub":"s","jti":"j","iat":1,"exp":2,"tool":"t","args_digest":"d","instance_id":"n","decided_by":[{"principal":"p"}],"decision_source":"human"}x`,
		`{"iss":"i", "sub":"s","jti":"j","iat":1,"exp":2,"tool":"t","args_digest":"d","instance_id":"n","decided_by":[{"principal":"p"}],"decision_source":"human"}`,
		`{"sub":"s","iss":"i","jti":"j","iat":1,"exp":2,"tool":"t","args_digest":"d","instance_id":"n","decided_by":[{"principal":"p"}],"decision_source":"human"}`,
		`{"iss":"i","sub":"s","jti":"j","iat":1,"exp":2,"tool":"t","args_digest":"d","instance_id":"n","decided_by":[{"principal":"p"},],"decision_source":"human"}`,
		`{"iss":"i","sub":"s","jti":"j","iat":1,"exp":2,"tool":"t","args_digest":"d","instance_id":"n","decided_by":[{"principal":"p"}],"decision_source":"human"`,
	) {
		got, plain := plainClaims([]byte(p))
		var want Claims
		err := json.Unmarshal([]byte(p), &want)
		switch {
		case plain && err != nil:
			t.Errorf("%s: read plain, but encoding/json refuses it: %v", p, err)
		case plain && !reflect.DeepEqual(got, want):
			t.Errorf("%s: plain %+v, encoding/json %+v", p, got, want)
		case !plain && !reflect.DeepEqual(got, Claims{}):
			t.Errorf("%s: not plain, but read %+v", p, got)
		}
	}
}

// FuzzPlainClaims: whatever plainClaims reads, encoding/json reads alike.
func FuzzPlainClaims(f *testing.F) {
	f.Add([]byte(`{"iss":"i","sub":"s","jti":"j","aud":"a","iat":1,"exp":2,"tool":"t","args_digest":"d","instance_id":"n","decided_by":[{"principal":"p","name":"N"},{"principal":"q"}],"decision_source":"human"}`))
	f.Fuzz(func(t *testing.T, p []byte) {
		got, plain := plainClaims(p)
		if !plain {
			return
		}
		var want Claims
		if err := json.Unmarshal(p, &want); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: plain %+v; encoding/json %+v, %v", p, got, want, err)
		}
	})
}
