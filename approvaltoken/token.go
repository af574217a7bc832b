// Package approvaltoken signs and verifies approval tokens: the proof a
// tool server can check that a person (or a rule they wrote) approved
// exactly this call, for this tool, until a deadline (docs/tokens.md).
//
// A token is a compact JWS (RFC 7515) signed with Ed25519 (RFC 8037). Its
// claims bind the tool name and a digest of the arguments: SHA-256 over
// their RFC 8785 canonical form, so arguments that are equal as JSON values
// (keys reordered, 1.0 for 1, escaped or plain Unicode) have one digest.
//
// The package knows no storage and no network: the server hands it a key,
// a verifier hands it a key set.
package approvaltoken

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Type is the JWS "typ" header of every approval token. Verifiers refuse
// other types, so a JWT minted for something else never passes as one.
const Type = "airlock-approval+jwt"

// digestPrefix names the hash in ArgsDigest, so a later hash can be told apart.
const digestPrefix = "sha256:"

// Decision sources: who approved the call.
const (
	SourceHuman  = "human"  // a person decided (alone or as a quorum)
	SourcePolicy = "policy" // a policy rule approved it at creation
	SourceGrant  = "grant"  // a standing grant covered it
)

// Claims are what a token asserts. Times are Unix seconds (RFC 7519's
// NumericDate).
type Claims struct {
	Issuer         string    `json:"iss"`
	Subject        string    `json:"sub"` // the approval request's id
	ID             string    `json:"jti"` // unique per execution claim
	Audience       string    `json:"aud,omitempty"`
	IssuedAt       int64     `json:"iat"`
	Expiry         int64     `json:"exp"`
	Tool           string    `json:"tool"`
	ArgsDigest     string    `json:"args_digest"`
	InstanceID     string    `json:"instance_id"`
	DecidedBy      []Decider `json:"decided_by"`
	DecisionSource string    `json:"decision_source"`
}

// Decider is one principal whose approval the token carries: the one
// reviewer, every approving vote of a quorum, or the rule or grant.
type Decider struct {
	Principal string `json:"principal"`
	Name      string `json:"name,omitempty"`
}

// ArgsDigest returns "sha256:" and the unpadded base64url SHA-256 of the
// RFC 8785 canonical form of args, a JSON value. Invalid JSON is an error.
func ArgsDigest(args []byte) (string, error) {
	canonical, err := Canonical(args)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canonical)
	out := make([]byte, 0, len(digestPrefix)+base64.RawURLEncoding.EncodedLen(len(sum)))
	return string(base64.RawURLEncoding.AppendEncode(append(out, digestPrefix...), sum[:])), nil
}

// Canonical returns the RFC 8785 (JCS) canonical form of the JSON value
// in data.
func Canonical(data []byte) ([]byte, error) {
	if !json.Valid(data) {
		return nil, errors.New("arguments are not valid JSON")
	}
	if out, ok := canonicalPlain(data); ok {
		return out, nil
	}
	out, err := jcs.Transform(data)
	if err != nil {
		return nil, fmt.Errorf("arguments have no canonical form (RFC 8785): %w", err)
	}
	return out, nil
}
