// Command verified-tool is an MCP server whose tools run only with proof
// that a person approved exactly this call: an approval token from
// Airlock, for this tool, for the arguments the server received, meant for
// this server, and not used before (docs/tokens.md). `airlock gate` hands
// the token on in the call's params._meta["io.airlock/approval-token"]; a
// call that reaches the server any other way (straight from an agent,
// replayed, or with its arguments changed after the approval) is refused
// with the reason, and nothing runs.
//
// Its tools append to a ledger file, one line per run. Run it behind the
// gate, with the same audience on both sides, and approve in the inbox or
// with `airlock requests approve`:
//
//	AIRLOCK_AGENT_TOKEN=airlock_… airlock gate --url http://127.0.0.1:8080 --token-audience ledger \
//	  -- go run ./examples/verified-tool --airlock-url http://127.0.0.1:8080 --audience ledger --ledger /tmp/ledger.txt
//
// The server holds no Airlock token: it checks tokens against the public
// keys at the server's /.well-known/jwks.json.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockhq/airlock/approvaltoken"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/gate"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	url := flag.String("airlock-url", envOr("AIRLOCK_URL", "http://127.0.0.1:8080"), "the Airlock server whose tokens are believed [$AIRLOCK_URL]")
	audience := flag.String("audience", "", "this server's name: the token_audience of the instances in front of it (airlock gate --token-audience)")
	ledger := flag.String("ledger", filepath.Join(os.TempDir(), "verified-tool-ledger.txt"), "the file each run appends a line to")
	verifierToken := flag.String("verifier-token", os.Getenv("AIRLOCK_VERIFIER_TOKEN"), "a verifier token: spend each approval at Airlock, so that every replica of this server runs it once between them [$AIRLOCK_VERIFIER_TOKEN]")
	flag.Parse()
	log.SetPrefix("verified-tool: ") // on stderr: stdout is the protocol's
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *url, *audience, *ledger, *verifierToken); err != nil {
		log.Fatal(err)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// run serves the tools over stdio until the client goes away.
func run(ctx context.Context, url, audience, ledger, verifierToken string) error {
	airlock, err := client.New(url, "") // the key set needs no token
	if err != nil {
		return err
	}
	// Without a verifier token this process remembers the tokens it has
	// spent. With one, Airlock keeps the record, so replicas of this
	// server (and this one after a restart) run each approval once
	// between them.
	var spent spender = localSpender{approvaltoken.NewReplayCache(10000)}
	if verifierToken != "" {
		c, err := client.New(url, verifierToken)
		if err != nil {
			return err
		}
		spent = airlockSpender{c, audience}
	}
	v := &verifier{airlock: airlock, audience: audience, spent: spent}

	s := mcp.NewServer(&mcp.Implementation{Name: "verified-tool", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "transfer_funds", Description: "Move money between two accounts. Needs an approval."},
		guarded(v, func(in transfer, approval string) (string, error) {
			if in.Amount <= 0 || in.From == "" || in.To == "" {
				return "", errors.New("give from, to and a positive amount")
			}
			if err := appendLine(ledger, fmt.Sprintf("transfer %d %s -> %s, %s", in.Amount, in.From, in.To, approval)); err != nil {
				return "", err
			}
			return fmt.Sprintf("transferred %d from %s to %s", in.Amount, in.From, in.To), nil
		}))
	mcp.AddTool(s, &mcp.Tool{Name: "close_account", Description: "Close an account. Needs an approval."},
		guarded(v, func(in closeAccount, approval string) (string, error) {
			if in.Account == "" {
				return "", errors.New("name the account")
			}
			if err := appendLine(ledger, fmt.Sprintf("close %s, %s", in.Account, approval)); err != nil {
				return "", err
			}
			return "closed " + in.Account, nil
		}))
	return s.Run(ctx, &mcp.StdioTransport{})
}

type transfer struct {
	From   string `json:"from" jsonschema:"the account to take the money from"`
	To     string `json:"to" jsonschema:"the account to pay it into"`
	Amount int    `json:"amount" jsonschema:"how much, in whole units"`
}

type closeAccount struct {
	Account string `json:"account" jsonschema:"the account to close"`
}

// guarded makes a tool that runs only when its call carries a token
// approving it. The tool is told who approved, for its record.
func guarded[In any](v *verifier, tool func(in In, approval string) (string, error)) mcp.ToolHandlerFor[In, any] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		claims, err := v.check(ctx, req)
		if err != nil {
			log.Printf("refused %s (%s): %v", req.Params.Name, reason(err), err) // for whoever runs the server
			// An error result (isError), written for the agent to read.
			return nil, nil, fmt.Errorf("not approved (%s): %w; nothing ran", reason(err), err)
		}
		out, err := tool(in, approvedBy(claims))
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}}, nil, nil
	}
}

// verifier decides whether a call may run.
type verifier struct {
	airlock  *client.Client
	audience string
	spent    spender
}

// errNoToken refuses a call that carries no token at all: one that did not
// come through Airlock.
var errNoToken = fmt.Errorf("no approval token in _meta[%q]: call this tool through airlock gate", gate.ApprovalTokenMeta)

// check returns the claims of the call's token once it has verified the
// token for exactly this call and spent it.
func (v *verifier) check(ctx context.Context, req *mcp.CallToolRequest) (approvaltoken.Claims, error) {
	token, _ := req.Params.Meta[gate.ApprovalTokenMeta].(string)
	if token == "" {
		return approvaltoken.Claims{}, errNoToken
	}
	// The arguments as they arrived, not as decoded: the token's digest is
	// over the approved JSON value, and any change to it must show.
	claims, err := v.airlock.VerifyApprovalToken(ctx, token, client.VerifyInput{
		Tool: req.Params.Name, Args: req.Params.Arguments, Audience: v.audience,
	})
	if err != nil {
		return approvaltoken.Claims{}, err
	}
	// Spent only once it verified: a call with the wrong arguments does
	// not use up the approval of the right ones.
	if err := v.spent.Spend(ctx, token, *claims); err != nil {
		return approvaltoken.Claims{}, err
	}
	return *claims, nil
}

// reason is the refusal's stable code: approvaltoken's ("arguments",
// "replayed", "audience", …), or "missing" when there was no token.
func reason(err error) string {
	if errors.Is(err, errNoToken) {
		return "missing"
	}
	return approvaltoken.Reason(err)
}

// spender records that a token was used, so that each approval runs once.
type spender interface {
	// Spend records token as used. It fails, wrapping
	// approvaltoken.ErrReplayed, when it was used before.
	Spend(ctx context.Context, token string, claims approvaltoken.Claims) error
}

// localSpender remembers spent tokens in this process only.
type localSpender struct{ cache *approvaltoken.ReplayCache }

func (s localSpender) Spend(_ context.Context, _ string, claims approvaltoken.Claims) error {
	return s.cache.Use(claims, time.Now())
}

// airlockSpender consumes each token at Airlock (POST
// /v1/approval-tokens/consume): of every process that tries, one wins.
type airlockSpender struct {
	c        *client.Client
	audience string
}

func (s airlockSpender) Spend(ctx context.Context, token string, _ approvaltoken.Claims) error {
	_, err := s.c.ConsumeApprovalToken(ctx, client.ConsumeInput{Token: token, Audience: s.audience})
	if client.IsAlreadyUsed(err) {
		return fmt.Errorf("%w: %v", approvaltoken.ErrReplayed, err)
	}
	// Any other failure (Airlock down, a refused token) refuses the
	// call too: not approved is the answer when in doubt.
	return err
}

// approvedBy says who approved, from the token: "approved by carol
// (human), request apr_…".
func approvedBy(c approvaltoken.Claims) string {
	var names []string
	for _, d := range c.DecidedBy {
		names = append(names, cmp.Or(d.Name, d.Principal))
	}
	return fmt.Sprintf("approved by %s (%s), request %s", strings.Join(names, ", "), c.DecisionSource, c.Subject)
}

// appendLine appends line to the file at path and syncs it.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
