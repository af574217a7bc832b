package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/ctxwait"
)

// RegisterInstance registers this adapter as an instance (agent tokens).
// It is not retried on network errors: a lost answer could leave a second
// instance behind. metadata may be nil.
func (c *Client) RegisterInstance(ctx context.Context, name string, metadata json.RawMessage, opts ...InstanceOption) (*Instance, error) {
	in := instanceInput{Name: name, Metadata: metadata}
	for _, opt := range opts {
		opt(&in)
	}
	body, err := airlock.EncodeJSON(in)
	if err != nil {
		return nil, fmt.Errorf("register instance: %w", err)
	}
	cl := call{method: http.MethodPost, path: "/v1/instances", body: body, want: []int{http.StatusCreated}}
	inst, err := fetch[Instance](ctx, c, cl)
	if err != nil {
		return nil, err
	}
	// Tokens for another audience, or for none, would be refused by the
	// tool server that expects this one (or pass one that expects none):
	// a server that dropped or changed the audience has not registered
	// what was asked.
	if inst.TokenAudience != in.TokenAudience {
		return nil, &AnswerError{Method: cl.method, Path: cl.path, Status: http.StatusCreated,
			Reason: fmt.Sprintf("the instance's token_audience is %q, not the %q asked for (a server older than token audiences?)", inst.TokenAudience, in.TokenAudience)}
	}
	return inst, nil
}

// instanceInput is the body of POST /v1/instances.
type instanceInput struct {
	Name          string          `json:"name"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	TokenAudience string          `json:"token_audience,omitempty"`
}

// InstanceOption sets an optional field of an instance's registration.
type InstanceOption func(*instanceInput)

// WithTokenAudience names the tool server the instance's approval tokens
// are for: they carry it as aud, and a verifier that expects another
// audience refuses them (docs/tokens.md).
func WithTokenAudience(aud string) InstanceOption {
	return func(in *instanceInput) { in.TokenAudience = aud }
}

// ListInstances lists the instances the caller may see, newest first, with
// their pending counts: every live one for reviewers and admins, their own
// for agents.
func (c *Client) ListInstances(ctx context.Context) ([]Instance, error) {
	return fetchItems[Instance](ctx, c, call{method: http.MethodGet, path: "/v1/instances", retry: true})
}

// GetInstance reads an instance with its count of pending requests.
func (c *Client) GetInstance(ctx context.Context, id string) (*Instance, error) {
	return fetch[Instance](ctx, c, call{method: http.MethodGet, path: "/v1/instances/" + url.PathEscape(id), retry: true, id: id})
}

// DeleteInstance deletes an instance, cancelling all its pending requests
// in one step, and returns how many it cancelled. A retry after a lost
// answer may find the instance gone (CodeNotFound).
func (c *Client) DeleteInstance(ctx context.Context, id string) (int, error) {
	var out struct {
		Cancelled int `json:"cancelled"`
	}
	if _, err := c.do(ctx, call{method: http.MethodDelete, path: "/v1/instances/" + url.PathEscape(id), retry: true}, &out); err != nil {
		return 0, err
	}
	return out.Cancelled, nil
}

// CreateRequest asks whether one tool call may run, on the caller's
// instance, under an idempotency key: one key per intended call. A network
// failure is retried with the same key, so the server creates the request
// at most once; created is false when the server answered with the
// original (a replay), which may already be terminal. The same key with a
// different body is CodeIdempotencyConflict.
func (c *Client) CreateRequest(ctx context.Context, instanceID, key string, in CreateRequestInput) (r *ApprovalRequest, created bool, err error) {
	if err := airlock.CheckIdempotencyKey(key); err != nil {
		return nil, false, err
	}
	body, err := createBody(in)
	if err != nil {
		return nil, false, err
	}
	r = new(ApprovalRequest)
	status, err := c.do(ctx, call{
		method: http.MethodPost, path: "/v1/instances/" + url.PathEscape(instanceID) + "/approval-requests",
		body: body, header: map[string]string{"Idempotency-Key": key}, retry: true,
		want: []int{http.StatusCreated, http.StatusOK},
	}, r)
	if err != nil {
		return nil, false, err
	}
	return r, status == http.StatusCreated, nil
}

// createBody writes a create body by hand, so the arguments and context go
// out exactly as given (json.Marshal would re-compact and HTML-escape them).
func createBody(in CreateRequestInput) ([]byte, error) {
	args := in.Arguments
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage(`{}`)
	}
	if !json.Valid(args) {
		return nil, airlock.Invalid("arguments", "arguments are not valid JSON; pass the intercepted call's arguments object")
	}
	if in.Context != nil && !json.Valid(in.Context) {
		return nil, airlock.Invalid("context", "context is not valid JSON; pass a JSON object or nil")
	}
	var b bytes.Buffer
	str := func(s string) {
		v, _ := airlock.EncodeJSON(s) // a string always encodes
		b.Write(v)
	}
	b.WriteString(`{"tool":`)
	str(in.Tool)
	b.WriteString(`,"arguments":`)
	b.Write(args)
	if in.Timeout != "" {
		b.WriteString(`,"timeout":`)
		str(in.Timeout)
	}
	if in.AgentReasoning != "" {
		b.WriteString(`,"agent_reasoning":`)
		str(in.AgentReasoning)
	}
	if len(in.Context) > 0 {
		b.WriteString(`,"context":`)
		b.Write(in.Context)
	}
	if p := in.Preview; p != nil {
		b.WriteString(`,"preview":{"type":`)
		str(p.Type)
		b.WriteString(`,"content":`)
		str(p.Content)
		b.WriteByte('}')
	}
	if in.Reversibility != "" {
		b.WriteString(`,"reversibility":`)
		str(in.Reversibility)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// GetRequest reads a request as it is now.
func (c *Client) GetRequest(ctx context.Context, id string) (*ApprovalRequest, error) {
	return c.LongPollRequest(ctx, id, 0)
}

// LongPollRequest reads a request, holding the answer until the request is
// terminal or wait has passed (the server caps wait, 60s by default). A
// zero wait reads at once.
func (c *Client) LongPollRequest(ctx context.Context, id string, wait time.Duration) (*ApprovalRequest, error) {
	cl := call{method: http.MethodGet, path: "/v1/approval-requests/" + url.PathEscape(id), retry: true, id: id}
	if wait > 0 {
		cl.query = url.Values{"wait": {wait.String()}}
		cl.extra = wait
	}
	var r ApprovalRequest
	if _, err := c.do(ctx, cl, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// WaitOptions tunes WaitRequest.
type WaitOptions struct {
	// PollWait is one long-poll's wait (default: the client's, 30s).
	PollWait time.Duration
	// OnPending, when set, is called with the request each time a poll
	// answers that it is still pending (first at once), for progress.
	OnPending func(*ApprovalRequest)
}

// WaitRequest long-polls until the request is terminal and returns it. It
// rides out network failures and rate limits with backoff until ctx ends;
// it stops at once on an answer that polling again cannot change (the
// request is not found, the token is refused).
func (c *Client) WaitRequest(ctx context.Context, id string, opts *WaitOptions) (*ApprovalRequest, error) {
	var o WaitOptions
	if opts != nil {
		o = *opts
	}
	if o.PollWait <= 0 {
		o.PollWait = c.poll
	}
	failures := 0
	for {
		r, err := c.LongPollRequest(ctx, id, o.PollWait)
		switch {
		case err == nil:
			failures = 0
			if r.State.Terminal() {
				return r, nil
			}
			if o.OnPending != nil {
				o.OnPending(r)
			}
			continue
		case ctx.Err() != nil:
			return nil, fmt.Errorf("wait for %s: %w", id, ctx.Err())
		case !transient(err):
			return nil, err
		}
		// LongPollRequest has already retried; keep waiting, more slowly.
		if serr := ctxwait.Sleep(ctx, c.retry.backoff(failures+c.retry.Attempts)); serr != nil {
			return nil, fmt.Errorf("wait for %s: %w (last error: %v)", id, serr, err)
		}
		failures++
	}
}

// transient reports whether err may pass by itself: no answer, a rate
// limit, an unavailable store, a gateway error or an internal error.
func transient(err error) bool {
	var ne *NetworkError
	if errors.As(err, &ne) {
		return true
	}
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Code == airlock.CodeRateLimited || ae.Code == airlock.CodeUnavailable || ae.Code == airlock.CodeInternal ||
			ae.Status >= 500
	}
	return false
}

// ListRequests lists one page of requests, newest first: every request for
// reviewers and admins, the caller's own for agents. A page holds up to
// opts.Limit requests, fewer when their arguments are large (the server
// ends a page at 4 MiB of them); follow NextCursor, or use AllRequests. A
// 429 for too many lists at once is retried after its Retry-After.
func (c *Client) ListRequests(ctx context.Context, opts ListRequestsOptions) (*RequestPage, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("state", string(opts.State))
	set("instance_id", opts.InstanceID)
	set("tool", opts.Tool)
	set("kind", string(opts.Kind))
	set("cursor", opts.Cursor)
	if opts.Limit != 0 {
		q.Set("limit", itoa(opts.Limit))
	}
	return fetch[RequestPage](ctx, c, call{method: http.MethodGet, path: "/v1/approval-requests", query: q, retry: true})
}

// AllRequests iterates over every request the filter selects, page by
// page, newest first; opts.Cursor starts it later. An error ends the
// iteration after being yielded.
func (c *Client) AllRequests(ctx context.Context, opts ListRequestsOptions) iter.Seq2[ApprovalRequest, error] {
	return func(yield func(ApprovalRequest, error) bool) {
		for {
			p, err := c.ListRequests(ctx, opts)
			if err != nil {
				yield(ApprovalRequest{}, err)
				return
			}
			for _, r := range p.Items {
				if !yield(r, nil) {
					return
				}
			}
			if p.NextCursor == "" {
				return
			}
			opts.Cursor = p.NextCursor
		}
	}
}

// CancelRequest withdraws a pending request of the caller's. It is retried
// on network errors; a retry whose first attempt landed answers
// CodeNotPending with State cancelled.
func (c *Client) CancelRequest(ctx context.Context, id string) (*ApprovalRequest, error) {
	return fetch[ApprovalRequest](ctx, c, call{method: http.MethodPost, path: "/v1/approval-requests/" + url.PathEscape(id) + "/cancel", retry: true, id: id})
}

// Decide records a reviewer's decision. It is not retried on network
// errors (a lost answer may have been a decision); read the request to
// learn what holds.
func (c *Client) Decide(ctx context.Context, id string, in DecisionInput) (*ApprovalRequest, error) {
	body, err := airlock.EncodeJSON(in)
	if err != nil {
		return nil, fmt.Errorf("decide %s: %w", id, err)
	}
	return fetch[ApprovalRequest](ctx, c, call{method: http.MethodPost, path: "/v1/approval-requests/" + url.PathEscape(id) + "/decision", body: body, id: id})
}

// DecideBatch records one decision for each of in.IDs (docs/protocol.md,
// "Batch decisions"): a result per id, in the order of in.IDs. The error
// is for the batch as a whole (not a reviewer, no ids or too many, one
// twice); a refused id is its result's Err. Like Decide it is not
// retried.
func (c *Client) DecideBatch(ctx context.Context, in BatchDecisionInput) ([]BatchResult, error) {
	const path = "/v1/approval-requests/decisions"
	body, err := airlock.EncodeJSON(in)
	if err != nil {
		return nil, fmt.Errorf("decide a batch: %w", err)
	}
	type wireResult struct {
		ID      string           `json:"id"`
		Status  int              `json:"status"`
		Request *ApprovalRequest `json:"request"`
		Problem *airlock.Problem `json:"problem"`
	}
	got, err := fetch[struct {
		Results []wireResult `json:"results"`
	}](ctx, c, call{method: http.MethodPost, path: path, body: body})
	if err != nil {
		return nil, err
	}
	out := make([]BatchResult, len(got.Results))
	for i, r := range got.Results {
		out[i] = BatchResult{ID: r.ID, Request: r.Request}
		if r.Problem != nil {
			e := &Error{Status: r.Status, Method: http.MethodPost, Path: path}
			e.fromProblem(*r.Problem)
			out[i] = BatchResult{ID: r.ID, Err: e}
		}
	}
	return out, nil
}

// Approve approves a request with an optional note, for the default
// validity. Use Decide for a validity or an answer.
func (c *Client) Approve(ctx context.Context, id, note string) (*ApprovalRequest, error) {
	return c.Decide(ctx, id, DecisionInput{Status: airlock.StateApproved, Note: note})
}

// Edit approves a tool call with changed arguments, args, a JSON object
// (docs/protocol.md, "Edits"): the answer is the request, denied with
// Decision.ReplacedBy, and Replacement, the request with args approved in
// its place. Like Decide it is not retried.
func (c *Client) Edit(ctx context.Context, id string, args json.RawMessage, note, validFor string) (*ApprovalRequest, error) {
	return c.Decide(ctx, id, DecisionInput{Status: airlock.StateApproved, Note: note, ValidFor: validFor, Arguments: args})
}

// Deny denies a request; the note tells the agent why.
func (c *Client) Deny(ctx context.Context, id, note string) (*ApprovalRequest, error) {
	return c.Decide(ctx, id, DecisionInput{Status: airlock.StateDenied, Note: note})
}

// ClaimExecution claims the one execution attempt of an approved request.
// The server refuses at or after expires_at (CodeApprovalExpired), a second
// time (CodeAlreadyExecuted) and unless approved (CodeNotApproved). It is
// not retried on network errors: only one claim can ever succeed, so a
// retry after a lost answer could not tell a win from a loss. The Gate
// handles that case. A success answer is believed only when it is this
// request, approved, with its execution claimed; any other is an
// *AnswerError, and nothing may run on it.
func (c *Client) ClaimExecution(ctx context.Context, id string) (*ApprovalRequest, error) {
	cl := call{method: http.MethodPost, path: "/v1/approval-requests/" + url.PathEscape(id) + "/execution", id: id}
	r, err := fetch[ApprovalRequest](ctx, c, cl)
	if err != nil {
		return nil, err
	}
	var exec airlock.ExecutionStatus
	if r.Execution != nil {
		exec = r.Execution.Status
	}
	if err := airlock.CheckClaimed(id, r.ID, r.State, exec); err != nil {
		return nil, &AnswerError{Method: cl.method, Path: cl.path, Status: http.StatusOK, Reason: err.Error()}
	}
	return r, nil
}

// ReportExecution records the claimed execution's outcome: succeeded,
// failed or unknown. Reporting the same outcome again is harmless, so it
// is retried on network errors; a different one is CodeAlreadyExecuted.
func (c *Client) ReportExecution(ctx context.Context, id string, status airlock.ExecutionStatus, detail string) (*ApprovalRequest, error) {
	body, err := airlock.EncodeJSON(struct {
		Status airlock.ExecutionStatus `json:"status"`
		Detail string                  `json:"detail,omitempty"`
	}{status, detail})
	if err != nil {
		return nil, fmt.Errorf("report %s: %w", id, err)
	}
	return fetch[ApprovalRequest](ctx, c, call{method: http.MethodPut, path: "/v1/approval-requests/" + url.PathEscape(id) + "/execution", body: body, retry: true, id: id})
}
