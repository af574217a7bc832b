package rest

import (
	"net/http"
	"testing"
)

// TestListInstances: reviewers and admins see every live instance, agents
// only their own; a deleted instance is not listed.
func TestListInstances(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a1, _ := b.pending(t, "10m")
	a2 := b.instance(t, b.agentA)
	other := b.instance(t, b.agentB)
	ids := func(token string) map[string]float64 {
		t.Helper()
		r := b.do(t, req{method: "GET", path: "/v1/instances", token: token})
		want(t, r, http.StatusOK, "")
		out := map[string]float64{}
		for _, it := range r.obj(t)["items"].([]any) {
			m := it.(map[string]any)
			out[m["id"].(string)] = m["pending_count"].(float64)
		}
		return out
	}
	for _, who := range []string{b.reviewer, b.admin} {
		got := ids(who)
		if len(got) != 3 || got[a1] != 1 || got[a2] != 0 {
			t.Fatalf("reviewer/admin list %v, want the 3 instances with a1 pending 1", got)
		}
	}
	if got := ids(b.agentB); len(got) != 1 || got[other] != 0 {
		t.Fatalf("agent B sees %v, want only its own", got)
	}
	want(t, b.do(t, req{method: "DELETE", path: "/v1/instances/" + a2, token: b.agentA}), http.StatusOK, "")
	if got := ids(b.agentA); len(got) != 1 || got[a1] != 1 {
		t.Fatalf("agent A sees %v after deleting one, want only %s", got, a1)
	}
}
