package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

// T07: the SDK gate killed with SIGKILL at each crash point, then restarted
// with the same journal. The gate is this test binary re-executed as a
// helper process (helperEnv); its "tool" appends a line to a file, which
// counts executions across processes.

// helperEnv, when set, makes the test binary a gate helper process
// instead of running tests; the other AIRLOCK_HELPER_* variables say what
// to do.
const helperEnv = "AIRLOCK_GATE_HELPER"

// Crash points, where the helper kills itself with SIGKILL.
const (
	crashNone = "none"
	// crashClaimAnswer: the server granted the claim; its answer dies with
	// the process, before the gate journals "claimed".
	crashClaimAnswer = "claim-answer"
	// crashAfterClaim: claimed and journaled, before the tool starts.
	crashAfterClaim = "after-claim"
	// crashDuringRun: the tool has acted, and has not returned.
	crashDuringRun = "during-run"
	// crashAfterRun: the tool returned; the gate journaled it and is about
	// to report.
	crashAfterRun = "after-run"
)

// helperResult is what a helper prints as its last stdout line.
type helperResult struct {
	RequestID string              `json:"request_id"`
	Outcome   string              `json:"outcome"` // ok, or the error's type
	Started   bool                `json:"started"` // InterruptedError.Started
	Here      bool                `json:"here"`    // AlreadyExecutedError.Here
	Status    string              `json:"status"`  // AlreadyExecutedError / Outcome status
	Error     string              `json:"error"`
	Recover   []map[string]string `json:"recover"`
}

// gateHelper is the helper process: one gate, one call.
func gateHelper() int {
	env := func(k string) string { return os.Getenv("AIRLOCK_HELPER_" + k) }
	crash := env("CRASH")
	die := func() { syscall.Kill(os.Getpid(), syscall.SIGKILL); select {} }
	tr := &killTransport{next: http.DefaultTransport, crash: crash, die: die}
	c, err := client.New(env("URL"), env("TOKEN"), client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		fmt.Println(err)
		return 2
	}
	g, err := client.NewGate(client.GateConfig{Client: c, InstanceID: env("INSTANCE"), JournalDir: env("JOURNAL"), PollWait: time.Second})
	if err != nil {
		fmt.Println(err)
		return 2
	}
	defer g.Close()
	ctx := context.Background()
	var res helperResult
	if env("RECOVER") != "" {
		recs, err := g.Recover(ctx)
		if err != nil {
			fmt.Println(err)
			return 2
		}
		for _, r := range recs {
			m := map[string]string{"request_id": r.RequestID, "status": string(r.Status)}
			if r.Err != nil {
				m["error"] = r.Err.Error()
			}
			res.Recover = append(res.Recover, m)
		}
	}
	call := client.Call{Tool: "append_line", Arguments: []byte(`{"file":"count","line":"ran"}`), AttemptKey: "t07", Timeout: "5m",
		OnPending: func(r *client.ApprovalRequest) { fmt.Println("pending", r.ID) }}
	tool := func(context.Context) error {
		if crash == crashAfterClaim {
			die()
		}
		f, err := os.OpenFile(env("COUNT"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.WriteString("ran\n"); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		if crash == crashDuringRun {
			die()
		}
		return nil
	}
	out, err := g.Run(ctx, call, tool)
	if out != nil {
		res.RequestID, res.Status = out.Request.ID, string(out.Status)
	}
	var ie *client.InterruptedError
	var ae *client.AlreadyExecutedError
	switch {
	case err == nil:
		res.Outcome = "ok"
	case errors.As(err, &ie):
		res.Outcome, res.Started, res.RequestID = "interrupted", ie.Started, ie.Request.ID
	case errors.As(err, &ae):
		res.Outcome, res.Here, res.Status, res.RequestID = "already_executed", ae.Here, string(ae.Status), ae.Request.ID
	default:
		res.Outcome = fmt.Sprintf("%T", err)
		res.Error = err.Error()
	}
	line, _ := json.Marshal(res)
	fmt.Println(string(line))
	return 0
}

// killTransport kills the process at the HTTP-level crash points: when the
// claim's answer arrives, and when the report is about to be sent.
type killTransport struct {
	next  http.RoundTripper
	crash string
	die   func()
}

func (k *killTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	execution := strings.HasSuffix(req.URL.Path, "/execution")
	if k.crash == crashAfterRun && execution && req.Method == http.MethodPut {
		k.die()
	}
	res, err := k.next.RoundTrip(req)
	if k.crash == crashClaimAnswer && execution && req.Method == http.MethodPost && err == nil && res.StatusCode == http.StatusOK {
		k.die()
	}
	return res, err
}

// helper is one helper process of a scenario.
type helper struct {
	t                              *testing.T
	b                              *bundle
	journal, count, instance, mode string
	recover                        bool
}

// run starts the helper, approves its request when it shows pending, and
// returns how it ended: killed (by SIGKILL) or with its result.
func (h *helper) run() (killed bool, res helperResult) {
	t := h.t
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1",
		"AIRLOCK_HELPER_URL="+h.b.url, "AIRLOCK_HELPER_TOKEN="+h.b.agentSecret,
		"AIRLOCK_HELPER_INSTANCE="+h.instance, "AIRLOCK_HELPER_JOURNAL="+h.journal,
		"AIRLOCK_HELPER_COUNT="+h.count, "AIRLOCK_HELPER_CRASH="+h.mode)
	if h.recover {
		cmd.Env = append(cmd.Env, "AIRLOCK_HELPER_RECOVER=1")
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var last string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "pending "); ok {
			if _, err := h.b.reviewer.Approve(context.Background(), id, ""); err != nil {
				t.Errorf("approve %s: %v", id, err)
			}
			continue
		}
		last = line
	}
	io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, res
		}
		t.Fatalf("helper %s: %v\nstdout: %s\nstderr: %s", h.mode, err, last, stderr.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(last), &res); err != nil {
		t.Fatalf("helper %s printed %q: %v\nstderr: %s", h.mode, last, err, stderr.String())
	}
	return false, res
}

// lines counts the tool's executions.
func lines(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "ran\n")
}

func TestGateCrashPoints(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		crash string
		// runs is how many times the tool ran before the crash.
		runs int
		// restart is the outcome of running the same call after the crash.
		outcome string
		started bool
		// status is what the server finally holds.
		status airlock.ExecutionStatus
	}{
		{crashClaimAnswer, 0, "interrupted", false, airlock.ExecUnknown},
		{crashAfterClaim, 0, "interrupted", true, airlock.ExecUnknown},
		{crashDuringRun, 1, "interrupted", true, airlock.ExecUnknown},
		{crashAfterRun, 1, "already_executed", false, airlock.ExecSucceeded},
	}
	for _, tt := range tests {
		for _, recover := range []bool{false, true} {
			name := tt.crash + "/restart-runs-again"
			if recover {
				name = tt.crash + "/restart-recovers-first"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				in, err := b.agent.RegisterInstance(context.Background(), name, nil)
				if err != nil {
					t.Fatal(err)
				}
				dir := t.TempDir()
				h := &helper{t: t, b: b, journal: filepath.Join(dir, "journal"), count: filepath.Join(dir, "count"), instance: in.ID, mode: tt.crash}
				if killed, res := h.run(); !killed {
					t.Fatalf("the helper was not killed at %s: %+v", tt.crash, res)
				}
				if n := lines(t, h.count); n != tt.runs {
					t.Fatalf("after the crash the tool ran %d times, want %d", n, tt.runs)
				}

				h.mode, h.recover = crashNone, recover
				_, res := h.run()
				if n := lines(t, h.count); n != tt.runs {
					t.Fatalf("the restart ran the tool again: %d runs, want %d", n, tt.runs)
				}
				want := tt.outcome
				if recover {
					// Recover settled it; the run finds the outcome recorded.
					want = "already_executed"
					if len(res.Recover) != 1 || res.Recover[0]["status"] != string(tt.status) || res.Recover[0]["error"] != "" {
						t.Fatalf("Recover: %+v, want one call reported %s", res.Recover, tt.status)
					}
				}
				if res.Outcome != want || (want == "interrupted" && res.Started != tt.started) || (want == "already_executed" && (!res.Here || res.Status != string(tt.status))) {
					t.Fatalf("restart: %+v, want %s (started %v, status %s)", res, want, tt.started, tt.status)
				}
				r, err := b.agent.GetRequest(context.Background(), res.RequestID)
				if err != nil || r.Execution == nil || r.Execution.Status != tt.status {
					t.Fatalf("server's execution: %+v %v, want %s", r, err, tt.status)
				}

				// And again: still never re-run, the same answer.
				_, res = h.run()
				if n := lines(t, h.count); n != tt.runs || res.Outcome != "already_executed" || !res.Here || res.Status != string(tt.status) {
					t.Fatalf("third run: %+v with %d runs", res, n)
				}
			})
		}
	}
}
