package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
)

// proc is the real airlock binary running as a child process.
type proc = testkit.Process

// startProcess runs the binary with args in dir, with the AIRLOCK_*
// variables of this process removed and env added, and waits until it
// listens. The process is killed at the end of the test if still running.
func startProcess(t testing.TB, dir string, env []string, args ...string) *proc {
	t.Helper()
	// Text logs, as the tests read them (withTextLogs), unless env says.
	return testkit.Serve(t, binary(t), dir, append([]string{"AIRLOCK_LOG_FORMAT=text"}, env...), args...)
}

// tourBlocks returns the ```sh blocks of the README's tour section.
func tourBlocks(t *testing.T, readme string) []string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## A five-minute tour\n")
	if !ok {
		t.Fatal(`README.md has no "## A five-minute tour" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)\n```sh\n(.*?)```\n").FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) < 2 {
		t.Fatalf("the tour has %d sh blocks; want the server's and the client's", len(blocks))
	}
	return blocks
}

// TestReadmeTour runs the README's five-minute tour as written against the
// real binary: its first sh block starts the server, the others run, in
// order, as one bash script. The only change is the server's address: the
// server gets port 0 through AIRLOCK_ADDR (the tour's command does not set
// --addr) and the script's URL line names the port it got.
func TestReadmeTour(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			testkit.Unavailable(t, "the README tour test runs the tour in bash, with curl: "+err.Error())
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := tourBlocks(t, string(readme))

	// The installed binary, which a signal stops (go run's child would
	// outlive it).
	serve := strings.TrimSpace(blocks[0])
	const installed = "airlock "
	if !strings.HasPrefix(serve, installed) || strings.ContainsAny(serve, "\n'\"\\$") || strings.Contains(serve, "--addr") {
		t.Fatalf("the tour's first block must be one `airlock serve …` line without quoting or --addr; it is:\n%s", serve)
	}
	srv := startProcess(t, t.TempDir(), []string{"AIRLOCK_ADDR=127.0.0.1:0"}, strings.Fields(strings.TrimPrefix(serve, installed))...)

	script := strings.Join(blocks[1:], "\n")
	const urlLine = "URL=http://127.0.0.1:8080\n"
	if strings.Count(script, urlLine) != 1 {
		t.Fatalf("the tour must set the server address once, as %q", urlLine)
	}
	script = strings.Replace(script, urlLine, "URL="+srv.URL+"\n", 1)
	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+script)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the tour failed: %v\n%s\nserver output:\n%s", err, out, srv.Out)
	}
	checkTourOutputs(t, string(readme), string(out))
	for _, want := range []string{
		`"role":"agent"`, `"role":"reviewer"`, `"name":"billing-bot on laptop"`,
		`"state":"pending","kind":"tool_call","tool":"issue_refund","arguments":{"payment_id": "payment_123", "amount": 4900, "currency": "GBP"}`,
		`"decision":{"status":"approved","note":"Duplicate charge confirmed."`,
		`"execution":{"claimed_at":`, `"status":"succeeded","finished_at":`,
		`"code":"already_executed"`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the tour's output lacks %s; output:\n%s", want, out)
		}
	}
}

// jsonKey finds the keys of a line of JSON, at every depth, in order.
var jsonKey = regexp.MustCompile(`"([a-z_]+)":`)

// checkTourOutputs holds each line of the tour's ```json blocks (what the
// README says a command prints) to the tour's real output: some line of
// the output has the same keys in the same order, or, for a line the
// README shortens with "…", has its keys among its own in that order. IDs,
// times and secrets differ from run to run; the shape may not.
func checkTourOutputs(t *testing.T, readme, out string) {
	t.Helper()
	_, section, _ := strings.Cut(readme, "\n## A five-minute tour\n")
	section, _, _ = strings.Cut(section, "\n## ")
	var got [][]string
	for line := range strings.Lines(out) {
		got = append(got, keysOf(line))
	}
	shown := 0
	for _, m := range regexp.MustCompile("(?s)\n```json\n(.*?)```\n").FindAllStringSubmatch(section, -1) {
		for line := range strings.Lines(m[1]) {
			want := keysOf(line)
			if len(want) == 0 {
				continue
			}
			shown++
			shortened := strings.Contains(line, "…")
			if !slices.ContainsFunc(got, func(keys []string) bool {
				if shortened {
					return isSubsequence(want, keys)
				}
				return slices.Equal(want, keys)
			}) {
				t.Errorf("the README shows a command printing\n%s\nbut no line the tour printed has those keys in that order; output:\n%s", line, out)
			}
		}
	}
	if shown < 5 {
		t.Errorf("the tour shows %d lines of JSON output; want what each step prints", shown)
	}
}

func keysOf(line string) []string {
	var keys []string
	for _, m := range jsonKey.FindAllStringSubmatch(line, -1) {
		keys = append(keys, m[1])
	}
	return keys
}

// isSubsequence reports whether sub's elements appear in s in order.
func isSubsequence(sub, s []string) bool {
	for _, k := range s {
		if len(sub) > 0 && sub[0] == k {
			sub = sub[1:]
		}
	}
	return len(sub) == 0
}

// TestReadmeMatchesBinary keeps the README's start-up notice and
// configuration table in lockstep with the code.
func TestReadmeMatchesBinary(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	first := startup{url: defaultURL, db: "airlock.db", self: "airlock", admin: "airlock_…"}
	if notice := first.text(); !strings.Contains(readme, "```text\n"+notice+"```\n") {
		t.Errorf("README does not show the first start's notice as printed:\n%s", notice)
	}
	// The first commands: the installed binary, which a signal stops.
	// A release's binary and image come first, then the build from
	// source, whose commands are the installed binary's.
	_, run, _ := strings.Cut(readme, "\n## Run it\n")
	run, _, _ = strings.Cut(run, "\n## ")
	iBinary, iImage, iSource := strings.Index(run, "**A release's binary.**"), strings.Index(run, "**The container image**"), strings.Index(run, "### From source\n\nInstall the binary, then run it:\n\n```sh\ngo install ./cmd/airlock\nairlock serve\n```\n")
	if iBinary < 0 || iImage < iBinary || iSource < iImage || !strings.Contains(run, "go install github.com/airlockhq/airlock/cmd/airlock@latest") {
		t.Error("README's Run it does not offer a release's binary, then the image, then `go install ./cmd/airlock` and `airlock serve` from source, with the module path form beside them")
	}
	if strings.Contains(readme, "go run ./cmd/airlock") {
		t.Error("README runs `go run ./cmd/airlock`, whose server a signal to go run leaves running; show the installed binary")
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	bindServeFlags(fs, &Config{})
	rows := 0
	fs.VisitAll(func(f *flag.Flag) {
		rows++
		row := fmt.Sprintf("| `--%s` | `%s` | ", f.Name, envName(f.Name))
		if !strings.Contains(readme, row) {
			t.Errorf("README's configuration table lacks the row for --%s (%q)", f.Name, row)
		}
	})
	if got := strings.Count(readme, "\n| `--"); got != rows {
		t.Errorf("README's configuration table has %d flag rows; serve has %d flags", got, rows)
	}
	// The README's test command: go test through the wrapper that names
	// the tests skipped for a missing part.
	// -short is the quick one.
	const test = "go run ./internal/testkit/gotest -race ./..."
	for _, want := range []string{"```sh\n" + test + "\n```\n", "```sh\ngo run ./internal/testkit/gotest -short ./...\n```\n"} {
		if !strings.Contains(readme, want) {
			t.Errorf("README lacks %q", want)
		}
	}
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "\ngo run ./internal/testkit/gotest -race -count=1 -timeout 20m ./...\n") {
		t.Errorf(".ci/run does not run the README's test command (%s) with -count=1 -timeout 20m", test)
	}
}

// TestKillRestart is T08 on SQLite: under a concurrent create and decide
// load, the server is killed with SIGKILL and restarted 20 times. No
// acknowledged create or decision may be lost, and requests whose deadline
// passed while the server was down must be expired within 2 s of restart.
//
// It does not run in parallel with the package's other tests: the 2 s
// bound on expiring overdue requests is a property of the restarted
// server, which the other kill-and-restart tests' load would measure too.
func TestKillRestart(t *testing.T) {
	const (
		restarts = 20
		workers  = 4
		perCycle = 8 // acknowledged operations before each kill; each write syncs to disk
		// overdueWindow is the window of the requests that fall due while the
		// server is down: it is killed at once after they are created.
		overdueWindow = 100 * time.Millisecond
	)
	dir := t.TempDir()
	args := []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "airlock.db"), "--admin-token", testAdmin,
		"--min-timeout", "10ms", "--rate-limit", "1000000", "--log-level", "error"}
	srv := startProcess(t, dir, nil, args...)
	c := newAPI(t, srv.URL)
	agent := c.mintToken(testAdmin, "load agent", "agent")
	reviewer := c.mintToken(testAdmin, "load reviewer", "reviewer")
	loadInst := c.call("POST", "/v1/instances", agent, `{"name":"load"}`).want(t, 201, "instance").Str("id")
	overdueInst := c.call("POST", "/v1/instances", agent, `{"name":"overdue"}`).want(t, 201, "instance").Str("id")

	load := testkit.NewLoad(restarts * perCycle * 4)
	call := func(method, path, token, body string, header ...string) (testkit.Reply, error) {
		r, err := c.try(method, path, token, body, header...)
		return r.Reply, err
	}
	var overdue []string
	for cycle := 0; ; cycle++ {
		if cycle > 0 {
			restarted := time.Now()
			srv = startProcess(t, dir, nil, args...)
			c.url = srv.URL
			checkOverdueExpired(t, c, reviewer, overdueInst, overdue, restarted)
		}
		if cycle == restarts {
			break
		}

		// A burst of load; the kill lands while it runs.
		burst := testkit.StartBurst(workers, perCycle, uint64(cycle), func(rng *rand.Rand, w, n int) bool {
			return load.Step(t, call, rng, w%2 == 1, loadInst, agent, reviewer, fmt.Sprintf("c%d-w%d-%d", cycle, w, n), n)
		})
		srv.AwaitLoad(t, burst.Enough, fmt.Sprintf("%d operations acknowledged", perCycle))
		// A request that falls due while the server is down.
		r := c.call("POST", "/v1/instances/"+overdueInst+"/approval-requests", agent,
			fmt.Sprintf(`{"tool":"overdue","arguments":{},"timeout":"%s"}`, overdueWindow),
			"Idempotency-Key", fmt.Sprintf("overdue-%d", cycle)).want(t, 201, "create an overdue request")
		overdue = []string{r.Str("id")}
		deadline, err := time.Parse(time.RFC3339Nano, r.Str("deadline_at"))
		if err != nil {
			t.Fatal(err)
		}
		srv.Kill()
		if time.Now().After(deadline) {
			t.Logf("cycle %d: killed after the overdue request's deadline; its check proves less this time", cycle)
		}
		burst.Stop()
		c.hc.CloseIdleConnections()
		// The scenario needs the deadlines to pass while the server is down.
		time.Sleep(time.Until(deadline.Add(10 * time.Millisecond)))
	}

	// Every acknowledged create exists; every acknowledged decision holds.
	states := testkit.RequestStates(func(cursor string) map[string]any {
		return c.call("GET", "/v1/approval-requests?limit=200&instance_id="+loadInst+cursor, reviewer, "").want(t, 200, "list").Body
	})
	lost := load.Lost(t, states)
	t.Logf("%d kill -9 restarts: %d creates and %d decisions acknowledged, %d lost; %d requests stored",
		restarts, load.Creates.Load(), load.Decisions.Load(), lost, len(states))
}

// checkOverdueExpired checks that the overdue requests are expired, by the
// scheduler, within 2 s of the restart. It polls the list of pending
// requests, with a deadline: a GET of the request itself would expire it
// on the spot and prove nothing about the scheduler.
func checkOverdueExpired(t *testing.T, c *api, reviewer, inst string, ids []string, restarted time.Time) {
	t.Helper()
	limit := restarted.Add(2 * time.Second)
	for {
		r := c.call("GET", "/v1/approval-requests?state=pending&instance_id="+inst, reviewer, "").want(t, 200, "list pending")
		still := slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(r.Raw, id) })
		if !still {
			break
		}
		if time.Now().After(limit) {
			t.Fatalf("overdue requests still pending 2s after the restart: %s", r.Raw)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, id := range ids {
		r := c.call("GET", "/v1/approval-requests/"+id, reviewer, "").want(t, 200, "read overdue request")
		decided, err := time.Parse(time.RFC3339Nano, r.Str("decision.decided_at"))
		if r.Str("state") != "expired" || r.Str("decision.decided_by") != "system:expiry" || err != nil || decided.After(limit) {
			t.Errorf("overdue request %s: want expired by the scheduler within 2s of restart (%s); got %s",
				id, restarted.Format(time.RFC3339Nano), r.Raw)
		}
	}
}
