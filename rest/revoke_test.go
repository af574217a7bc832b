package rest

import (
	"net/http"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// revokedWithin bounds how long a long-poll parked before its token was
// revoked may take to answer 401 after the revocation's answer.
const revokedWithin = time.Second

// TestLongPollOfRevokedToken checks that a long-poll parked before its
// token is revoked answers 401 unauthorized within a second of the
// revocation, whether or not the request is decided meanwhile, and that a
// long-poll of another token on the same request goes on waiting and hears
// the decision.
func TestLongPollOfRevokedToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		decide bool // decide the request right after the revocation
	}{
		{"revoked while it waits", false},
		{"revoked, then the request is decided", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			_, id := b.pending(t, "1h")
			waiters := b.svc.Waiters()
			revoked := b.longPoll(t, b.agentA, id, "60s")
			other := b.longPoll(t, b.reviewer, id, "60s")
			waitFor(t, "both long-polls to wait", func() bool { return b.svc.Waiters() == waiters+2 })

			want(t, b.do(t, req{method: "DELETE", path: "/v1/tokens/" + b.callers["agentA"].ID, token: b.admin}), http.StatusOK, "")
			since, what := time.Now(), "the revocation"
			if tc.decide {
				// Whichever wakes it, the decision or the revocation, the
				// long-poll must not answer with the decision.
				want(t, b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/decision", token: b.reviewer,
					body: `{"status":"approved"}`}), http.StatusOK, "")
				since, what = time.Now(), "the decision"
			}
			select {
			case got := <-revoked:
				want(t, got.r, http.StatusUnauthorized, airlock.CodeUnauthorized)
				t.Logf("the revoked token's long-poll answered 401 %s after %s", time.Since(since), what)
			case <-time.After(revokedWithin):
				t.Fatalf("the long-poll of a revoked token has not answered %s after %s", revokedWithin, what)
			}

			if !tc.decide {
				if n := b.svc.Waiters(); n != waiters+1 {
					t.Fatalf("%d long-polls wait after the revocation, want %d: the other token's must go on waiting", n, waiters+1)
				}
				want(t, b.do(t, req{method: "POST", path: "/v1/approval-requests/" + id + "/decision", token: b.reviewer,
					body: `{"status":"approved"}`}), http.StatusOK, "")
			}
			select {
			case got := <-other:
				want(t, got.r, http.StatusOK, "")
				if s := got.r.obj(t)["state"]; s != "approved" {
					t.Fatalf("the live token's long-poll answered state %v, want approved", s)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the live token's long-poll did not hear the decision within 5 s")
			}
		})
	}
}
