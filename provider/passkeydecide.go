package provider

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/approvaltoken"
	"github.com/airlockhq/airlock/passkey"
	"github.com/airlockhq/airlock/store"
)

// Passkey-signed decisions (docs/phone.md, "Passkeys"): with
// --require-passkey-for, a decision of a request it names needs an
// assertion of the deciding reviewer's passkey over the decision's
// challenge (package passkey). Only the inbox can make one; every other
// surface is refused, saying to decide in the inbox.

// AllRequests is the --require-passkey-for of "all": every request.
var AllRequests airlock.GrantExpression = allRequests{}

type allRequests struct{}

func (allRequests) Matches(context.Context, airlock.PolicyInput) (bool, error) { return true, nil }

// PasskeyRequired reports whether a decision of r must be signed with a
// passkey.
func (s *Service) PasskeyRequired(ctx context.Context, r airlock.Request) (bool, error) {
	if s.requirePasskey == nil {
		return false, nil
	}
	st := s.system
	return s.requirePasskey.Matches(ctx, airlock.PolicyInput{Request: r, Window: r.DeadlineAt.Sub(r.CreatedAt),
		Instance: func(ctx context.Context) (airlock.Instance, error) { return st.GetInstance(ctx, r.InstanceID) }})
}

// DecisionChallenge is the challenge a passkey signs for decision in of
// request r.
func DecisionChallenge(r airlock.Request, in airlock.DecisionInput) ([]byte, error) {
	return passkey.Challenge(passkey.Decision{RequestID: r.ID, Arguments: decisionArgs(r), Status: in.Status, ValidFor: in.ValidFor, Note: in.Note})
}

// decisionArgs are the arguments a passkey signs the digest of: a
// request without arguments signs the digest of null.
func decisionArgs(r airlock.Request) json.RawMessage {
	if len(r.Arguments) == 0 {
		return json.RawMessage("null")
	}
	return r.Arguments
}

// PasskeyRPID is the passkeys' relying party ID.
func (s *Service) PasskeyRPID() string { return s.passkeyRPID }

// signedDecision checks, when --require-passkey-for names the request,
// that in carries an assertion of c's own passkey over the decision's
// challenge, records the passkey's use (its counter must advance), and
// puts the assertion in p for the store to keep with the decision.
func (s *Service) signedDecision(ctx context.Context, st store.Store, c airlock.Caller, p *store.DecideParams, in airlock.DecisionInput) error {
	if s.requirePasskey == nil {
		return nil
	}
	r, err := st.GetRequest(ctx, p.ID)
	if err != nil {
		// The decision's own write answers for an unknown request.
		return nil
	}
	need, err := s.PasskeyRequired(ctx, r)
	if err != nil {
		// A condition that cannot be judged asks for the passkey.
		s.log.Warn("provider: judging --require-passkey-for", "request", r.ID, "err", err)
		need = true
	}
	if !need {
		return nil
	}
	if in.Passkey == nil {
		page := "/requests/" + r.ID
		if strings.HasPrefix(s.issuer, "http://") || strings.HasPrefix(s.issuer, "https://") {
			page = strings.TrimSuffix(s.issuer, "/") + page
		}
		return forbidden("this request needs a decision signed with your passkey (--require-passkey-for): open the inbox to decide it, at %s", page)
	}
	a := *in.Passkey
	if err := a.Validate(); err != nil {
		return err
	}
	pk, err := s.system.Passkey(ctx, a.CredentialID)
	if airlock.ErrorCode(err) == airlock.CodeNotFound || err == nil && pk.Principal != principalOf(c.Token) {
		return forbidden("the decision was signed with a passkey that is not yours")
	}
	if err != nil {
		return err
	}
	challenge, err := DecisionChallenge(r, in)
	if err != nil {
		return err
	}
	if err := passkey.Verify(pk.PublicKey, a, challenge, s.passkeyRPID); err != nil {
		return forbidden("the passkey's signature of this decision does not verify: %v", err)
	}
	if _, err := s.system.UsePasskey(ctx, a.CredentialID, binary.BigEndian.Uint32(a.AuthenticatorData[33:37])); err != nil {
		return err
	}
	digest, err := approvaltoken.ArgsDigest(decisionArgs(r))
	if err != nil {
		return err
	}
	p.Passkey, p.ValidFor = &a, in.ValidFor
	p.PasskeyPublicKey, p.PasskeyArgsDigest, p.PasskeyRPID = pk.PublicKey, digest, s.passkeyRPID
	return nil
}

// PasskeySignature is a decision or a quorum vote signed with a passkey,
// as a request's history shows it.
type PasskeySignature struct {
	Principal    string
	Actor        string
	CredentialID []byte
	// Name is the passkey's name; "" when it was deleted since.
	Name string
}

// PasskeySignatures lists the decisions and votes of r that were signed
// with a passkey, for a caller who has read r. A pending request without
// votes has none, and costs no read.
func (s *Service) PasskeySignatures(ctx context.Context, r airlock.Request) ([]PasskeySignature, error) {
	if r.Decision == nil && len(r.Votes) == 0 {
		return nil, nil
	}
	ds, err := s.system.PasskeyDecisions(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	out := make([]PasskeySignature, 0, len(ds))
	for _, d := range ds {
		sig := PasskeySignature{Principal: d.Principal, Actor: d.Actor, CredentialID: d.Assertion.CredentialID}
		pk, err := s.system.Passkey(ctx, d.Assertion.CredentialID)
		switch {
		case err == nil:
			sig.Name = pk.Name
		case airlock.ErrorCode(err) != airlock.CodeNotFound:
			return nil, err
		}
		out = append(out, sig)
	}
	return out, nil
}
