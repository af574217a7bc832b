// Package client is Airlock's Go SDK (docs/adapters.md): a typed client for
// the REST API and a Gate that runs one tool call only with a valid
// approval, and only once (docs/protocol.md L6–L8).
//
// Errors the server answers are *Error, carrying the domain's airlock.Code,
// the HTTP status and, for conflicts, the state that holds, so callers can
// errors.As and switch on the code. Calls that are safe to repeat (reads,
// creates with an Idempotency-Key, reports, cancels) are retried on network
// errors and unavailable answers with the same key, with bounded backoff
// that respects ctx; a rate-limited call is retried after the server's
// Retry-After, as is an unavailable one.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/ctxwait"
)

// Client talks to one Airlock server with one bearer token. It is safe for
// concurrent use.
type Client struct {
	base    *url.URL
	token   string
	http    *http.Client
	retry   Retry
	timeout time.Duration
	poll    time.Duration
	agent   string
	// keys caches the server's public key set for VerifyApprovalToken.
	keys keyCache
}

// Retry bounds how the client repeats a call that failed on the network (or
// was rate-limited). The zero value takes the defaults.
type Retry struct {
	// Attempts is how many times a call is sent at most, the first
	// included (default 5). 1 turns retries off.
	Attempts int
	// MinBackoff is the pause before the first retry (default 100ms); it
	// doubles each time, with jitter, up to MaxBackoff (default 5s).
	MinBackoff time.Duration
	MaxBackoff time.Duration
}

func (r Retry) withDefaults() Retry {
	if r.Attempts <= 0 {
		r.Attempts = 5
	}
	if r.MinBackoff <= 0 {
		r.MinBackoff = 100 * time.Millisecond
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = 5 * time.Second
	}
	if r.MaxBackoff < r.MinBackoff {
		r.MaxBackoff = r.MinBackoff
	}
	return r
}

// backoff returns the pause before retry n (0-based): exponential with
// "equal jitter", so concurrent clients do not retry in lockstep.
func (r Retry) backoff(n int) time.Duration {
	d := r.MinBackoff << min(n, 20)
	if d > r.MaxBackoff || d <= 0 {
		d = r.MaxBackoff
	}
	return d/2 + rand.N(d/2+1)
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (default: a new http.Client without
// an overall timeout, since long polls and event streams last; each call
// gets its own deadline, see WithTimeout). Tests inject failing transports
// here.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithRetry sets the retry policy for network errors and rate limits.
func WithRetry(r Retry) Option { return func(c *Client) { c.retry = r.withDefaults() } }

// WithTimeout bounds each attempt of an ordinary call (default 30s). Long
// polls get their wait on top.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithPollWait sets how long one long-poll of WaitRequest asks the server
// to hold (default 30s; the server caps it, 60s by default).
func WithPollWait(d time.Duration) Option { return func(c *Client) { c.poll = d } }

// WithUserAgent sets the User-Agent header, so server logs tell adapters apart.
func WithUserAgent(ua string) Option { return func(c *Client) { c.agent = ua } }

// New returns a client for the server at baseURL (such as
// http://127.0.0.1:8080) that authenticates with token. It fails only on a
// malformed URL; a wrong token shows on the first call as CodeUnauthorized.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("airlock client: base URL %q is not an http(s) URL such as http://127.0.0.1:8080", baseURL)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("airlock client: base URL %q must not carry credentials, a query or a fragment; pass the token separately", baseURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	c := &Client{
		base: u, token: token, http: &http.Client{}, retry: Retry{}.withDefaults(),
		timeout: 30 * time.Second, poll: 30 * time.Second, agent: "airlock-go-client",
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// BaseURL returns the server's base URL, as given to New.
func (c *Client) BaseURL() string { return c.base.String() }

// call describes one API call.
type call struct {
	method string
	path   string     // under the base URL, e.g. /v1/tokens
	query  url.Values // may be nil
	body   []byte     // JSON; nil for none
	header map[string]string
	// retry marks calls that are safe to send again after a network error
	// (the server may have acted on the first): reads, keyed creates,
	// reports and cancels.
	retry bool
	// extra lengthens the attempt's deadline, for long polls.
	extra time.Duration
	// want is the set of success statuses (default 200).
	want []int
	// id, when set, is the id of the resource the answer must be.
	id string
}

// do performs c, retrying as its kind allows, and decodes a JSON success
// body into out (when non-nil), or keeps it as it is when out is a *[]byte
// (the audit log's text and JSON lines). It returns the success status.
func (c *Client) do(ctx context.Context, cl call, out any) (int, error) {
	var lastErr error
	for attempt := 0; attempt < c.retry.Attempts; attempt++ {
		if attempt > 0 {
			pause := c.retry.backoff(attempt - 1)
			var ae *Error
			if errors.As(lastErr, &ae) && ae.retryAfter > 0 {
				pause = min(ae.retryAfter, 30*time.Second)
			}
			if err := ctxwait.Sleep(ctx, pause); err != nil {
				return 0, fmt.Errorf("%s %s: %w (last error: %v)", cl.method, cl.path, err, lastErr)
			}
		}
		status, body, err := c.once(ctx, cl)
		if raw, ok := out.(*[]byte); ok && err == nil {
			*raw = body
		} else if err == nil && out != nil {
			err = decodeAnswer(cl, status, body, out)
		}
		if err == nil {
			return status, nil
		}
		lastErr = err
		if ctx.Err() != nil || !c.retryable(cl, err) {
			return 0, err
		}
	}
	return 0, lastErr
}

// decodeAnswer decodes a success body into out. Where a resource is
// expected, the body must be one JSON object that decodes into it: an
// empty body, a page of HTML or a body cut short is an *AnswerError, never
// a zero value taken for the resource.
func decodeAnswer(cl call, status int, body []byte, out any) error {
	bad := func(reason string) error {
		return &AnswerError{Method: cl.method, Path: cl.path, Status: status, Reason: reason}
	}
	trimmed := bytes.TrimSpace(body)
	switch {
	case len(trimmed) == 0:
		return bad("the body is empty")
	case trimmed[0] != '{':
		return bad(fmt.Sprintf("the body is not a JSON object (it starts %q)", snippet(trimmed)))
	case !json.Valid(trimmed):
		return bad("the body is not valid JSON (cut short?)")
	}
	if err := json.Unmarshal(trimmed, out); err != nil {
		return bad(fmt.Sprintf("the body does not decode: %v", err))
	}
	if cl.id != "" {
		var got struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(trimmed, &got) != nil || got.ID != cl.id {
			return bad(fmt.Sprintf("it is about %q, not %s", got.ID, cl.id))
		}
	}
	return nil
}

// snippet is the start of a body, for an error message.
func snippet(b []byte) string {
	if len(b) > 24 {
		b = b[:24]
	}
	return string(b)
}

// AnswerError is a success status whose body is not what the call expects:
// empty, not JSON, cut short, or about another request than the one asked
// for. The server, or something between it and the client, is broken or
// hostile, so nothing in the answer is believed (docs/adapters.md). For a
// call that is safe to repeat it is retried like a lost answer.
type AnswerError struct {
	Method, Path string
	// Status is the success status that came with the body.
	Status int
	// Reason says what is wrong with the answer.
	Reason string
}

func (e *AnswerError) Error() string {
	return fmt.Sprintf("%s %s: the server's %d answer cannot be believed: %s", e.Method, e.Path, e.Status, e.Reason)
}

// retryable says whether err may be retried for cl: a rate limit always
// (the server did nothing); a network error, an answer that cannot be
// believed, an unavailable store or a gateway's 502/503/504 only for calls
// that are safe to repeat (a store that lost its connection while
// committing may have recorded the call).
func (c *Client) retryable(cl call, err error) bool {
	var ae *Error
	if errors.As(err, &ae) {
		switch ae.Code {
		case airlock.CodeRateLimited:
			return true
		case airlock.CodeUnavailable:
			return cl.retry
		}
		return cl.retry && ae.Code == "" && (ae.Status == http.StatusBadGateway ||
			ae.Status == http.StatusServiceUnavailable || ae.Status == http.StatusGatewayTimeout)
	}
	var ne *NetworkError
	var be *AnswerError
	return cl.retry && (errors.As(err, &ne) || errors.As(err, &be))
}

// NetworkError is a call that got no answer from the server: the connection
// failed, broke or timed out. The server may or may not have acted on it.
type NetworkError struct {
	Method, Path string
	Err          error
}

func (e *NetworkError) Error() string {
	return fmt.Sprintf("%s %s: no answer from the Airlock server: %v", e.Method, e.Path, e.Err)
}

// Unwrap returns the transport's error.
func (e *NetworkError) Unwrap() error { return e.Err }

// once sends cl once and returns the status and body of a success, or an
// error: *Error for an answer that is not a success, *NetworkError when no
// answer came.
func (c *Client) once(ctx context.Context, cl call) (int, []byte, error) {
	// cl.path is escaped (a principal's "/" as %2F): it joins the escaped
	// base path, and Path is its unescaped form, so the server reads each
	// segment exactly as escaped.
	u := *c.base
	u.RawPath = u.EscapedPath() + cl.path
	p, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", cl.method, cl.path, err)
	}
	u.Path = p
	if len(cl.query) > 0 {
		u.RawQuery = cl.query.Encode()
	}
	actx, cancel := context.WithTimeout(ctx, c.timeout+cl.extra)
	defer cancel()
	var body io.Reader
	if cl.body != nil {
		body = bytes.NewReader(cl.body)
	}
	req, err := http.NewRequestWithContext(actx, cl.method, u.String(), body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", cl.method, cl.path, err)
	}
	if cl.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.agent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range cl.header {
		req.Header.Set(k, v)
	}
	res, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, fmt.Errorf("%s %s: %w", cl.method, cl.path, ctx.Err())
		}
		return 0, nil, &NetworkError{Method: cl.method, Path: cl.path, Err: err}
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, fmt.Errorf("%s %s: %w", cl.method, cl.path, ctx.Err())
		}
		return 0, nil, &NetworkError{Method: cl.method, Path: cl.path, Err: fmt.Errorf("read answer: %w", err)}
	}
	want := cl.want
	if len(want) == 0 {
		want = []int{http.StatusOK}
	}
	for _, s := range want {
		if res.StatusCode == s {
			return res.StatusCode, data, nil
		}
	}
	return 0, nil, decodeError(cl.method, cl.path, res, data)
}

// fetch makes the call cl and decodes its answer into a new T.
func fetch[T any](ctx context.Context, c *Client, cl call) (*T, error) {
	var v T
	if _, err := c.do(ctx, cl, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// fetchItems makes a call whose answer lists resources under "items"; an
// answer without that list is not believed.
func fetchItems[T any](ctx context.Context, c *Client, cl call) ([]T, error) {
	var out struct {
		Items *[]T `json:"items"`
	}
	status, err := c.do(ctx, cl, &out)
	if err != nil {
		return nil, err
	}
	if out.Items == nil {
		return nil, &AnswerError{Method: cl.method, Path: cl.path, Status: status, Reason: `it has no "items" list`}
	}
	return *out.Items, nil
}

// itoa is strconv.Itoa, for query values.
func itoa(n int) string { return strconv.Itoa(n) }
