package deploy

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// listenPort is the port every recipe here puts Airlock on: the image's
// AIRLOCK_ADDR, the unit's, the proxies' upstream and the manifests'
// container port must all say it.
const listenPort = "8080"

// imageUID is the numeric user the image runs as, and the manifests' pods:
// not root.
const imageUID = 65532

// readFile returns a file of the repository, relative to deploy/.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// releaseLdflags asks scripts/release.sh for a snapshot build's -ldflags,
// so that the binary under test is stamped as a release stamps it.
func releaseLdflags(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("bash", "../scripts/release.sh", "--snapshot", "--ldflags").CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/release.sh --snapshot --ldflags: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// lifecycle runs one approval's whole life over HTTP against the server
// at base with the admin token admin: tokens, an instance, a request,
// the approval, the claim and the report. It fails t at the first
// answer that is not the one the protocol promises.
func lifecycle(t *testing.T, base, admin string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	call := func(method, path, token, body string, want int, header ...string) testkit.Reply {
		t.Helper()
		r, err := testkit.Call(ctx, hc, method, base+path, token, body, header...)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		if r.Status != want {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, r.Status, want, r.Raw)
		}
		return r
	}
	agent := call("POST", "/v1/tokens", admin, `{"name":"agent","role":"agent"}`, 201).Str("secret")
	reviewer := call("POST", "/v1/tokens", admin, `{"name":"Ada","role":"reviewer"}`, 201).Str("secret")
	instance := call("POST", "/v1/instances", agent, `{"name":"image test"}`, 201).Str("id")
	id := call("POST", "/v1/instances/"+instance+"/approval-requests", agent,
		`{"tool":"issue_refund","arguments":{"amount":4900},"timeout":"5m"}`, 201, "Idempotency-Key", "image-1").Str("id")
	if got := call("POST", "/v1/approval-requests/"+id+"/decision", reviewer, `{"status":"approved","valid_for":"1m"}`, 200).Str("state"); got != "approved" {
		t.Fatalf("after the approval, state %q", got)
	}
	if got := call("POST", "/v1/approval-requests/"+id+"/execution", agent, "", 200).Str("execution.status"); got != "claimed" {
		t.Fatalf("after the claim, execution.status %q", got)
	}
	if got := call("PUT", "/v1/approval-requests/"+id+"/execution", agent, `{"status":"succeeded","detail":"done"}`, 200).Str("execution.status"); got != "succeeded" {
		t.Fatalf("after the report, execution.status %q", got)
	}
	call("POST", "/v1/approval-requests/"+id+"/execution", agent, "", 409)
}
