package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/policy"
)

// loadPolicy compiles the policy file at path; a file that does not
// compile is exit 1, with the rule and its place.
func loadPolicy(path string) (*policy.Set, error) {
	s, err := policy.Load(path)
	if err != nil {
		return nil, &exitError{code: exitFailure, err: fmt.Errorf("%s: %w", path, err)}
	}
	return s, nil
}

func runPolicyCheck(_ context.Context, a *App, args []string) error {
	fs := a.newFlagSet("policy")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("policy check takes one file")
	}
	s, err := loadPolicy(fs.Arg(0))
	if err != nil {
		return err
	}
	shadows := 0
	for _, r := range s.Rules() {
		if r.Shadow {
			shadows++
		}
	}
	fmt.Fprintf(a.Stdout, "%s: %d rules (%d shadow), sha256 %s\n", fs.Arg(0), len(s.Rules()), shadows, s.Hash)
	return nil
}

// policyTestRequest is REQUEST.json: the body an adapter would send (a
// REST create, or the fields of an MCP request that rules see), and the
// instance and agent a rule may look at.
type policyTestRequest struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Context   json.RawMessage `json:"context"`
	Timeout   string          `json:"timeout"`
	Kind      airlock.Kind    `json:"kind"`
	Title     string          `json:"title"`
	// Question and Command mark a request that asks the reviewer a
	// question or proposes a command: allow never applies to those.
	Question bool `json:"question"`
	Command  bool `json:"command"`
	Instance struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Metadata json.RawMessage `json:"metadata"`
	} `json:"instance"`
	Agent struct {
		ID        string   `json:"id"`
		Name      string   `json:"name"`
		Principal string   `json:"principal"`
		Scopes    []string `json:"scopes"`
	} `json:"agent"`
}

func runPolicyTest(ctx context.Context, a *App, args []string) error {
	fs := a.newFlagSet("policy")
	expect := fs.String("expect", "", "allow, deny or ask: exit 1 unless that is what would happen")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageErrorf("policy test takes a policy file and a request file (JSON)")
	}
	switch policy.Action(*expect) {
	case "", policy.ActionAllow, policy.ActionDeny, policy.ActionAsk:
	default:
		return usageErrorf("--expect must be allow, deny or ask")
	}
	s, err := loadPolicy(fs.Arg(0))
	if err != nil {
		return err
	}
	in, err := readPolicyTestRequest(fs.Arg(1))
	if err != nil {
		return usageErrorf("%s: %v", fs.Arg(1), err)
	}
	out := s.Decide(ctx, in)
	w := a.Stdout
	if out.Rule == "" {
		fmt.Fprintln(w, "rule: none matched")
	} else {
		fmt.Fprintf(w, "rule: %s\n", out.Rule)
	}
	switch d := out.Verdict.Initial; {
	case d != nil && d.Status == airlock.StateApproved:
		valid := "the server's --approval-validity"
		if d.Validity > 0 {
			valid = d.Validity.String()
		}
		fmt.Fprintf(w, "outcome: allow: approved at creation, decided_by %q, valid for %s\n", d.DecidedBy, valid)
	case d != nil:
		fmt.Fprintf(w, "outcome: deny: denied at creation, decided_by %q\n", d.DecidedBy)
	case out.Verdict.Window > 0:
		fmt.Fprintf(w, "outcome: ask: a person decides, within at most %s\n", out.Verdict.Window)
	default:
		fmt.Fprintln(w, "outcome: ask: a person decides")
	}
	if d := out.Verdict.Initial; d != nil && d.Note != "" {
		fmt.Fprintf(w, "note: %s\n", d.Note)
	}
	if out.Why != "" {
		fmt.Fprintf(w, "why: %s\n", out.Why)
	}
	for _, name := range out.Shadowed {
		fmt.Fprintf(w, "shadow rule matched (decides nothing): %s\n", name)
	}
	for _, re := range out.Errors {
		fmt.Fprintf(w, "rule failed to evaluate: %s: %v\n", re.Rule, re.Err)
	}
	fmt.Fprintf(w, "policy sha256: %s\n", s.Hash)
	if *expect != "" && policy.Action(*expect) != out.Action {
		return &exitError{code: exitFailure, err: fmt.Errorf("expected %s, the policy would %s", *expect, out.Action)}
	}
	return nil
}

func readPolicyTestRequest(path string) (airlock.PolicyInput, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return airlock.PolicyInput{}, err
	}
	var r policyTestRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return airlock.PolicyInput{}, fmt.Errorf("not a request: %w", err)
	}
	if r.Tool == "" {
		return airlock.PolicyInput{}, errors.New("a request needs a tool")
	}
	if r.Kind == "" {
		r.Kind = airlock.KindToolCall
	}
	window := airlock.DefaultLimits().DefaultTimeout
	if r.Timeout != "" {
		if window, err = airlock.ParseDuration(r.Timeout); err != nil {
			return airlock.PolicyInput{}, fmt.Errorf("timeout: %w", err)
		}
	}
	req := airlock.Request{ID: "apr_test", Kind: r.Kind, Tool: r.Tool, Arguments: r.Arguments, Context: r.Context, Timeout: r.Timeout, Title: r.Title}
	if r.Question {
		req.Question = &airlock.Question{}
	}
	if r.Command {
		req.Proposal = &airlock.Proposal{Mode: airlock.ProposalCommand, Command: &airlock.Command{Method: r.Tool, Input: r.Arguments}}
	}
	inst := airlock.Instance{ID: r.Instance.ID, Name: r.Instance.Name, Metadata: r.Instance.Metadata}
	return airlock.PolicyInput{
		Request: req, Window: window,
		Agent:    airlock.Token{ID: r.Agent.ID, Name: r.Agent.Name, Principal: r.Agent.Principal, Scopes: r.Agent.Scopes},
		Instance: func(context.Context) (airlock.Instance, error) { return inst, nil },
	}, nil
}
