package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/provider"
	"github.com/google/jsonschema-go/jsonschema"
)

// Tool arguments are read as strictly as REST bodies (T10):
// the domain's strict parser refuses duplicate or case-variant keys,
// invalid UTF-8, NUL and deep nesting anywhere; unknown fields are refused
// by name at every level; then the domain validates the values, with
// messages that name the field and the rule. Last, the arguments are
// checked against the tool's published input schema, so nothing the schema
// forbids gets through even if a rule above were missing.

// objectArgs returns the arguments as a JSON object's bytes: absent
// arguments are an empty object.
func objectArgs(args []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return []byte("{}"), nil
	}
	if trimmed[0] != '{' {
		return nil, airlock.Invalid("arguments", "arguments must be a JSON object")
	}
	return trimmed, nil
}

// argError rewords the domain decoder's body-level messages for tool
// arguments.
func argError(err error) error {
	var e *airlock.Error
	if errors.As(err, &e) && e.Code == airlock.CodeInvalidRequest {
		msg := strings.Replace(e.Message, "body must be", "arguments must be", 1)
		msg = strings.Replace(msg, "allowed fields are", "allowed arguments are", 1)
		return &airlock.Error{Code: e.Code, Field: e.Field, Message: msg}
	}
	return err
}

// checkSchema validates arguments against the tool's input schema.
func checkSchema(data []byte, schema *jsonschema.Resolved) error {
	if schema == nil {
		return nil
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		return airlock.Invalid("arguments", "arguments must be a JSON object")
	}
	if err := schema.Validate(v); err != nil {
		return airlock.Invalid("arguments", "arguments do not match the tool's input schema: %v", err)
	}
	return nil
}

// parseApprovalRequest reads approval_request's arguments.
func parseApprovalRequest(args []byte, schema *jsonschema.Resolved) (provider.MCPRequestInput, error) {
	var in provider.MCPRequestInput
	data, err := objectArgs(args)
	if err != nil {
		return in, err
	}
	members, err := airlock.ParseObject(data)
	if err != nil {
		return in, argError(err)
	}
	// encoding/json matches nested keys case-insensitively and ignores
	// unknown ones; name them instead, as the schema's
	// additionalProperties: false does.
	for _, m := range members {
		var err error
		switch m.Key {
		case "proposal":
			err = checkProposalKeys(m.Value)
		case "question":
			err = checkMembers("question", m.Value, "choices")
		case "expiresInMinutes":
			err = checkInteger("expiresInMinutes", m.Value)
		}
		if err != nil {
			return in, err
		}
	}
	if err := airlock.DecodeObject(data, &in); err != nil {
		return in, argError(err)
	}
	if err := in.Validate(); err != nil {
		return in, err
	}
	return in, checkSchema(data, schema)
}

// checkProposalKeys names unknown keys in proposal and proposal.command
// (proposal.command.input is checked by the domain's ParseWorkMove).
func checkProposalKeys(raw json.RawMessage) error {
	if err := checkMembers("proposal", raw, "mode", "command"); err != nil {
		return err
	}
	members, err := airlock.ParseObject(raw)
	if err != nil {
		return nil // not an object: the decoder names it
	}
	for _, m := range members {
		if m.Key == "command" {
			return checkMembers("proposal.command", m.Value, "method", "input")
		}
	}
	return nil
}

// checkMembers refuses keys of the object at field other than allowed. A
// value that is not an object is left to the decoder, which names its type.
func checkMembers(field string, raw json.RawMessage, allowed ...string) error {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.TrimSpace(raw)[0] != '{' {
		return nil
	}
	members, err := airlock.ParseObject(raw)
	if err != nil {
		return nil // already checked strictly as part of the whole
	}
	for _, m := range members {
		if !slices.Contains(allowed, m.Key) {
			return airlock.Invalid(field+"."+m.Key, "%s: unknown field %q; allowed fields are %s", field, clip(m.Key), strings.Join(allowed, ", "))
		}
	}
	return nil
}

// checkInteger refuses a number with a fraction or exponent where the
// schema says integer; null and other types are left to the decoder.
func checkInteger(field string, raw json.RawMessage) error {
	v := bytes.TrimSpace(raw)
	if len(v) == 0 || !(v[0] == '-' || ('0' <= v[0] && v[0] <= '9')) {
		if string(v) == "null" {
			return airlock.Invalid(field, "%s must be an integer; omit it rather than send null", field)
		}
		return nil
	}
	if bytes.ContainsAny(v, ".eE") {
		return airlock.Invalid(field, "%s must be a whole number (got %s)", field, clip(string(v)))
	}
	return nil
}

// clip shortens a caller's string for an error message.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
