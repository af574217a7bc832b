package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/testkit"
)

// TestClaim runs the claim scenario on SQLite and on PostgreSQL: a
// warm-up, then passes with tokens on, off, off, on, every claim checked
// for a token exactly when tokens are on (so that a pass without errors
// proves the switch reached the server process), each state summed and
// tokens_ratio between them.
func TestClaim(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Scenario: Claim, Clients: 2, Duration: 40 * time.Second, Count: 24}
			if store == "postgres" {
				cfg.DB = testkit.PostgresURL(t)
			}
			rep := run(t, cfg)
			c := rep.Claim
			if c == nil {
				t.Fatal("no claim report")
			}
			if !c.Compared || c.Note != "" || len(c.Passes) != len(claimOrder) {
				t.Fatalf("claim report compared %v (%q) over %d passes, want compared over %d", c.Compared, c.Note, len(c.Passes), len(claimOrder))
			}
			var onOps, offOps int64
			for i, p := range c.Passes {
				if p.Tokens != claimOrder[i] {
					t.Errorf("pass %d had tokens %v, want %v", i+1, p.Tokens, claimOrder[i])
				}
				// 24 less the warm-up's 2, shared out: 6, 6, 5, 5.
				checkResult(t, fmt.Sprintf("pass %d, tokens %s", i+1, onOff(p.Tokens)), p.Result, 6)
				if p.Tokens {
					onOps += p.Ops
				} else {
					offOps += p.Ops
				}
			}
			if c.WithoutTokens == nil {
				t.Fatal("no tokens-off result")
			}
			checkResult(t, "tokens on", c.WithTokens, 11)
			checkResult(t, "tokens off", *c.WithoutTokens, 11)
			if c.WithTokens.Ops != onOps || c.WithoutTokens.Ops != offOps || onOps+offOps != 22 {
				t.Errorf("states of %d and %d ops, want the passes' %d and %d, 22 in all", c.WithTokens.Ops, c.WithoutTokens.Ops, onOps, offOps)
			}
			if want := round(c.WithTokens.OpsPerS/c.WithoutTokens.OpsPerS, 3); c.TokensRatio != want || want <= 0 {
				t.Errorf("tokens_ratio %v, want %v", c.TokensRatio, want)
			}
			if want := round(max(passSpread([]Result{c.Passes[0].Result, c.Passes[3].Result}), passSpread([]Result{c.Passes[1].Result, c.Passes[2].Result})), 3); c.PassSpread != want {
				t.Errorf("pass_spread %v, want %v", c.PassSpread, want)
			}
			if rep.Ops != c.WithTokens.Ops || rep.OpsPerS != c.WithTokens.OpsPerS {
				t.Errorf("the report's result is %d ops at %.1f/s, want the tokens-on state's", rep.Ops, rep.OpsPerS)
			}

			b, err := json.Marshal(rep)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			for _, path := range []string{"claim.compared", "claim.tokens_ratio", "claim.with_tokens.ops_per_s", "claim.with_tokens.latency_ms.p99",
				"claim.without_tokens.ops_per_s", "claim.without_tokens.latency_ms.p50"} {
				if lookup(m, path) == nil {
					t.Errorf("JSON report has no %s:\n%s", path, b)
				}
			}
			if ps, _ := lookup(m, "claim.passes").([]any); len(ps) != len(claimOrder) {
				t.Errorf("JSON report has %d passes:\n%s", len(ps), b)
			}
			var table bytes.Buffer
			rep.WriteTable(&table)
			for _, want := range []string{"airlock claim, tokens on", "claim, tokens off", "pass 1, tokens on", "pass 3, tokens off", "tokens_ratio: ", "on, off, off, on"} {
				if !strings.Contains(table.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, table.String())
				}
			}
		})
	}
}

// TestClaimRemote drives a server at --url: it always signs, so the run
// measures tokens on only and says so, with no ratio.
func TestClaimRemote(t *testing.T) {
	t.Parallel()
	srv, err := openTarget(t.Context(), Config{Clients: 2, Progress: &bytes.Buffer{}}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close(context.Background())
	rep := run(t, Config{Scenario: Claim, Clients: 2, Duration: 20 * time.Second, Count: 6, URLs: []string{srv.urls[0]}, Token: srv.admin})
	checkResult(t, "claim over --url", rep.Result, 6)
	c := rep.Claim
	if c == nil || c.Compared || c.WithoutTokens != nil || c.TokensRatio != 0 || len(c.Passes) != 0 || c.WithTokens.Ops != rep.Ops {
		t.Fatalf("claim report over --url %+v, want tokens on only, no ratio", c)
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	if out := table.String(); !strings.Contains(out, "tokens on only") || strings.Contains(out, "tokens_ratio: ") {
		t.Errorf("table of a claim run over --url:\n%s", out)
	}
}

// claimServer is a fake Airlock that approves every request and answers
// each claim with token(n), n counting claims from 1.
func claimServer(t *testing.T, token func(n int64) string) *target {
	t.Helper()
	var ids, claims atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/instances/{inst}/approval-requests", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"id":"apr_%d","state":"pending"}`, ids.Add(1))
	})
	mux.HandleFunc("POST /v1/approval-requests/{id}/decision", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"id":%q,"state":"approved"}`, r.PathValue("id"))
	})
	mux.HandleFunc("POST /v1/approval-requests/{id}/execution", func(w http.ResponseWriter, r *http.Request) {
		tok := ""
		if s := token(claims.Add(1)); s != "" {
			tok = fmt.Sprintf(`,"approval_token":%q`, s)
		}
		fmt.Fprintf(w, `{"id":%q,"state":"approved","execution":{"status":"claimed","claimed_at":"2026-12-06T00:00:00Z"%s}}`, r.PathValue("id"), tok)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &target{urls: []string{srv.URL}, hc: srv.Client(), agent: "agent", reviewer: "reviewer"}
}

// TestClaimWithoutToken: a claim answered without an approval token (or
// with something that is not one) while tokens are on is an error of its
// own kind, never a measured operation; so is a token while tokens are off.
func TestClaimWithoutToken(t *testing.T) {
	t.Parallel()
	const jws = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJhcHIifQ.c2ln"
	for _, tt := range []struct {
		name   string
		tokens bool
		token  func(n int64) string
		kind   string
	}{
		{"every second claim without a token", true, func(n int64) string {
			if n%2 == 0 {
				return ""
			}
			return jws
		}, "claim answered without an approval token"},
		{"every second token not a JWS", true, func(n int64) string {
			if n%2 == 0 {
				return "not-a-token"
			}
			return jws
		}, "claim answered without an approval token"},
		{"every second claim with a token while tokens are off", false, func(n int64) string {
			if n%2 == 0 {
				return jws
			}
			return ""
		}, "claim answered with an approval token while tokens are off"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tgt := claimServer(t, tt.token)
			res, err := runLoad(t.Context(), 1, 20*time.Second, 8, 0, nil, func(context.Context, int) (clientOp, func(), error) {
				return claimOp(tgt, tgt.urls[0], "ins_bench", "test", 0, tt.tokens), nil, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Ops != 4 || res.Errors != 4 || res.ErrorKinds[tt.kind] != 4 {
				t.Errorf("8 claims, every second answered wrongly: %d ops, %d errors %v; want 4 and 4 %q", res.Ops, res.Errors, res.ErrorKinds, tt.kind)
			}
		})
	}
	t.Run("every claim without a token", func(t *testing.T) {
		t.Parallel()
		tgt := claimServer(t, func(int64) string { return "" })
		_, err := runLoad(t.Context(), 1, 20*time.Second, 8, 0, nil, func(context.Context, int) (clientOp, func(), error) {
			return claimOp(tgt, tgt.urls[0], "ins_bench", "test", 0, true), nil, nil
		})
		if err == nil || !strings.Contains(err.Error(), "every operation failed") || !strings.Contains(err.Error(), "without an approval token") {
			t.Errorf("a server that signs nothing: %v; want the run failed, saying why", err)
		}
	})
}

// TestClaimRefusals: the claim scenario compares two states as fast as
// the clients go, in passes that need a share of the bounds each.
func TestClaimRefusals(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"paced", Config{Scenario: Claim, Rate: 10}, "--rate"},
		{"half-max", Config{Scenario: Claim, HalfMax: true}, "--half-max"},
		{"fewer operations than passes", Config{Scenario: Claim, Count: 3}, "--count must be at least 4"},
		{"too short for its passes", Config{Scenario: Claim, Duration: 50 * time.Millisecond}, "--duration must be at least 100ms"},
	} {
		if err := tt.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate = %v, want an error naming %s", tt.name, err, tt.want)
		}
	}
	if err := (Config{Scenario: Claim, Count: 3, URLs: []string{"http://127.0.0.1:1"}, Token: "x"}).Validate(); err != nil {
		t.Errorf("a claim run of 3 over --url, which has no passes: %v", err)
	}
}

// TestClaimNoise: when passes of one state are further apart than the two
// states, the report says the ratio is within the machine's noise.
func TestClaimNoise(t *testing.T) {
	t.Parallel()
	pass := func(tokens bool, opsPerS float64) ClaimPass {
		return ClaimPass{Tokens: tokens, Result: Result{Ops: int64(opsPerS), OpsPerS: opsPerS, ElapsedS: 1}}
	}
	for _, tt := range []struct {
		name       string
		passes     []ClaimPass
		ratio      float64
		spread     float64
		wantNoisy  bool
		wantInText bool
	}{
		{"steady passes, a clear cost", []ClaimPass{pass(true, 780), pass(false, 860), pass(false, 860), pass(true, 790)}, 0.913, 0.013, false, false},
		{"drifting passes", []ClaimPass{pass(true, 430), pass(false, 240), pass(false, 236), pass(true, 176)}, 1.27, 1.443, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var on, off []Result
			for _, p := range tt.passes {
				if p.Tokens {
					on = append(on, p.Result)
				} else {
					off = append(off, p.Result)
				}
			}
			cr := &ClaimReport{Compared: true, Passes: tt.passes, TokensRatio: tt.ratio, WithTokens: mergeResults(on)}
			without := mergeResults(off)
			cr.WithoutTokens = &without
			cr.PassSpread = round(max(passSpread(on), passSpread(off)), 3)
			if cr.PassSpread != tt.spread || cr.noisy() != tt.wantNoisy {
				t.Errorf("spread %v, noisy %v; want %v, %v", cr.PassSpread, cr.noisy(), tt.spread, tt.wantNoisy)
			}
			var out bytes.Buffer
			cr.writeSummary(&out)
			if got := strings.Contains(out.String(), "noisy: "); got != tt.wantInText {
				t.Errorf("summary says noisy: %v, want %v:\n%s", got, tt.wantInText, out.String())
			}
		})
	}
}
