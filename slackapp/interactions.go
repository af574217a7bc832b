package slackapp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/outbound"
	"github.com/airlockhq/airlock/provider"
	"github.com/slack-go/slack"
)

// MaxInteractionBytes bounds an interaction request's body. Slack's
// block_actions payload carries the message clicked, which Render keeps
// well under this.
const MaxInteractionBytes = 256 << 10

// Interactions serves POST /slack/interactions: Slack's requests when a
// reviewer clicks Approve or Deny.
type Interactions struct {
	svc    *provider.Service
	secret string
	log    *slog.Logger
	client *http.Client
	// hooks are the hosts a response_url may name: Slack's, and the Web
	// API's own host when --slack-api-url points elsewhere (tests).
	hooks []string
	// wait, when set, is called with each reply posted to a response_url
	// once it is done (tests).
	wait func()
}

// InteractionsConfig configures Interactions.
type InteractionsConfig struct {
	Service *provider.Service
	// SigningSecret is the Slack app's signing secret; never logged.
	SigningSecret string
	// APIURL is the Web API's base URL (default DefaultAPIURL); its host
	// may be named by response_urls besides hooks.slack.com.
	APIURL string
	Logger *slog.Logger
	// Replied, when set, is called after each reply to a response_url
	// (tests).
	Replied func()
	// AllowPrivate lets replies reach a response_url at a non-public
	// address (--outbound-allow-private, for tests).
	AllowPrivate bool
}

// NewInteractions returns the handler cfg describes.
func NewInteractions(cfg InteractionsConfig) *Interactions {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	hooks := []string{"hooks.slack.com"}
	if cfg.APIURL != "" {
		if u, err := url.Parse(cfg.APIURL); err == nil && u.Host != "" {
			hooks = append(hooks, u.Host)
		}
	}
	return &Interactions{svc: cfg.Service, secret: cfg.SigningSecret, log: cfg.Logger, hooks: hooks,
		client: outbound.HTTPClient(5*time.Second, cfg.AllowPrivate), wait: cfg.Replied}
}

// ServeHTTP verifies Slack's signature over the raw body, then decides as
// the reviewer the Slack user is linked to. Anything not signed by Slack
// within five minutes is 401; everything verified is answered 200 with
// what came of it, also posted to the user alone through response_url.
func (h *Interactions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxInteractionBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeProblem(w, http.StatusRequestEntityTooLarge, airlock.CodePayloadTooLarge, fmt.Sprintf("an interaction is at most %d bytes", MaxInteractionBytes))
			return
		}
		writeProblem(w, http.StatusBadRequest, airlock.CodeInvalidRequest, "could not read the body")
		return
	}
	if err := h.verify(r.Header, body); err != nil {
		h.log.Warn("slack interaction refused", "reason", err.Error(), "remote", r.RemoteAddr)
		writeProblem(w, http.StatusUnauthorized, airlock.CodeUnauthorized, "not signed by Slack with this app's signing secret within five minutes")
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || form.Get("payload") == "" {
		writeProblem(w, http.StatusBadRequest, airlock.CodeInvalidRequest, "the body must be form-encoded with a payload field")
		return
	}
	var cb slack.InteractionCallback
	if err := json.Unmarshal([]byte(form.Get("payload")), &cb); err != nil {
		writeProblem(w, http.StatusBadRequest, airlock.CodeInvalidRequest, "payload is not Slack's interaction JSON")
		return
	}
	text, status := h.act(r.Context(), cb)
	if status != http.StatusOK {
		writeProblem(w, status, airlock.CodeUnavailable, text)
		return
	}
	h.reply(cb.ResponseURL, text)
	b, _ := json.Marshal(map[string]any{"response_type": "ephemeral", "replace_original": false, "text": text})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// verify checks X-Slack-Signature over "v0:timestamp:body" with the
// signing secret, and the timestamp within five minutes (slack-go's
// verifier).
func (h *Interactions) verify(header http.Header, body []byte) error {
	sv, err := slack.NewSecretsVerifier(header, h.secret)
	if err != nil {
		return err
	}
	if _, err := sv.Write(body); err != nil {
		return err
	}
	return sv.Ensure()
}

// act decides what cb asks and says what came of it; a status other than
// 200 when the store could not serve (Slack then shows the user an error).
func (h *Interactions) act(ctx context.Context, cb slack.InteractionCallback) (string, int) {
	if cb.Type != slack.InteractionTypeBlockActions || len(cb.ActionCallback.BlockActions) != 1 {
		return "Airlock only takes its Approve and Deny buttons.", http.StatusOK
	}
	a := cb.ActionCallback.BlockActions[0]
	var status airlock.State
	switch a.ActionID {
	case ActionApprove:
		status = airlock.StateApproved
	case ActionDeny:
		status = airlock.StateDenied
	default:
		return "Airlock does not know this button.", http.StatusOK
	}
	id := a.Value
	if !strings.HasPrefix(id, airlock.PrefixRequest) {
		return "Airlock does not know this button.", http.StatusOK
	}
	log := h.log.With("request", id, "slack_user", cb.User.ID, "action", a.ActionID)
	caller, err := h.svc.SlackReviewer(ctx, cb.User.ID)
	if err != nil {
		return h.refusal(log, err)
	}
	r, err := h.svc.Decide(ctx, caller, id, airlock.DecisionInput{Status: status, Note: "Decided in Slack."})
	if err != nil {
		return h.refusal(log, err)
	}
	log.Info("decided in Slack", "principal", caller.Principal, "state", r.State)
	if r.State == airlock.StatePending {
		return fmt.Sprintf("Your vote is counted: %s. The request waits for more approvals.", r.QuorumProgress()), http.StatusOK
	}
	return fmt.Sprintf("%s. The message will show it in a moment.", outcomeWord(r)), http.StatusOK
}

func (h *Interactions) refusal(log *slog.Logger, err error) (string, int) {
	e, ok := errors.AsType[*airlock.Error](err)
	if !ok || e.Code == airlock.CodeUnavailable || e.Code == airlock.CodeInternal {
		log.Error("slack interaction failed", "err", err)
		return "Airlock could not record this now; try again in a moment.", http.StatusServiceUnavailable
	}
	log.Info("slack interaction refused", "code", e.Code, "err", e.Message)
	switch e.Code {
	case airlock.CodeNotPending, airlock.CodeDeadlinePassed:
		return fmt.Sprintf("Too late: this request is already %s.", e.State), http.StatusOK
	case airlock.CodeNotFound:
		return "Airlock has no such request.", http.StatusOK
	case airlock.CodeInvalidRequest:
		return "This request needs more than a button (an answer, say): decide it in the Airlock inbox.", http.StatusOK
	}
	return "Refused: " + e.Message, http.StatusOK
}

// reply posts text to the clicking user alone through Slack's
// response_url, after the answer: Slack ignores the body of an answer to
// block_actions. Only Slack's hosts are posted to.
func (h *Interactions) reply(responseURL, text string) {
	u, err := url.Parse(responseURL)
	if err != nil || responseURL == "" || !h.hookHost(u) {
		return
	}
	body, _ := json.Marshal(map[string]any{"response_type": "ephemeral", "replace_original": false, "text": text})
	go func() {
		if h.wait != nil {
			defer h.wait()
		}
		req, err := http.NewRequest(http.MethodPost, responseURL, bytes.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := h.client.Do(req)
		if err != nil {
			h.log.Info("slack response_url", "err", err)
			return
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}()
}

func (h *Interactions) hookHost(u *url.URL) bool {
	for _, host := range h.hooks {
		if u.Host == host && (u.Scheme == "https" || host != "hooks.slack.com") {
			return true
		}
	}
	return false
}

func writeProblem(w http.ResponseWriter, status int, code airlock.Code, detail string) {
	b, _ := json.Marshal(map[string]any{"type": "urn:airlock:problem:" + string(code), "title": http.StatusText(status), "status": status, "code": code, "detail": detail})
	w.Header().Set("Content-Type", "application/problem+json")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	w.Write(b)
}
