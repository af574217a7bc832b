package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/airlockhq/airlock/approvaltoken"
)

// The consume scenario (docs/tokens.md, "Single use"): a tool server's
// POST /v1/approval-tokens/consume, held to the call (tool and
// arguments), of a token no one consumed before. The tokens are made
// before the clock starts: the scenario's call granted on an instance of
// the run's, each create approved by the grant and claimed, as a gate
// does. Only the consumes are measured.

// errPoolEmpty is an op that found the pool empty: more ops than tokens.
var errPoolEmpty = errors.New("no unconsumed token left: raise --count")

// tokenPool hands out each approval token once, to any client.
type tokenPool struct {
	tokens []string
	next   atomic.Int64
}

// take returns a token no one took before, or false when none is left.
func (p *tokenPool) take() (string, bool) {
	i := p.next.Add(1) - 1
	if i >= int64(len(p.tokens)) {
		return "", false
	}
	return p.tokens[i], true
}

// tokenMakers is how many clients make the tokens at once.
const tokenMakers = 8

// makeTokens makes cfg.Count approval tokens: an instance and a grant of
// the scenario's call on it, then a create the grant approves and its
// claim, per token.
func makeTokens(ctx context.Context, cfg Config, t *target, run string, phase int) (*tokenPool, error) {
	base := t.base(0)
	inst, err := t.newInstance(ctx, base, fmt.Sprintf("bench %s-%d tokens", run, phase))
	if err != nil {
		return nil, err
	}
	var g apiGrant
	body := fmt.Sprintf(`{"tool":%q,"match":"same_arguments","arguments":%s,"instance_id":%q,"expires_in":"720h"}`, grantTool, grantArgs, inst)
	if err := t.call(ctx, "POST", base, "/v1/grants", t.reviewer, body, &g); err != nil {
		return nil, fmt.Errorf("make the run's grant: %w", err)
	}
	fmt.Fprintf(cfg.Progress, "consume: making %d approval tokens (granted creates, claimed)\n", cfg.Count)
	start := time.Now()
	pool := &tokenPool{tokens: make([]string, cfg.Count)}
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for w := range tokenMakers {
		wg.Go(func() {
			b := t.base(w)
			for n := next.Add(1) - 1; n < int64(cfg.Count); n = next.Add(1) - 1 {
				tok, err := makeToken(ctx, t, b, inst, fmt.Sprintf("bench-%s-%d-token-%d", run, phase, n), n)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				pool.tokens[n] = tok
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	fmt.Fprintf(cfg.Progress, "consume: %d tokens made in %s\n", cfg.Count, time.Since(start).Round(time.Millisecond))
	return pool, nil
}

// makeToken creates the scenario's call on inst, which the grant
// approves, claims it and returns its approval token.
func makeToken(ctx context.Context, t *target, base, inst, key string, n int64) (string, error) {
	r, err := t.create(ctx, base, inst, key, grantBody(n))
	if err != nil {
		return "", err
	}
	if r.State != "approved" {
		return "", fmt.Errorf("created %s is %s, want approved by the run's grant: %w", r.ID, r.State, errNotGranted)
	}
	var c apiRequest
	if err := t.call(ctx, "POST", base, "/v1/approval-requests/"+r.ID+"/execution", t.agent, "", &c); err != nil {
		return "", fmt.Errorf("claim %s: %w", r.ID, err)
	}
	if c.Execution == nil || c.Execution.ApprovalToken == "" {
		return "", fmt.Errorf("the claim of %s answered no approval token", r.ID)
	}
	return c.Execution.ApprovalToken, nil
}

// consumeOp is client i's op: consume the next token of the pool, for the
// scenario's call, as the run's verifier.
func consumeOp(t *target, i int, pool *tokenPool) clientOp {
	base := t.base(i)
	return func(ctx context.Context, n int64) error {
		return consumeNext(ctx, t, base, "/v1/approval-tokens/consume", t.verifier, pool)
	}
}

// consumeNext consumes the pool's next token for the scenario's call at
// base+path as bearer (Airlock's consume, or the raw baseline's, which
// take the same body), and checks that the answer carries the use.
func consumeNext(ctx context.Context, t *target, base, path, bearer string, pool *tokenPool) error {
	tok, ok := pool.take()
	if !ok {
		return errPoolEmpty
	}
	body, err := json.Marshal(consumeBody{Token: tok, Tool: grantTool, Arguments: json.RawMessage(grantArgs)})
	if err != nil {
		return err
	}
	var use tokenUse
	if err := t.call(ctx, "POST", base, path, bearer, string(body), &use); err != nil {
		return err
	}
	if use.RequestID == "" || use.ConsumedAt.IsZero() {
		return fmt.Errorf("a consume answered no use")
	}
	return nil
}

// consumeBody is a consume's body: the token and the call it is held to.
type consumeBody struct {
	Token     string          `json:"token"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// tokenUse is what a consume answers: the use it recorded.
type tokenUse struct {
	RequestID  string    `json:"request_id"`
	ConsumedAt time.Time `json:"consumed_at"`
}

// runRawHTTPConsume runs the consume's baseline over HTTP (with
// --http-baseline): the least tool server doing a consume's work. Its
// handler verifies each approval token with the same library and checks
// as Airlock's consume (signature, kid, alg, exp, the tool, the digest of
// the arguments), records the use in one conditional insert committed
// alone, and answers. Its tokens are signed in this process, before the
// clock starts, with a key of the run's, and carry the claims a claim's
// token carries; Airlock's consumes ran just before, with as many
// clients, so the two are compared in one run.
func runRawHTTPConsume(ctx context.Context, cfg Config) (*RawReport, error) {
	key, err := approvaltoken.Generate()
	if err != nil {
		return nil, err
	}
	keys, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{key.Public()}})
	if err != nil {
		return nil, err
	}
	pool, err := signRawTokens(key, cfg.Count, randomHex(4))
	if err != nil {
		return nil, err
	}
	rh, err := startRawHTTP(ctx, cfg, keys)
	if err != nil {
		return nil, err
	}
	defer rh.close()
	fmt.Fprintf(cfg.Progress, "raw consume over HTTP: %s behind a minimal handler at %s (process %d), %d clients, up to %s or %d consumes\n", rh.srv.hello.Describe, rh.base, rh.srv.pid, cfg.Clients, cfg.Duration, cfg.Count)
	res, err := runLoad(ctx, cfg.Clients, cfg.Duration, cfg.Count, 0, rh.cpu, func(context.Context, int) (clientOp, func(), error) {
		return func(ctx context.Context, n int64) error {
			return consumeNext(ctx, rh.api, rh.base, "/raw/consume", rawHTTPToken, pool)
		}, nil, nil
	})
	return rh.report(res, err)
}

// signRawTokens signs n approval tokens for the scenario's call with key,
// each for a request of its own, with the claims of a token a grant's
// approval gives (docs/tokens.md).
func signRawTokens(key approvaltoken.Key, n int, run string) (*tokenPool, error) {
	digest, err := approvaltoken.ArgsDigest([]byte(grantArgs))
	if err != nil {
		return nil, err
	}
	now := time.Now().Unix()
	pool := &tokenPool{tokens: make([]string, n)}
	for i := range n {
		c := approvaltoken.Claims{
			Issuer: "http://127.0.0.1:8080", Subject: fmt.Sprintf("req_raw%s%019d", run, i), ID: randomHex(16),
			IssuedAt: now, Expiry: now + 3600, Tool: grantTool, ArgsDigest: digest,
			InstanceID: "inst_raw" + run, DecisionSource: approvaltoken.SourceGrant,
			DecidedBy: []approvaltoken.Decider{{Principal: "grt_raw" + run, Name: "bench grant"}},
		}
		if pool.tokens[i], err = approvaltoken.Sign(key, c); err != nil {
			return nil, err
		}
	}
	return pool, nil
}
