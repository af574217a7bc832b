package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/internal/testkit/apitest"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// TestAgentLoop runs the example against a real server (SQLite file) while
// a reviewer, watching the event stream, decides the delete.
func TestAgentLoop(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		decision client.DecisionInput
		kept     bool
		says     string
	}{
		{"approved: the file is deleted once", client.DecisionInput{Status: airlock.StateApproved}, false, "deleted old.log"},
		{"denied: the model hears the note", client.DecisionInput{Status: airlock.StateDenied, Note: "keep logs until Friday"}, true, "denied by a reviewer: keep logs until Friday"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			agent, reviewer := setup(t)
			dir := t.TempDir()
			for _, f := range []string{"old.log", "notes.txt"} {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			decided := make(chan error, 1)
			go func() {
				for ev, err := range reviewer.Events(ctx, 0) {
					if err != nil {
						decided <- err
						return
					}
					if ev.Event.Type == airlock.EventRequestCreated && ev.Request.Tool == "delete_file" {
						if string(ev.Request.Arguments) != `{"name":"old.log"}` || ev.Request.AgentReasoning == "" {
							t.Errorf("the reviewer saw %s %s", ev.Request.Tool, ev.Request.Arguments)
						}
						_, err := reviewer.Decide(ctx, ev.Request.ID, tt.decision)
						decided <- err
						return
					}
				}
			}()
			var out strings.Builder
			err := run(ctx, options{Client: agent, Dir: dir, Delete: "old.log", Journal: t.TempDir(), Timeout: "1m"}, &out)
			if err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			if err := <-decided; err != nil {
				t.Fatal(err)
			}
			_, statErr := os.Stat(filepath.Join(dir, "old.log"))
			if kept := statErr == nil; kept != tt.kept {
				t.Fatalf("old.log kept = %v, want %v\n%s", kept, tt.kept, out.String())
			}
			if !strings.Contains(out.String(), tt.says) || !strings.Contains(out.String(), "waiting for a reviewer") {
				t.Fatalf("output lacks %q:\n%s", tt.says, out.String())
			}
		})
	}
}

// setup starts Airlock in process and returns an agent's and a reviewer's client.
func setup(t *testing.T) (agent, reviewer *client.Client) {
	t.Helper()
	s := apitest.Start(t, apitest.Config{})
	agent, _ = s.Mint(t, "agent", airlock.RoleAgent, "bot")
	reviewer, _ = s.Mint(t, "reviewer", airlock.RoleReviewer, "ada")
	return agent, reviewer
}
