package airlock

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/airlockhq/airlock/internal/strictjson"
)

// Input limits (docs/protocol.md, "Limits and input"). Lengths are in bytes
// of UTF-8.
const (
	MaxBodyBytes       = 1 << 20 // whole HTTP body
	MaxReasoningLen    = 16 << 10
	MaxContextBytes    = 64 << 10
	MaxMetadataBytes   = 16 << 10
	MaxTimeoutLen      = 64
	MaxNoteLen         = 4000
	MaxAnswerLen       = 2000
	MaxDetailLen       = 4000
	MaxInstanceNameLen = 200
	// MaxTokenAudienceLen bounds an instance's token_audience: a URL or a
	// name.
	MaxTokenAudienceLen = 512
	MaxIdempotencyKey   = 200
	MaxTitleLen         = 200
	MaxDescriptionLen   = 4000
	MaxChoiceLen        = 120
	MinChoices          = 2
	MaxChoices          = 6
)

// ToolNamePattern is the shape every tool name must have. Anything else
// (spaces, control, bidirectional or look-alike characters) is refused at
// creation, so a reviewer never has to tell two tool names apart by eye.
// Like ColumnKeyPattern it is compiled on first use, not at start-up.
var ToolNamePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`) })

// providerFields are names a client may never send: the provider sets them.
var providerFields = []string{
	"id", "instance_id", "owner_id", "state", "decision", "execution",
	"created_at", "deadline_at", "decided_at", "decided_by", "expires_at",
	"claimed_at", "finished_at", "fingerprint", "pending_count", "secret", "revoked_at",
}

// DecodeObject strictly decodes a JSON object into dst, a pointer to a
// struct whose fields carry json tags. Keys must match a tag exactly; keys
// that name provider-set fields, and unknown keys, are refused by name.
func DecodeObject(data []byte, dst any) error {
	members, err := ParseObject(data)
	if err != nil {
		return err
	}
	allowed := jsonFieldNames(dst)
	for _, m := range members {
		if slices.Contains(allowed, m.Key) {
			continue
		}
		if slices.Contains(providerFields, m.Key) {
			return Invalid(m.Key, "field %q is set by the provider; remove it", m.Key)
		}
		key := Clip(m.Key)
		return Invalid(key, "unknown field %q; allowed fields are %s", key, strings.Join(allowed, ", "))
	}
	if err := json.Unmarshal(data, dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return Invalid(te.Field, "%s must be a JSON %s", te.Field, jsonKind(te.Type))
		}
		return Invalid("", "invalid JSON: %v", err)
	}
	return nil
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "value"
		}
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Float64:
		return "number"
	}
	return t.String()
}

func jsonFieldNames(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// CheckText checks a string field's length and that it holds no NUL.
func CheckText(field, s string, minLen, maxLen int) error {
	if len(s) < minLen {
		if minLen == 1 {
			return Invalid(field, "%s is required", field)
		}
		return Invalid(field, "%s must be at least %d bytes", field, minLen)
	}
	if len(s) > maxLen {
		return Invalid(field, "%s must be at most %d bytes (got %d)", field, maxLen, len(s))
	}
	if !utf8.ValidString(s) {
		return Invalid(field, "%s is not valid UTF-8", field)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return Invalid(field, "%s contains a NUL character", field)
	}
	return nil
}

// isObject reports whether raw (strict JSON) is an object.
func isObject(raw json.RawMessage) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '{'
	}
	return false
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// CheckIdempotencyKey validates an Idempotency-Key: 1 to 200 printable
// ASCII characters.
func CheckIdempotencyKey(key string) error {
	if key == "" {
		return Invalid("Idempotency-Key", "the Idempotency-Key header is required: send a unique key per intended call and reuse it on retries")
	}
	if len(key) > MaxIdempotencyKey {
		return Invalid("Idempotency-Key", "Idempotency-Key must be at most %d characters", MaxIdempotencyKey)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return Invalid("Idempotency-Key", "Idempotency-Key must be printable ASCII without spaces")
		}
	}
	return nil
}

// CreateRequestInput is the body of POST /v1/instances/{id}/approval-requests
// (CreateApprovalRequest).
type CreateRequestInput struct {
	Tool           string          `json:"tool"`
	Arguments      json.RawMessage `json:"arguments"`
	Timeout        string          `json:"timeout"`
	AgentReasoning string          `json:"agent_reasoning"`
	Context        json.RawMessage `json:"context"`
	// Preview and Reversibility are the adapter's claims about the call
	// (docs/protocol.md, "What the adapter claims"), both optional.
	Preview       *Preview `json:"preview,omitempty"`
	Reversibility string   `json:"reversibility,omitempty"`
}

// ParseCreateRequest strictly decodes and validates a create body.
func ParseCreateRequest(body []byte) (CreateRequestInput, error) {
	var in CreateRequestInput
	if err := DecodeObject(body, &in); err != nil {
		return in, err
	}
	return in, in.Validate()
}

// CheckEditedArguments checks the arguments a reviewer approves in place
// of a request's, as a create checks an adapter's: a JSON object, strict.
func CheckEditedArguments(args json.RawMessage) error {
	if isNull(args) || !isObject(args) {
		return Invalid("arguments", "edited arguments must be a JSON object")
	}
	return CheckJSON("arguments", args)
}

// Validate checks every field of a create request.
func (in *CreateRequestInput) Validate() error {
	if in.Tool == "" {
		return Invalid("tool", "tool is required")
	}
	if !ToolNamePattern().MatchString(in.Tool) {
		return Invalid("tool", "tool must match %s: letters, digits, '_', '.', '-', 1 to 128 characters", ToolNamePattern())
	}
	if isNull(in.Arguments) {
		return Invalid("arguments", "arguments is required: the exact arguments of the intercepted call, as a JSON object")
	}
	if !isObject(in.Arguments) {
		return Invalid("arguments", "arguments must be a JSON object")
	}
	// The body was strict when it came through ParseCreateRequest, but
	// callers may fill this struct from elsewhere (an MCP call's arguments,
	// the Go SDK): check again, so duplicate keys or trailing data never
	// reach the store or the fingerprint.
	if err := CheckJSON("arguments", in.Arguments); err != nil {
		return err
	}
	if err := CheckText("timeout", in.Timeout, 0, MaxTimeoutLen); err != nil {
		return err
	}
	if err := CheckText("agent_reasoning", in.AgentReasoning, 0, MaxReasoningLen); err != nil {
		return err
	}
	if isNull(in.Context) {
		in.Context = nil
	} else {
		if !isObject(in.Context) {
			return Invalid("context", "context must be a JSON object")
		}
		if len(in.Context) > MaxContextBytes {
			return Invalid("context", "context must be at most %d bytes", MaxContextBytes)
		}
		if err := CheckJSON("context", in.Context); err != nil {
			return err
		}
	}
	if err := CheckPreview(in.Preview); err != nil {
		return err
	}
	return CheckReversibility(in.Reversibility)
}

// Fingerprint returns the hash of the canonical validated body for an
// instance: what idempotent replays are compared by.
func (in *CreateRequestInput) Fingerprint(instanceID string) (string, error) {
	args, err := Canonical(in.Arguments)
	if err != nil {
		return "", fmt.Errorf("canonical arguments: %w", err)
	}
	ctx := []byte("null")
	if in.Context != nil {
		if ctx, err = Canonical(in.Context); err != nil {
			return "", fmt.Errorf("canonical context: %w", err)
		}
	}
	h := sha256.New()
	parts := [][]byte{
		[]byte("tool_call/v1"), []byte(instanceID), []byte(in.Tool), args,
		[]byte(in.Timeout), []byte(in.AgentReasoning), ctx,
	}
	// The adapter's claims count only when given, so that the
	// fingerprints of calls without them stay what they were.
	if in.Preview != nil || in.Reversibility != "" {
		var pt, pc string
		if in.Preview != nil {
			pt, pc = in.Preview.Type, in.Preview.Content
		}
		parts = append(parts, []byte("claims/v1"), []byte(pt), []byte(pc), []byte(in.Reversibility))
	}
	for _, part := range parts {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// InstanceInput is the body of POST /v1/instances.
type InstanceInput struct {
	Name     string          `json:"name"`
	Metadata json.RawMessage `json:"metadata"`
	// TokenAudience, optional, is the aud of the instance's approval
	// tokens: the tool server's name for itself.
	TokenAudience string `json:"token_audience"`
}

// Validate checks an instance registration.
func (in *InstanceInput) Validate() error {
	if err := CheckText("name", in.Name, 1, MaxInstanceNameLen); err != nil {
		return err
	}
	if err := CheckText("token_audience", in.TokenAudience, 0, MaxTokenAudienceLen); err != nil {
		return err
	}
	if isNull(in.Metadata) {
		in.Metadata = nil
		return nil
	}
	if !isObject(in.Metadata) {
		return Invalid("metadata", "metadata must be a JSON object")
	}
	if len(in.Metadata) > MaxMetadataBytes {
		return Invalid("metadata", "metadata must be at most %d bytes", MaxMetadataBytes)
	}
	return CheckJSON("metadata", in.Metadata)
}

// DecisionInput is the body of POST /v1/approval-requests/{id}/decision.
type DecisionInput struct {
	Status   State  `json:"status"`
	Note     string `json:"note"`
	Answer   string `json:"answer"`
	ValidFor string `json:"valid_for"`
	// Passkey is the assertion a passkey-signed decision carries
	// (docs/phone.md, "Passkeys"). Only the inbox sets it: no API body
	// does, so a decision that needs one is refused on every other surface.
	Passkey *PasskeyAssertion `json:"-"`
	// Grant, with an approval, also makes a grant from the request
	// approved (docs/policy.md, "Grants").
	Grant *DecisionGrant `json:"grant,omitempty"`
	// Arguments, with an approval of a tool call, are the arguments the
	// reviewer approves instead of the request's: the request ends denied
	// and a new one with these arguments is approved in its place
	// (docs/protocol.md, "Edits"). Absent for every other decision.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Review is the reviewer's client's claim of what it showed them:
	// recorded with the decision as such, never checked.
	Review *ReviewClaim `json:"review,omitempty"`
}

// Edits reports whether the decision approves changed arguments.
func (in *DecisionInput) Edits() bool { return in.Arguments != nil }

// DecisionGrant is the grant a reviewer makes with an approval: for the
// approved request's tool, on its instance (or, with scope "agent", for
// its agent), matching its arguments (or a CEL expression).
type DecisionGrant struct {
	Match     string `json:"match,omitempty"` // "same_arguments" (default) or a CEL expression
	Scope     string `json:"scope,omitempty"` // "instance" (default) or "agent"
	Uses      *int   `json:"uses,omitempty"`
	ExpiresIn string `json:"expires_in"`
}

// Validate checks a decision on its own; CheckAnswer checks it against the
// request's question.
func (in *DecisionInput) Validate() error {
	if in.Status != StateApproved && in.Status != StateDenied {
		return Invalid("status", "status must be approved or denied")
	}
	if err := CheckText("note", in.Note, 0, MaxNoteLen); err != nil {
		return err
	}
	if err := CheckText("answer", in.Answer, 0, MaxAnswerLen); err != nil {
		return err
	}
	if err := CheckText("valid_for", in.ValidFor, 0, MaxTimeoutLen); err != nil {
		return err
	}
	if in.Status == StateDenied && in.Grant != nil {
		return Invalid("grant", "a grant is made only with an approval")
	}
	if g := in.Grant; g != nil && g.Scope != "" && g.Scope != "instance" && g.Scope != "agent" {
		return Invalid("grant", "a grant's scope is \"instance\" or \"agent\"")
	}
	if in.Status == StateDenied && in.ValidFor != "" {
		return Invalid("valid_for", "valid_for applies only to approvals")
	}
	if err := in.Review.Check(); err != nil {
		return err
	}
	if in.Edits() {
		switch {
		case in.Status != StateApproved:
			return Invalid("arguments", "arguments are edited only with an approval; a denial changes nothing")
		case in.Grant != nil:
			return Invalid("grant", "a grant is made only from a request approved unchanged")
		case in.Answer != "":
			return Invalid("answer", "a question is answered, never approved with changed arguments")
		}
		if err := CheckEditedArguments(in.Arguments); err != nil {
			return err
		}
	}
	if in.Status == StateDenied && in.Answer != "" {
		return Invalid("answer", "answer applies only to approvals; a denial declines the question (say why in note)")
	}
	return nil
}

// CheckAnswer checks the decision's answer against r's question: an answer
// needs a question, must be one of its choices when it has them, and an
// approval of a question needs an answer.
func (in *DecisionInput) CheckAnswer(r Request) error {
	if in.Status != StateApproved {
		return nil
	}
	if in.Answer == "" {
		if r.Question != nil {
			// The agent asked; an approval without an answer tells it nothing.
			return Invalid("answer", "this request asks a question: approve with an answer, or deny to decline")
		}
		return nil
	}
	if r.Question == nil {
		return Invalid("answer", "answer is only for requests that ask a question; this one does not")
	}
	if len(r.Question.Choices) > 0 && !slices.Contains(r.Question.Choices, in.Answer) {
		return Invalid("answer", "answer must be one of the choices: %s", strings.Join(r.Question.Choices, " | "))
	}
	return nil
}

// ReportInput is the body of PUT /v1/approval-requests/{id}/execution.
type ReportInput struct {
	Status ExecutionStatus `json:"status"`
	Detail string          `json:"detail"`
}

// Validate checks an execution report.
func (in *ReportInput) Validate() error {
	if !in.Status.Valid() {
		return Invalid("status", "status must be succeeded, failed or unknown")
	}
	return CheckText("detail", in.Detail, 0, MaxDetailLen)
}

// ParseObject checks that data is one strict JSON object and returns its
// top-level members with their raw values.
//
// Go's encoding/json matches keys case-insensitively, keeps the last of
// duplicate keys and replaces invalid UTF-8 silently. A reviewer must see
// exactly what will run, so anywhere in the document this rejects duplicate
// keys, keys that differ only in case, invalid UTF-8, unpaired surrogate
// escapes, NUL (raw or escaped), nesting deeper than strictjson.MaxDepth and
// numbers a 64-bit float cannot hold (internal/strictjson). A refusal is
// invalid_request, its field the path that holds the fault.
func ParseObject(data []byte) ([]strictjson.Member, error) {
	members, err := strictjson.ParseObject(data)
	return members, jsonError(err)
}

// CheckJSON checks that data is one strict JSON value of any type, under the
// rules of ParseObject; path names it in errors.
func CheckJSON(path string, data []byte) error {
	return jsonError(strictjson.Check(path, data))
}

// Canonical returns a canonical encoding of a strict JSON value: object keys
// sorted, no insignificant space, numbers as written. Two documents with the
// same meaning have the same canonical bytes, which makes them safe to hash.
// It refuses what CheckJSON refuses: encoding/json, given duplicate keys,
// keeps the last one and it ignores data after the first value, so two
// different documents would hash alike.
func Canonical(data []byte) ([]byte, error) {
	c, err := strictjson.Canonical(data)
	return c, jsonError(err)
}

// EncodeJSON encodes v as compact JSON without HTML escaping: <, > and &
// stay as they are, so text goes out as its author wrote it.
func EncodeJSON(v any) ([]byte, error) { return strictjson.Encode(v) }

// jsonError is where the strict parser's refusals become the domain's:
// invalid_request, its field the path of the fault, its message the
// parser's (the path, then the reason). Other errors pass as they are.
func jsonError(err error) error {
	var e *strictjson.Error
	if errors.As(err, &e) {
		return Invalid(e.Path, "%s", e.Error())
	}
	return err
}

// Clip shortens a text for an error message: a body may hold keys or
// values of a megabyte, and echoing them back helps nobody.
func Clip(s string) string { return strictjson.Clip(s) }

// MaxBatchIDs bounds the ids of one batch decision.
const MaxBatchIDs = 100

// BatchDecisionInput is the body of POST /v1/approval-requests/decisions
// (docs/protocol.md, "Batch decisions"): one status, note and validity for
// every id, each decided as its own decision would be. A batch never edits
// arguments, answers a question or makes a grant: those are decided one by
// one.
type BatchDecisionInput struct {
	IDs      []string `json:"ids"`
	Status   State    `json:"status"`
	Note     string   `json:"note"`
	ValidFor string   `json:"valid_for"`
	// Arguments is here only to be refused by name: an edit is made one
	// request at a time, on its own page.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Validate checks a batch on its own: 1 to MaxBatchIDs ids, none twice, and
// a decision each id could take alone.
func (in *BatchDecisionInput) Validate() error {
	if in.Arguments != nil {
		return Invalid("arguments", "a batch never edits arguments: approve a call with changed arguments on its own")
	}
	switch {
	case len(in.IDs) == 0:
		return Invalid("ids", "ids must name at least one request")
	case len(in.IDs) > MaxBatchIDs:
		return Invalid("ids", "a batch decides at most %d requests, not %d", MaxBatchIDs, len(in.IDs))
	}
	seen := make(map[string]bool, len(in.IDs))
	for _, id := range in.IDs {
		if err := CheckText("ids", id, 1, 64); err != nil {
			return err
		}
		if seen[id] {
			return Invalid("ids", "request %s is named twice: a batch decides each request once", Clip(id))
		}
		seen[id] = true
	}
	one := in.Decision()
	return one.Validate()
}

// Decision is the decision the batch makes of each of its ids.
func (in *BatchDecisionInput) Decision() DecisionInput {
	return DecisionInput{Status: in.Status, Note: in.Note, ValidFor: in.ValidFor}
}
