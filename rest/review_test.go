package rest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// TestDecisionReviewClaim: a decision's review (what the reviewer's client
// showed them) is recorded with it and answered in decision.review, on
// both stores; each vote of a quorum keeps its own; a claim no client
// could make is refused and records nothing.
func TestDecisionReviewClaim(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		name := "sqlite"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts := []func(*options){withPolicy(t, quorumPolicy)}
			if pg {
				opts = append(opts, func(o *options) { o.postgres = true })
			}
			b := setup(t, opts...)
			decide := func(id, body string, invalid bool) resp {
				return b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/decision", token: b.reviewer, body: body, invalid: invalid})
			}
			// Refunds need two votes (quorumPolicy); other calls one.
			inst := b.instance(t, b.agentA)
			r := b.create(t, b.agentA, inst, "k1", `{"tool":"ls","arguments":{"path":"/"}}`)
			id := r.obj(t)["id"].(string)
			for _, bad := range []string{`{"seen_fraction":1.5,"seconds_open":3}`, `{"seen_fraction":0.5,"seconds_open":-1}`} {
				want(t, decide(id, `{"status":"approved","review":`+bad+`}`, true), http.StatusBadRequest, airlock.CodeInvalidRequest)
			}
			got := decide(id, `{"status":"approved","review":{"seen_fraction":0.25,"seconds_open":7}}`, false)
			want(t, got, http.StatusOK, "")
			if !strings.Contains(string(got.body), `"review":{"seen_fraction":0.25,"seconds_open":7}`) {
				t.Fatalf("the decision does not carry its review: %s", got.body)
			}
			read := b.do(t, req{method: "GET", path: "/v1/approval-requests/" + id, token: b.agentA})
			if !strings.Contains(string(read.body), `"review":{"seen_fraction":0.25,"seconds_open":7}`) {
				t.Fatalf("the request read back lacks the review: %s", read.body)
			}

			_, qid := b.pending(t, "10m")
			got = decide(qid, `{"status":"approved","review":{"seen_fraction":1,"seconds_open":12}}`, false)
			want(t, got, http.StatusOK, "")
			if m := got.obj(t); m["state"] != "pending" || !strings.Contains(string(got.body), `"review":{"seen_fraction":1,"seconds_open":12}`) {
				t.Fatalf("the vote does not carry its review: %s", got.body)
			}
		})
	}
}
