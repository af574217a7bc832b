package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testkit/hostile"
)

// TestClientRefusesBadAnswers: where a resource is expected, an empty 2xx,
// HTML, a body cut short or another request is an *AnswerError naming the
// method, the path and the status, never a zero value taken for the
// resource.
func TestClientRefusesBadAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A create names no id in advance and may be answered denied, so only
	// its body is checked here; the gates check the rest.
	faults := map[hostile.Call][]hostile.Fault{
		hostile.Create: {hostile.Empty, hostile.HTML, hostile.Truncated},
		hostile.Claim:  hostile.Faults(hostile.Claim),
	}
	for call, list := range faults {
		for _, fault := range list {
			t.Run(string(call)+"/"+string(fault), func(t *testing.T) {
				t.Parallel()
				srv := hostile.NewServer(t, call, fault)
				c, err := client.New(srv.URL, "agent-token", client.WithRetry(client.Retry{Attempts: 2, MinBackoff: time.Millisecond}))
				if err != nil {
					t.Fatal(err)
				}
				r, _, err := c.CreateRequest(ctx, "ins_1", "key-1", client.CreateRequestInput{Tool: "Bash", Arguments: []byte(`{"command":"ls"}`)})
				if call == hostile.Claim {
					if err != nil {
						t.Fatal(err)
					}
					r, err = c.ClaimExecution(ctx, r.ID)
				}
				var ae *client.AnswerError
				if !errors.As(err, &ae) {
					t.Fatalf("answer %+v, err %v: want an *AnswerError", r, err)
				}
				if r != nil {
					t.Errorf("a request %+v came with the error", r)
				}
				if msg := err.Error(); !strings.Contains(msg, "POST /v1/") || !strings.Contains(msg, "20") || !strings.Contains(msg, "cannot be believed") {
					t.Errorf("message %q does not name the method, path and status", msg)
				}
			})
		}
	}
}

// TestGateRunsOnlyOnAClaim: the Go SDK's gate, asking a server that
// approves at once but breaks its answer to the create, the read or the
// claim, never runs the function; against the same server answering
// honestly, it runs it once.
func TestGateRunsOnlyOnAClaim(t *testing.T) {
	t.Parallel()
	for _, r := range hostile.Cases(hostile.Create, hostile.Claim) {
		t.Run(r.String(), func(t *testing.T) {
			t.Parallel()
			srv := hostile.NewServer(t, r.Call, r.Fault)
			c, err := client.New(srv.URL, "agent-token", client.WithRetry(client.Retry{Attempts: 2, MinBackoff: time.Millisecond}))
			if err != nil {
				t.Fatal(err)
			}
			g, err := client.NewGate(client.GateConfig{Client: c, InstanceID: "ins_1", JournalDir: t.TempDir(), PollWait: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var runs atomic.Int64
			_, err = g.Run(ctx, client.Call{Tool: "Bash", Arguments: []byte(`{"command":"ls"}`)}, func(context.Context) error {
				runs.Add(1)
				return nil
			})
			if r.Fault == hostile.Honest {
				if err != nil || runs.Load() != 1 {
					t.Fatalf("honest server: %d runs, err %v", runs.Load(), err)
				}
				return
			}
			if runs.Load() != 0 {
				t.Fatalf("ran %d times on %s to the %s", runs.Load(), r.Fault, r.Call)
			}
			if err == nil {
				t.Fatal("no error for a call that did not run")
			}
		})
	}
}

// A list answered without its "items" is an error, not an empty list.
func TestListWithoutItems(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"things":[]}`)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "airlock_test")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ListTokens(t.Context())
	if _, ok := errors.AsType[*client.AnswerError](err); !ok {
		t.Fatalf("ListTokens of an answer without items: %v; want an AnswerError", err)
	}
}

// TestRegisterInstanceChecksTheAudience: a server that registers the
// instance but drops the token audience asked for (an older server, say)
// is an *AnswerError: its tokens would carry no audience, and a tool server
// expecting one would refuse every call.
func TestRegisterInstanceChecksTheAudience(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/instances" {
			http.NotFound(w, r)
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"ins_1","name":"bot","created_at":"2026-12-06T10:00:00Z","last_seen_at":"2026-12-06T10:00:00Z"}`)
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, "agent-token")
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.RegisterInstance(context.Background(), "bot", nil, client.WithTokenAudience("tools.example.com"))
	var ae *client.AnswerError
	if !errors.As(err, &ae) || in != nil || !strings.Contains(err.Error(), "tools.example.com") {
		t.Fatalf("RegisterInstance = %+v, %v; want an *AnswerError naming the audience", in, err)
	}
	// Without an audience asked for, the same answer is the instance.
	if in, err := c.RegisterInstance(context.Background(), "bot", nil); err != nil || in.ID != "ins_1" {
		t.Fatalf("RegisterInstance without an audience = %+v, %v", in, err)
	}
}
