package approvaltoken

import (
	"strconv"
	"strings"
)

// A verifier reads the claims of every token. Sign writes them with
// encoding/json in one layout; plainClaims reads that layout, when every
// string in it is printable ASCII without an escape, in one pass instead
// of encoding/json's reflection. Any other spelling (members reordered or
// unknown, escapes, spaces, other numbers) goes to encoding/json, which
// decides: plainClaims only answers where encoding/json would answer the
// same (TestPlainClaimsAreJSONs, FuzzPlainClaims).

// plainClaims reads claims in Sign's layout, or reports false.
func plainClaims(payload []byte) (Claims, bool) {
	r := claimsReader{rest: string(payload)}
	var c Claims
	ok := r.lit(`{"iss":`) && r.str(&c.Issuer) &&
		r.lit(`,"sub":`) && r.str(&c.Subject) &&
		r.lit(`,"jti":`) && r.str(&c.ID) &&
		(!r.lit(`,"aud":`) || r.str(&c.Audience)) &&
		r.lit(`,"iat":`) && r.int(&c.IssuedAt) &&
		r.lit(`,"exp":`) && r.int(&c.Expiry) &&
		r.lit(`,"tool":`) && r.str(&c.Tool) &&
		r.lit(`,"args_digest":`) && r.str(&c.ArgsDigest) &&
		r.lit(`,"instance_id":`) && r.str(&c.InstanceID) &&
		r.lit(`,"decided_by":[`)
	for ok {
		var d Decider
		ok = r.lit(`{"principal":`) && r.str(&d.Principal) &&
			(!r.lit(`,"name":`) || r.str(&d.Name)) && r.lit(`}`)
		c.DecidedBy = append(c.DecidedBy, d)
		if !ok || !r.lit(`,`) {
			break
		}
	}
	if !ok || !r.lit(`],"decision_source":`) || !r.str(&c.DecisionSource) || !r.lit(`}`) || r.rest != "" {
		return Claims{}, false
	}
	return c, true
}

// claimsReader reads claims; rest is what is left to read.
type claimsReader struct {
	rest string
}

// lit reads s if it comes next.
func (r *claimsReader) lit(s string) bool {
	rest, ok := strings.CutPrefix(r.rest, s)
	if ok {
		r.rest = rest
	}
	return ok
}

// str reads a string of printable ASCII without '"' or '\', which is its
// own value.
func (r *claimsReader) str(into *string) bool {
	in := r.rest
	if len(in) == 0 || in[0] != '"' {
		return false
	}
	for i := 1; i < len(in); i++ {
		switch c := in[i]; {
		case c == '"':
			*into, r.rest = in[1:i], in[i+1:]
			return true
		case c < 0x20 || c > 0x7e || c == '\\':
			return false
		}
	}
	return false
}

// int reads an integer as JSON spells one (no leading zero, no '+'), of
// at most 18 digits, so it fits an int64.
func (r *claimsReader) int(into *int64) bool {
	in := r.rest
	i := 0
	if i < len(in) && in[i] == '-' {
		i++
	}
	start := i
	for i < len(in) && '0' <= in[i] && in[i] <= '9' {
		i++
	}
	n := i - start
	if n == 0 || n > 18 || n > 1 && in[start] == '0' {
		return false
	}
	v, err := strconv.ParseInt(in[:i], 10, 64)
	if err != nil {
		return false
	}
	*into, r.rest = v, in[i:]
	return true
}
