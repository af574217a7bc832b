package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
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
		tok, ok := pool.take()
		if !ok {
			return errPoolEmpty
		}
		body, err := json.Marshal(map[string]any{"token": tok, "tool": grantTool, "arguments": json.RawMessage(grantArgs)})
		if err != nil {
			return err
		}
		var use struct {
			RequestID  string    `json:"request_id"`
			ConsumedAt time.Time `json:"consumed_at"`
		}
		if err := t.call(ctx, "POST", base, "/v1/approval-tokens/consume", t.verifier, string(body), &use); err != nil {
			return err
		}
		if use.RequestID == "" || use.ConsumedAt.IsZero() {
			return fmt.Errorf("a consume answered no use")
		}
		return nil
	}
}
