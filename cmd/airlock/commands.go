package main

import (
	"context"
	"flag"
	"fmt"
	"io"
)

// command is one command of airlock: what follows "airlock". It either
// runs by itself (run) or is a group of subcommands (subs).
type command struct {
	name    string // what follows "airlock"
	args    string // synopsis of its arguments, for help
	summary string // one line, for help
	run     func(ctx context.Context, a *App, args []string) error
	// about heads the usage of a command with subcommands, above the
	// list of them.
	about string
	subs  []subcommand
}

// subcommand is one subcommand of a group, such as `airlock requests list`.
type subcommand struct {
	name, synopsis, summary string
	run                     func(ctx context.Context, a *App, args []string) error
}

// commands is the command table: every command of airlock, in the order
// help lists them, with its help and its run function (or subcommands),
// each of which lives in a file of its own (serve.go, requests.go, …). To
// add a command, write it in its own file and list it here.
//
// It is a function, not a variable, because the commands read it (help
// lists it, and each command's flag set takes its usage from it): a
// variable whose initializer reached itself through them would be an
// initialization cycle. TestCommandTable holds it to the commands the
// README and docs/ name.
func commands() []command {
	return []command{
		{
			name:    "serve",
			args:    "[flags]",
			summary: "Run the Airlock provider: the REST API, with its expiry scheduler, over a SQLite file or a PostgreSQL database.",
			run:     runServe,
		},
		{
			name:    "mcp",
			args:    "[flags]",
			summary: "Serve Airlock's MCP tools over stdio, for an MCP client, relaying to a running server's /mcp.",
			run:     runMCP,
		},
		{
			name:    "gate",
			args:    "[flags] -- <upstream MCP server command…> | [flags] --upstream-url URL [--header K:V]…",
			summary: "Put Airlock's approval in front of any MCP server (stdio, or streamable HTTP): calls of the tools the rules select wait for a reviewer.",
			run:     runGate,
		},
		{
			name:    "hook",
			args:    "claude-code|codex|gemini [flags] < hook-input.json",
			summary: "Answer a coding agent's tool-call hook with a reviewer's decision (docs/integrations/).",
			run:     runHook,
		},
		{
			name:    "requests",
			args:    "list|show|approve|deny|watch [flags]",
			summary: "List, show, approve, deny and watch approval requests (reviewers) on a running server.",
			about:   "Approval requests on a running server, for reviewers.",
			subs: []subcommand{
				{"list", "[--state S|all] [--kind K] [--tool T] [--instance ID] [--limit N] [--cursor C]", "list requests: pending (the default) soonest deadline first, others newest first", runRequestsList},
				{"show", "<id>", "show one request: what would run, exactly, and the agent's claim apart", runRequestsShow},
				{"approve", "<id>... [--valid-for D] [--note N] [--answer A] [--grant D [--grant-uses N] [--grant-scope instance|agent] [--grant-match EXPR]] [--yes]", "approve a pending request (or answer its question) after showing it and asking on the terminal (--yes: without, for scripts); --grant also allows the same call for D; several ids are one batch, each its own decision", runRequestsApprove},
				{"deny", "<id>... [--note N] [--yes]", "deny a pending request, with a note for the agent, after showing it and asking on the terminal (--yes: without, for scripts); several ids are one batch", runRequestsDeny},
				{"watch", "[--prompt]", "stream new pending requests; on a terminal, decide each one as it comes", runRequestsWatch},
			},
		},
		{
			name:    "tokens",
			args:    "create|list|revoke|verify|consume [flags]",
			summary: "Mint, list and revoke tokens (admins) on a running server; verify and consume an approval token.",
			about:   "Tokens on a running server, for admins.",
			subs: []subcommand{
				{"create", "--name NAME --role agent|reviewer|admin|verifier|auditor [--scope S]... [--principal P]", "mint a token; its secret is shown this once", runTokensCreate},
				{"list", "", "list every token (never their secrets)", runTokensList},
				{"revoke", "<id>", "revoke a token: it stops working at its next request", runTokensRevoke},
				{"verify", "--token T --tool NAME --args FILE [--jwks URL|FILE] [--audience A]", "check an approval token for a call, offline, as a tool server would", runTokensVerify},
				{"consume", "--token T [--tool NAME --args FILE] [--audience A]", "verify an approval token at the server and use it up: once, across replicas (verifiers)", runTokensConsume},
			},
		},
		{
			name:    "keys",
			args:    "list|rotate [flags]",
			summary: "List and rotate the keys approval tokens are signed with (admins), on a running server.",
			about:   "Approval tokens' signing keys on a running server, for admins (docs/tokens.md).",
			subs: []subcommand{
				{"list", "", "list the published keys, the active one first (never their private halves)", runKeysList},
				{"rotate", "", "publish a new key, which signs from 30 seconds on; the old one signs until then and stays published until its tokens expire", runKeysRotate},
			},
		},
		{
			name:    "audit",
			args:    "verify [flags]",
			summary: "Verify the audit log against its signed checkpoint: on a running server, or offline from an export.",
			about:   "The verifiable audit log, for auditors and admins (docs/audit.md).",
			subs: []subcommand{
				{"verify", "[--url U] [--key KEY|FILE] [--previous FILE] [--keep FILE] | --entries FILE --checkpoint FILE --key KEY|FILE", "recompute the tree from every entry, check the checkpoint's signature and, with --previous, that the log only grew; names the first index that does not match", runAuditVerify},
			},
		},
		{
			name:    "grants",
			args:    "list|revoke [flags]",
			summary: "List and revoke grants, the standing approvals reviewers give (reviewers and admins), on a running server.",
			about:   "Grants on a running server, for reviewers and admins (docs/policy.md).",
			subs: []subcommand{
				{"list", "[--all] [--tool T]", "list the live grants (every grant with --all), newest first, with their uses left", runGrantsList},
				{"revoke", "<id>", "revoke a grant: it approves nothing more", runGrantsRevoke},
			},
		},
		{
			name:    "webhooks",
			args:    "create|list|show|delete|deliveries|test|enable [flags]",
			summary: "Manage webhook endpoints (admins) on a running server: signed notifications of approval requests.",
			about:   "Webhook endpoints on a running server, for admins.",
			subs: []subcommand{
				{"create", "<receiver-url> [--event TYPE]... [--description TEXT]", "create an endpoint; its signing secret is shown this once", runWebhooksCreate},
				{"list", "", "list the endpoints (never their secrets)", runWebhooksList},
				{"show", "<id>", "show one endpoint", runWebhooksShow},
				{"delete", "<id>", "delete an endpoint and its deliveries", runWebhooksDelete},
				{"deliveries", "<id> [--limit N]", "list an endpoint's newest deliveries with their attempts", runWebhooksDeliveries},
				{"test", "<id>", "send the endpoint a signed webhook.test delivery", runWebhooksTest},
				{"enable", "<id>", "enable an endpoint disabled for failing; what its failures failed is attempted again", runWebhooksEnable},
			},
		},
		{
			name:    "reviewers",
			args:    "list|link|end-sessions [flags]",
			summary: "List reviewer principals and link them to Slack users and email addresses (admins).",
			about:   "Reviewer principals and their links, for admins.",
			subs: []subcommand{
				{"list", "", "list reviewer principals with their Slack user and email address", runReviewersList},
				{"link", "<principal> [--slack-user U…] [--email ADDRESS]", "link a principal (replacing its link; neither flag removes it)", runReviewersLink},
				{"end-sessions", "<principal>", "sign a principal out of the inbox on every replica (an OIDC reviewer's revocation)", runReviewersEndSessions},
			},
		},
		{
			name:    "instances",
			args:    "list|delete [flags]",
			summary: "List instances, or delete one and cancel its pending requests, on a running server.",
			about:   "Adapter instances (and MCP sessions) on a running server.",
			subs: []subcommand{
				{"list", "", "list the instances your token may see, with their pending counts", runInstancesList},
				{"delete", "<id>", "delete an instance (its owner or an admin), cancelling its pending requests in the same step", runInstancesDelete},
			},
		},
		{
			name:    "policy",
			args:    "check|test|replay FILE [REQUEST.json]",
			summary: "Check a policy file, show what it would do with a request, or replay it over a server's history (docs/policy.md).",
			about:   "Policy files (docs/policy.md), checked and tried offline, and replayed over the requests a server kept.",
			subs: []subcommand{
				{"check", "FILE", "compile a policy file: exit 0 when serve would load it, 1 (naming the rule and its place) when not", runPolicyCheck},
				{"test", "[--expect allow|deny|ask] FILE REQUEST.json", "print the rule that decides the request and what would happen; exit 1 when the file does not compile or the outcome is not --expect", runPolicyTest},
				{"replay", "[--since 7d] [--json] FILE", "run the file over the requests created in the window (read with --url and a reviewer's or admin's token) and print per rule what it would have done beside what happened, with the denied requests it would have allowed", runPolicyReplay},
			},
		},
		{
			name:    "bench",
			args:    "[--scenario lifecycle|create|wait|expiry|mcp|grant] [flags]",
			summary: "Measure Airlock under load (ops/s, latency, errors), against the same durable work in direct SQL.",
			run:     runBench,
		},
		{
			name:    "healthcheck",
			args:    "[--addr HOST:PORT] [--timeout D]",
			summary: "Ask the server on this machine whether it is ready (GET /readyz): exit 0 when it is, 1 when not; the container image's health check.",
			run:     runHealthcheck,
		},
		{
			name:    "version",
			summary: "Print airlock's version, the commit and date it was built from, and the Go version it was built with.",
			run:     runVersion,
		},
		{
			name:    "help",
			args:    "[command [subcommand]]",
			summary: "List the commands, or describe one command and its flags.",
			run:     runHelp,
		},
	}
}

// findCommand returns the command named name.
func findCommand(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// findSubcommand returns the subcommand sub of the command cmd.
func findSubcommand(cmd, sub string) (subcommand, bool) {
	c, _ := findCommand(cmd)
	for _, s := range c.subs {
		if s.name == sub {
			return s, true
		}
	}
	return subcommand{}, false
}

// exec runs c with args: its run function, or the subcommand args[0].
func (c command) exec(ctx context.Context, a *App, args []string) error {
	if c.subs != nil {
		return runSubcommand(ctx, a, c, args)
	}
	return c.run(ctx, a, args)
}

// runSubcommand runs the subcommand args[0] of c, or prints c's usage.
func runSubcommand(ctx context.Context, a *App, c command, args []string) error {
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "Usage: airlock %s <subcommand> [flags] [arguments]\n\n%s\n\nSubcommands:\n", c.name, c.about)
		for _, s := range c.subs {
			fmt.Fprintf(w, "  %-8s %s\n", s.name, s.summary)
		}
		fmt.Fprintf(w, "\nRun `airlock %s <subcommand> -h` for its flags.\n%s", c.name, exitCodesHelp)
	}
	if len(args) == 0 {
		usage(a.Stderr)
		return usageErrorf("%s needs a subcommand", c.name)
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(a.Stdout)
		return flag.ErrHelp
	}
	for _, s := range c.subs {
		if s.name == args[0] {
			return s.run(ctx, a, args[1:])
		}
	}
	return usageErrorf("unknown subcommand %q of %s; run `airlock %s -h` for the list", args[0], c.name, c.name)
}
