// Command agentloop is a small agent loop whose dangerous tool goes through
// Airlock's Go gate (package client). A scripted "model" lists a directory,
// then asks to delete a file; listing runs at once, deleting waits for a
// reviewer. A denial's note goes back to the model as the tool's result,
// as a real loop would feed it to an LLM.
//
// Run it against a server with an agent token, and decide in the inbox or
// with `airlock requests approve|deny`:
//
//	AIRLOCK_URL=http://127.0.0.1:8080 AIRLOCK_AGENT_TOKEN=airlock_… \
//	  go run ./examples/agentloop --dir /tmp/scratch --delete old.log
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"

	"github.com/airlockhq/airlock/client"
)

func main() {
	var o options
	flag.StringVar(&o.URL, "url", envOr("AIRLOCK_URL", "http://127.0.0.1:8080"), "the Airlock server [$AIRLOCK_URL]")
	flag.StringVar(&o.Token, "token", os.Getenv("AIRLOCK_AGENT_TOKEN"), "an agent token [$AIRLOCK_AGENT_TOKEN]")
	flag.StringVar(&o.Dir, "dir", ".", "the directory the agent works in")
	flag.StringVar(&o.Delete, "delete", "old.log", "the file the agent wants to delete")
	flag.StringVar(&o.Journal, "journal", filepath.Join(os.TempDir(), "airlock-agentloop-journal"), "the gate's journal directory")
	flag.StringVar(&o.Timeout, "timeout", "5m", "how long a reviewer has to decide")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "agentloop:", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// options configure one run of the loop.
type options struct {
	URL, Token, Dir, Delete, Journal, Timeout string
	// Client, when set, is used instead of one made from URL and Token.
	Client *client.Client
}

// toolCall is what the model asks for: a tool, its arguments, and the ID
// the model gave the call (the gate's attempt key).
type toolCall struct {
	ID   string
	Name string
	Args json.RawMessage
	Why  string
}

// script is the "model": it decides the next call from what it has seen.
type script struct {
	target string
	step   int
}

func (s *script) next(observations []string) (toolCall, bool) {
	s.step++
	switch s.step {
	case 1:
		return toolCall{ID: "call_1", Name: "list_files", Args: json.RawMessage(`{}`), Why: "See what is there."}, true
	case 2:
		if !strings.Contains(observations[len(observations)-1], s.target) {
			return toolCall{}, false // nothing to delete
		}
		args, _ := json.Marshal(map[string]string{"name": s.target})
		return toolCall{ID: "call_2", Name: "delete_file", Args: args, Why: "The log is stale and takes space."}, true
	case 3:
		return toolCall{ID: "call_3", Name: "list_files", Args: json.RawMessage(`{}`), Why: "Check the result."}, true
	}
	return toolCall{}, false
}

// run runs the loop: safe tools directly, delete_file through the gate.
func run(ctx context.Context, o options, out io.Writer) error {
	c := o.Client
	if c == nil {
		if o.Token == "" {
			return errors.New("no token: set AIRLOCK_AGENT_TOKEN or pass --token (an agent token)")
		}
		var err error
		if c, err = client.New(o.URL, o.Token); err != nil {
			return err
		}
	}
	inst, err := c.RegisterInstance(ctx, "agentloop example", nil)
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	// Deleting the instance at the end cancels anything still pending.
	defer c.DeleteInstance(context.WithoutCancel(ctx), inst.ID)
	g, err := client.NewGate(client.GateConfig{Client: c, InstanceID: inst.ID, JournalDir: o.Journal, Timeout: o.Timeout})
	if err != nil {
		return err
	}
	defer g.Close()
	// Settle what a crashed earlier run left unfinished.
	if _, err := g.Recover(ctx); err != nil {
		return err
	}

	tools := map[string]func(json.RawMessage) (string, error){
		"list_files": func(json.RawMessage) (string, error) {
			entries, err := os.ReadDir(o.Dir)
			if err != nil {
				return "", err
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			sort.Strings(names)
			return strings.Join(names, " "), nil
		},
		"delete_file": func(args json.RawMessage) (string, error) {
			var in struct{ Name string }
			if err := json.Unmarshal(args, &in); err != nil {
				return "", err
			}
			if in.Name == "" || strings.ContainsAny(in.Name, `/\`) {
				return "", fmt.Errorf("name %q must be a plain file name", in.Name)
			}
			return "deleted " + in.Name, os.Remove(filepath.Join(o.Dir, in.Name))
		},
	}
	dangerous := map[string]bool{"delete_file": true}

	model := &script{target: o.Delete}
	var observations []string
	for {
		call, ok := model.next(observations)
		if !ok {
			return nil
		}
		fmt.Fprintf(out, "→ %s %s\n", call.Name, call.Args)
		tool := tools[call.Name]
		var result string
		if !dangerous[call.Name] {
			result, err = tool(call.Args)
			if err != nil {
				result = "error: " + err.Error()
			}
		} else {
			// Exactly the call the model made: its name and arguments.
			result, err = gated(ctx, g, call, tool, out)
			if err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "← %s\n", result)
		observations = append(observations, result)
	}
}

// gated runs a dangerous call through the gate and turns each outcome into
// what the model is told.
func gated(ctx context.Context, g *client.Gate, call toolCall, tool func(json.RawMessage) (string, error), out io.Writer) (string, error) {
	result, _, err := client.Do(ctx, g, client.Call{
		Tool: call.Name, Arguments: call.Args, AttemptKey: call.ID, AgentReasoning: call.Why,
		OnPending: func(r *client.ApprovalRequest) {
			fmt.Fprintf(out, "  waiting for a reviewer: request %s (decide by %s)\n", r.ID, r.DeadlineAt.Local().Format("15:04:05"))
		},
	}, func(context.Context) (string, error) { return tool(call.Args) })
	var (
		denied  *client.DeniedError
		expired *client.ExpiredError
		lapsed  *client.LapsedError
		failed  *client.ToolError
	)
	switch {
	case err == nil:
		return result, nil
	case errors.As(err, &denied):
		return "denied by a reviewer: " + denied.Note(), nil
	case errors.As(err, &expired):
		return "nobody approved this in time; it did not run", nil
	case errors.As(err, &lapsed):
		return "the approval expired before the call could start; it did not run", nil
	case errors.As(err, &failed):
		return "error: " + failed.Err.Error(), nil
	case ctx.Err() != nil:
		return "", ctx.Err()
	}
	// Cancelled, already executed, interrupted: tell the model plainly.
	var ce *client.CancelledError
	var ae *client.AlreadyExecutedError
	var ie *client.InterruptedError
	if errors.As(err, &ce) || errors.As(err, &ae) || errors.As(err, &ie) {
		return err.Error(), nil
	}
	return "", err
}
