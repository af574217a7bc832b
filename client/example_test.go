package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/provider"
	"github.com/airlockhq/airlock/rest"
	"github.com/airlockhq/airlock/store/sqlite"
)

// exampleServer starts what `airlock serve` runs, in this process on a
// fresh SQLite file, so the examples run against a real server. It
// returns the server's URL, an agent client with a registered instance, a
// reviewer client, and a function that stops it all.
func exampleServer() (url string, agent *client.Client, instanceID string, reviewer *client.Client, stop func()) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "airlock-example")
	if err != nil {
		log.Fatal(err)
	}
	store, err := sqlite.Open(ctx, filepath.Join(dir, "airlock.db"))
	if err != nil {
		log.Fatal(err)
	}
	svc, err := provider.New(provider.Config{Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); svc.Run(runCtx) }()
	shutdown, endStreams := context.WithCancel(ctx)
	srv := httptest.NewServer(rest.New(rest.Config{Service: svc, Context: shutdown}))
	const adminSecret = "example-admin-token-0123456789"
	if err := svc.BootstrapAdmin(ctx, adminSecret); err != nil {
		log.Fatal(err)
	}
	admin := mustClient(srv.URL, adminSecret)
	agentToken := must(admin.CreateToken(ctx, client.CreateTokenInput{Name: "billing agent", Role: airlock.RoleAgent}))
	reviewerToken := must(admin.CreateToken(ctx, client.CreateTokenInput{Name: "Ada", Role: airlock.RoleReviewer}))
	agent = mustClient(srv.URL, agentToken.Secret)
	inst := must(agent.RegisterInstance(ctx, "billing-bot on laptop", nil))
	return srv.URL, agent, inst.ID, mustClient(srv.URL, reviewerToken.Secret), func() {
		endStreams()
		srv.Close()
		stopRun()
		<-ran
		store.Close()
		os.RemoveAll(dir)
	}
}

// exampleGate opens a gate for the agent's instance, with its journal in
// a fresh folder, and returns it with a function that closes it.
func exampleGate(agent *client.Client, instanceID string) (*client.Gate, func()) {
	journal := must(os.MkdirTemp("", "airlock-gate-journal"))
	gate := must(client.NewGate(client.GateConfig{Client: agent, InstanceID: instanceID, JournalDir: journal}))
	return gate, func() {
		gate.Close()
		os.RemoveAll(journal)
	}
}

func mustClient(url, token string) *client.Client {
	return must(client.New(url, token))
}

func must[T any](v T, err error) T {
	if err != nil {
		log.Fatal(err)
	}
	return v
}

// An adapter asks for approval of one intercepted call, and a reviewer
// approves it. Creating again with the same idempotency key returns the
// same request, so a retry never asks twice.
func ExampleClient_CreateRequest() {
	_, agent, instanceID, reviewer, stop := exampleServer()
	defer stop()
	ctx := context.Background()

	refund := client.CreateRequestInput{
		Tool:           "issue_refund",
		Arguments:      json.RawMessage(`{"payment_id": "payment_123", "amount": 4900, "currency": "GBP"}`),
		Timeout:        "30m",
		AgentReasoning: "The customer was charged twice.",
	}
	req, created, err := agent.CreateRequest(ctx, instanceID, "refund-payment_123-1", refund)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(req.State, created, string(req.Arguments))

	// A retry: the same key and body.
	again, created, err := agent.CreateRequest(ctx, instanceID, "refund-payment_123-1", refund)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(again.ID == req.ID, created)

	decided, err := reviewer.Approve(ctx, req.ID, "Duplicate charge confirmed.")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(decided.State, decided.Decision.Note, decided.Decision.ExpiresAt.After(decided.Decision.DecidedAt))
	// Output:
	// pending true {"payment_id": "payment_123", "amount": 4900, "currency": "GBP"}
	// true false
	// approved Duplicate charge confirmed. true
}

// A gate runs a tool call only once a reviewer has approved exactly that
// call, and only once; here the reviewer approves as soon as the request
// is pending.
func ExampleDo() {
	_, agent, instanceID, reviewer, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	gate, closeGate := exampleGate(agent, instanceID)
	defer closeGate()

	call := client.Call{
		Tool:       "issue_refund",
		Arguments:  json.RawMessage(`{"payment_id":"payment_123","amount":4900}`),
		AttemptKey: "tool-call-1",
		OnPending: func(r *client.ApprovalRequest) {
			// In real use a person decides in the inbox or the terminal.
			reviewer.Approve(ctx, r.ID, "")
		},
	}
	refund, outcome, err := client.Do(ctx, gate, call, func(context.Context) (string, error) {
		return "refund re_42 issued", nil // the real tool call goes here
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(refund, outcome.Status)

	// The same call again finds the approval already used: it never runs twice.
	_, _, err = client.Do(ctx, gate, call, func(context.Context) (string, error) {
		return "a second refund", nil
	})
	var already *client.AlreadyExecutedError
	fmt.Println(errors.As(err, &already))
	// Output:
	// refund re_42 issued succeeded
	// true
}

// A denial comes back as a *DeniedError carrying the reviewer's note, which
// the agent should be told; the tool does not run.
func ExampleDeniedError() {
	_, agent, instanceID, reviewer, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	gate, closeGate := exampleGate(agent, instanceID)
	defer closeGate()

	ran := false
	_, err := gate.Run(ctx, client.Call{
		Tool:       "delete_customer",
		Arguments:  json.RawMessage(`{"customer_id":"cus_9"}`),
		AttemptKey: "tool-call-7",
		OnPending: func(r *client.ApprovalRequest) {
			reviewer.Deny(ctx, r.ID, "Customers are deleted by support only.")
		},
	}, func(context.Context) error { ran = true; return nil })
	var denied *client.DeniedError
	if errors.As(err, &denied) {
		fmt.Println("denied:", denied.Note())
	}
	fmt.Println("ran:", ran)
	// Output:
	// denied: Customers are deleted by support only.
	// ran: false
}
