package rest

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/hook"
	"github.com/airlockhq/airlock/internal/ctxwait"
)

// DefaultHTTPHookWait is the wait of the HTTP hook without ?wait=: under
// the 30 s Claude Code gives an HTTP hook by default.
const DefaultHTTPHookWait = 25 * time.Second

// MaxHTTPHookWait bounds ?wait=; Claude Code's hook timeout must be raised
// above the wait in its settings.
const MaxHTTPHookWait = time.Hour

// claudeCodeHook serves POST /v1/hooks/claude-code, Claude Code's `type:
// "http"` hook: the body is the hook's JSON, as `airlock hook claude-code`
// reads it on stdin, and the answer is what that command prints
// (docs/integrations/claude-code.md).
//
// Claude Code treats a non-2xx answer, a connection failure and a timeout
// of an HTTP hook as a non-blocking error and runs the tool, so this
// endpoint answers 200 with a decision on every path it reaches: a missing
// or refused token, a rate limit, bad input and a failing store all answer
// the ?on_timeout= verdict (ask or deny), never allow. It authenticates by
// itself for that reason, instead of answering 401 and 429 as the other
// endpoints do.
func (h *handler) claudeCodeHook(w http.ResponseWriter, r *http.Request, _ airlock.Caller) {
	gate := &hook.Gate{Wait: DefaultHTTPHookWait, Fallback: hook.Ask}
	agent := hook.ClaudeCode
	answer := func(a hook.Answer) {
		writeHook(w, agent.Encode(a))
	}
	event, match, err := h.hookQuery(r, gate)
	if err != nil {
		// The configuration is wrong; deny, since no fallback was given
		// that could be trusted.
		gate.Fallback = hook.Deny
		answer(gate.FallbackAnswer(err.Error()))
		return
	}
	// fallback answers a call that cannot be asked about: the verdict
	// before a tool runs, nothing for any other event.
	fallback := func(err error) {
		if event != "pre-tool-use" {
			writeHook(w, hook.Nothing)
			return
		}
		answer(gate.FallbackAnswer(err.Error()))
	}
	c, err := h.hookCaller(w, r)
	if err != nil {
		fallback(err)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, hook.MaxPayload))
	var p hook.Payload
	if err == nil {
		p, err = hook.ParsePayload(body)
	} else {
		err = fmt.Errorf("the hook input could not be read (over %d bytes?): %v", hook.MaxPayload, err)
	}
	if err != nil {
		fallback(err)
		return
	}

	// A server shutting down ends the wait like the request's end does;
	// the gate then withdraws what it asked.
	ctx, done := ctxwait.WithStop(r.Context(), h.shutdown)
	defer done()
	gate.Backend = h.svc.HookBackend(c)

	switch event {
	case "session-end":
		if p.SessionID != "" {
			if _, err := gate.EndSession(ctx, agent.Name, p.SessionID); err != nil {
				h.log.Info("claude-code hook: session end", "session", p.SessionID, "err", err)
			}
		}
		writeHook(w, hook.Nothing)
	case "post-tool-use":
		if p.SessionID != "" && p.ToolUseID != "" && hook.Match(match, p.ToolName) {
			in := airlock.ReportInput{Status: airlock.ExecSucceeded, Detail: hook.Detail(string(p.ToolResponse))}
			if p.HookEventName == "PostToolUseFailure" || p.Error != "" {
				in = airlock.ReportInput{Status: airlock.ExecFailed, Detail: hook.Detail(p.Error)}
			}
			if _, err := gate.Report(ctx, agent.Name, p.SessionID, p.ToolName, p.ToolUseID, in); err != nil {
				h.log.Info("claude-code hook: report", "tool_use_id", p.ToolUseID, "err", err)
			}
		}
		writeHook(w, hook.Nothing)
	default:
		call, err := agent.Call(p)
		if err != nil {
			answer(gate.FallbackAnswer(err.Error()))
			return
		}
		if !hook.Match(match, call.Tool) {
			writeHook(w, hook.Nothing)
			return
		}
		answer(gate.Decide(ctx, call))
	}
}

// hookQuery reads the HTTP hook's query: event, wait, on_timeout, match.
func (h *handler) hookQuery(r *http.Request, gate *hook.Gate) (event string, match []string, err error) {
	if err := checkQuery(r.URL.RawQuery); err != nil {
		return "pre-tool-use", nil, err
	}
	q := r.URL.Query()
	event = q.Get("event")
	switch event {
	case "":
		event = "pre-tool-use"
	case "pre-tool-use", "post-tool-use", "session-end":
	default:
		return "pre-tool-use", nil, fmt.Errorf("unknown event %q in the hook's URL: use pre-tool-use, post-tool-use or session-end", event)
	}
	if s := q.Get("wait"); s != "" {
		d, err := airlock.ParseDuration(s)
		if err != nil || d < time.Second || d > MaxHTTPHookWait {
			return event, nil, fmt.Errorf("wait=%q in the hook's URL must be a duration from 1s to %s", s, MaxHTTPHookWait)
		}
		gate.Wait = d
	}
	if s := q.Get("on_timeout"); s != "" {
		v, err := hook.ParseFallback(s)
		if err != nil {
			return event, nil, errors.New(strings.ReplaceAll(err.Error(), "--on-timeout", "on_timeout"))
		}
		gate.Fallback = v
	}
	for g := range strings.SplitSeq(q.Get("match"), ",") {
		if g = strings.TrimSpace(g); g != "" {
			if err := hook.CheckGlob(g); err != nil {
				return event, nil, err
			}
			match = append(match, g)
		}
	}
	return event, match, nil
}

// hookCaller authenticates the hook's bearer token as the other endpoints
// do (the failed-attempt guard, the token, the rate limit), and returns
// the refusal as an error to answer in the body instead of a 401 or 429.
func (h *handler) hookCaller(w http.ResponseWriter, r *http.Request) (airlock.Caller, error) {
	secret := bearer(r)
	attempt, wait, ok := h.guard.Admit(r, secret)
	if !ok {
		return airlock.Caller{}, fmt.Errorf("too many failed sign-ins from this address; retry in %s", wait.Round(time.Second))
	}
	if secret == "" {
		attempt.Done(airlock.Errorf(airlock.CodeUnauthorized, "no token"))
		return airlock.Caller{}, errors.New(`no token: give the hook the header "Authorization: Bearer $AIRLOCK_AGENT_TOKEN" and list AIRLOCK_AGENT_TOKEN in allowedEnvVars`)
	}
	c, err := h.svc.Authenticate(r.Context(), secret)
	attempt.Done(err)
	switch code := airlock.ErrorCode(err); {
	case err == nil:
	case code == airlock.CodeUnauthorized || code == airlock.CodeForbidden:
		return airlock.Caller{}, fmt.Errorf("the hook's token was refused: %s", hookError(err))
	default:
		// The token could not be checked at all: saying it was refused
		// would send its owner to mint a new one for nothing.
		h.log.Error("claude-code hook: check the token", "err", err)
		return airlock.Caller{}, errors.New("the Airlock server cannot reach its database, so it cannot check the hook's token; retry when it is back")
	}
	if ok, retry := h.limiter.Allow(c.ID); !ok {
		return airlock.Caller{}, fmt.Errorf("too many requests for this token; retry after %d s", int(math.Ceil(retry.Seconds())))
	}
	return c, nil
}

func hookError(err error) string {
	var e *airlock.Error
	if errors.As(err, &e) && e.Message != "" {
		return e.Message
	}
	return "internal error"
}

func writeHook(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}
