package airlock

import (
	"encoding/base64"
	"time"
	"unicode/utf8"
)

// Passkeys (docs/phone.md, "Passkeys"): a reviewer principal registers
// WebAuthn credentials from the inbox, signs in with them, and signs the
// decisions --require-passkey-for names with one.

// Passkey is one WebAuthn credential of a reviewer principal.
type Passkey struct {
	// ID is the credential ID the authenticator chose (at most 1023
	// bytes, WebAuthn's limit).
	ID        []byte
	Principal string
	// TokenID is the token the reviewer was signed in with when they
	// registered it: a sign-in with the passkey is a session of that
	// token, which must still be live. "" for an OIDC reviewer, whose
	// sign-in with it is a session of their reviewer profile.
	TokenID string
	// Name is what the reviewer calls it ("work laptop"); at most
	// MaxPasskeyName characters.
	Name string
	// PublicKey is the credential's public key as a COSE_Key.
	PublicKey []byte
	// SignCount is the authenticator's signature counter at the last use
	// (0 for authenticators that keep none, such as synced passkeys).
	SignCount uint32
	// Transports are the transports the browser reported ("internal",
	// "hybrid", "usb", …), as hints for later ceremonies.
	Transports []string
	// AAGUID names the authenticator's model (16 bytes, or none).
	AAGUID []byte
	// BackupEligible and BackupState are the flags of the registration:
	// a credential may be synced (eligible) and is (state).
	BackupEligible bool
	BackupState    bool
	CreatedAt      time.Time
	LastUsedAt     *time.Time
}

// Limits of a passkey.
const (
	MaxPasskeyID        = 1023
	MaxPasskeyName      = 64
	MaxPasskeyPublicKey = 2048
	// MaxPasskeysPerPrincipal bounds how many passkeys one principal
	// registers.
	MaxPasskeysPerPrincipal = 20
)

// Events of passkeys: their Subject is the credential ID (PasskeyIDString),
// their Actor who registered or deleted it.
const (
	EventPasskeyRegistered EventType = "passkey.registered"
	EventPasskeyDeleted    EventType = "passkey.deleted"
)

// PasskeyIDString is how a credential ID is written in URLs, events and
// JSON: unpadded base64url, as WebAuthn's own JSON writes it.
func PasskeyIDString(id []byte) string { return base64.RawURLEncoding.EncodeToString(id) }

// ParsePasskeyID reads PasskeyIDString.
func ParsePasskeyID(s string) ([]byte, error) {
	id, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(id) == 0 || len(id) > MaxPasskeyID {
		return nil, Invalid("credential_id", "a credential ID is 1 to %d bytes in unpadded base64url", MaxPasskeyID)
	}
	return id, nil
}

// Validate checks what a store needs of p before it writes it.
func (p Passkey) Validate() error {
	switch {
	case len(p.ID) == 0 || len(p.ID) > MaxPasskeyID:
		return Invalid("credential_id", "a credential ID is 1 to %d bytes", MaxPasskeyID)
	case p.Principal == "":
		return Invalid("principal", "a passkey belongs to a principal")
	case len(p.PublicKey) == 0 || len(p.PublicKey) > MaxPasskeyPublicKey:
		return Invalid("public_key", "a passkey's public key is 1 to %d bytes", MaxPasskeyPublicKey)
	case !utf8.ValidString(p.Name) || utf8.RuneCountInString(p.Name) > MaxPasskeyName:
		return Invalid("name", "a passkey's name is at most %d characters of UTF-8", MaxPasskeyName)
	case len(p.AAGUID) != 0 && len(p.AAGUID) != 16:
		return Invalid("aaguid", "an AAGUID is 16 bytes")
	}
	for _, tr := range p.Transports {
		if tr == "" || len(tr) > 32 || !printableASCII(tr) {
			return Invalid("transports", "a transport is a short ASCII word")
		}
	}
	return nil
}

func printableASCII(s string) bool {
	for i := range len(s) {
		if s[i] <= ' ' || s[i] > '~' || s[i] == ',' {
			return false
		}
	}
	return true
}

// Kinds of passkey ceremony.
const (
	CeremonyRegister = "register"
	CeremonySignIn   = "sign_in"
)

// PasskeyCeremony is a WebAuthn ceremony in progress: kept server-side by
// the hash of its challenge, so any replica may finish it, and taken once.
type PasskeyCeremony struct {
	ChallengeHash []byte
	Kind          string // CeremonyRegister or CeremonySignIn
	// Principal is who registers; "" for a sign-in, whose user the
	// credential names.
	Principal string
	// State is the WebAuthn library's ceremony state (JSON).
	State     []byte
	ExpiresAt time.Time
}

// Validate checks what a store needs of c, to keep it for ttl.
func (c PasskeyCeremony) Validate(ttl time.Duration) error {
	switch {
	case len(c.ChallengeHash) == 0 || len(c.State) == 0 || ttl < time.Microsecond:
		return Invalid("ceremony", "a passkey ceremony needs a challenge hash, its state and a lifetime")
	case c.Kind != CeremonyRegister && c.Kind != CeremonySignIn:
		return Invalid("ceremony", "a passkey ceremony is a registration or a sign-in, not %q", c.Kind)
	case c.Kind == CeremonyRegister && c.Principal == "":
		return Invalid("ceremony", "a registration names its principal")
	}
	return nil
}

// PasskeyAssertion is a WebAuthn assertion as a passkey-signed decision
// keeps it: the authenticator's bytes, as signed (package passkey
// verifies them).
type PasskeyAssertion struct {
	CredentialID      []byte `json:"credential_id"`
	AuthenticatorData []byte `json:"authenticator_data"`
	ClientDataJSON    []byte `json:"client_data_json"`
	Signature         []byte `json:"signature"`
}

// Validate checks the sizes a store keeps.
func (a PasskeyAssertion) Validate() error {
	switch {
	case len(a.CredentialID) == 0 || len(a.CredentialID) > MaxPasskeyID:
		return Invalid("passkey", "an assertion names a credential of 1 to %d bytes", MaxPasskeyID)
	case len(a.AuthenticatorData) < 37 || len(a.AuthenticatorData) > 4096:
		return Invalid("passkey", "an assertion's authenticator data is 37 to 4096 bytes")
	case len(a.ClientDataJSON) == 0 || len(a.ClientDataJSON) > 4096:
		return Invalid("passkey", "an assertion's client data is 1 to 4096 bytes")
	case len(a.Signature) == 0 || len(a.Signature) > 1024:
		return Invalid("passkey", "an assertion's signature is 1 to 1024 bytes")
	}
	return nil
}

// PasskeyDecision is a decision (or a quorum vote) signed with a passkey,
// as kept beside the request: what was signed besides the request's own
// ID and arguments (status, valid_for as submitted, note), and the
// assertion over it.
type PasskeyDecision struct {
	RequestID string
	Principal string
	Actor     string
	Status    State
	ValidFor  string
	Note      string
	// ArgsDigest is the request's arguments digest the assertion signed
	// (approvaltoken.ArgsDigest); "" for a decision kept before it was
	// (then the audit log's leaf supplies it, and the signature says
	// whether that is what was signed).
	ArgsDigest string
	Assertion  PasskeyAssertion
	// PublicKey is the credential's COSE public key the assertion was
	// checked with; nil for a decision kept before keys were kept with
	// it whose passkey was deleted since.
	PublicKey []byte
	// RPID is the relying party ID the assertion was made for; "" for a
	// decision kept before it was.
	RPID string
	At   time.Time
}
