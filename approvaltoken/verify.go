package approvaltoken

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Why a token is refused. Verify's errors wrap exactly one of these, so a
// caller can tell a stale token from a forged one.
var (
	ErrMalformed  = errors.New("not a compact JWS approval token")
	ErrAlgorithm  = errors.New("algorithm is not EdDSA")
	ErrType       = errors.New("not an approval token")
	ErrUnknownKey = errors.New("signed by a key not in the key set")
	ErrSignature  = errors.New("signature does not verify")
	ErrExpired    = errors.New("expired")
	ErrNotYet     = errors.New("issued in the future")
	ErrAudience   = errors.New("audience does not match")
	ErrTool       = errors.New("tool does not match")
	ErrArgs       = errors.New("arguments do not match the approved ones")
	ErrReplayed   = errors.New("already used")
)

// reasons name each refusal in a word that stays the same in every
// language's verifier and in the server's answers.
var reasons = []struct {
	err  error
	code string
}{
	{ErrMalformed, "malformed"},
	{ErrAlgorithm, "algorithm"},
	{ErrType, "type"},
	{ErrUnknownKey, "unknown_key"},
	{ErrSignature, "signature"},
	{ErrExpired, "expired"},
	{ErrNotYet, "not_yet_valid"},
	{ErrAudience, "audience"},
	{ErrTool, "tool"},
	{ErrArgs, "arguments"},
	{ErrReplayed, "replayed"},
}

// Reason returns the stable code of the refusal err wraps ("signature",
// "expired", …), "" for nil, and "other" for an error that is none of
// Verify's.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.code
		}
	}
	return "other"
}

// DefaultLeeway is how far clocks may disagree when exp and iat are
// checked.
const DefaultLeeway = 30 * time.Second

// MaxTokenBytes bounds what Verify reads; a real token is well under 4 KiB
// even with a quorum of deciders.
const MaxTokenBytes = 64 << 10

// KeySet holds the public keys tokens may be signed with, by id.
type KeySet struct {
	keys map[string]ed25519.PublicKey
}

// ParseKeySet reads a JWK Set (RFC 7517) such as GET /.well-known/jwks.json
// returns. Keys that are not Ed25519 are skipped; a set with none is an
// error.
func ParseKeySet(data []byte) (*KeySet, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("key set: not a JWK Set: %w", err)
	}
	ks := &KeySet{keys: make(map[string]ed25519.PublicKey)}
	for _, k := range set.Keys {
		pub, ok := k.Key.(ed25519.PublicKey)
		if !ok || k.KeyID == "" {
			continue
		}
		ks.keys[k.KeyID] = pub
	}
	if len(ks.keys) == 0 {
		return nil, errors.New("key set: no Ed25519 key with a kid")
	}
	return ks, nil
}

// NewKeySet builds a key set from public JWKs, as the server publishes
// them.
func NewKeySet(keys ...jose.JSONWebKey) *KeySet {
	ks := &KeySet{keys: make(map[string]ed25519.PublicKey, len(keys))}
	for _, k := range keys {
		if pub, ok := k.Key.(ed25519.PublicKey); ok {
			ks.keys[k.KeyID] = pub
		}
	}
	return ks
}

// Has reports whether the set holds the key id, so a caller can refresh a
// cached set when a token names a key it has not seen.
func (ks *KeySet) Has(kid string) bool {
	_, ok := ks.keys[kid]
	return ok
}

// Expect is what the tool server knows and holds the token to: the call
// it is about to run.
type Expect struct {
	Tool string
	Args []byte // the arguments as received, any JSON spelling
	// Audience, when set, must equal the token's aud. A token that names
	// an audience is refused when Audience is empty: it was meant for
	// someone else.
	Audience string
	Now      time.Time     // zero means time.Now()
	Leeway   time.Duration // zero means DefaultLeeway
}

// header is the protected header Verify accepts: these three members and
// no other, so nothing (crit, b64, jku) can change what is verified.
type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

// KeyIDOf returns the kid a token names, unverified: for choosing or
// refreshing a key set, never for trusting.
func KeyIDOf(token string) (string, error) {
	h, err := readHeader(token)
	if err != nil {
		return "", err
	}
	return h.Kid, nil
}

// Verify checks token against the key set and the call, and returns its
// claims. It refuses any algorithm but EdDSA, any type but Type, a key not
// in ks, a bad signature, an expired token, a wrong audience or tool, and
// arguments whose canonical form differs from the approved ones.
func (ks *KeySet) Verify(token string, want Expect) (Claims, error) {
	c, err := ks.verify(token, want)
	if err != nil {
		return c, err
	}
	return c, want.checkCall(c)
}

// VerifyAnyCall is Verify without the call: it checks the signature, the
// key, the type, exp and aud, and ignores want.Tool and want.Args. It is
// for a holder that does not know the call, such as the server consuming
// a token for a tool server that checked the call itself; a tool server
// about to run a call uses Verify.
func (ks *KeySet) VerifyAnyCall(token string, want Expect) (Claims, error) {
	return ks.verify(token, want)
}

// verify checks all but the call.
func (ks *KeySet) verify(token string, want Expect) (Claims, error) {
	h, plain, err := readHeaderPlain(token)
	if err != nil {
		return Claims{}, err
	}
	pub, ok := ks.keys[h.Kid]
	if !ok {
		return Claims{}, fmt.Errorf("%w (kid %q)", ErrUnknownKey, h.Kid)
	}
	payload, signed, canonical := verifyCanonical(plain, pub, token)
	switch {
	case canonical && !signed:
		return Claims{}, ErrSignature
	case !canonical:
		jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.EdDSA})
		if err != nil {
			return Claims{}, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if payload, err = jws.Verify(pub); err != nil {
			return Claims{}, ErrSignature
		}
	}
	c, plain := plainClaims(payload)
	if !plain {
		if err := json.Unmarshal(payload, &c); err != nil {
			return Claims{}, fmt.Errorf("%w: claims: %v", ErrMalformed, err)
		}
	}
	return c, want.checkToken(c)
}

// readHeader decodes and checks the protected header before any key is
// used.
func readHeader(token string) (header, error) {
	h, _, err := readHeaderPlain(token)
	return h, err
}

// readHeaderPlain is readHeader, and says whether the header is written
// as Airlock's signers write it (plainHeader).
func readHeaderPlain(token string) (_ header, plain bool, _ error) {
	if len(token) > MaxTokenBytes {
		return header{}, false, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxTokenBytes)
	}
	first, _, ok := strings.Cut(token, ".")
	if !ok || strings.Count(token, ".") != 2 {
		return header{}, false, fmt.Errorf("%w: want three dot-separated parts", ErrMalformed)
	}
	raw, err := base64.RawURLEncoding.DecodeString(first)
	if err != nil {
		return header{}, false, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	if kid, ok := plainHeader(raw); ok {
		return header{Alg: string(jose.EdDSA), Kid: kid, Typ: Type}, true, nil
	}
	h, err := decodeHeader(raw)
	return h, false, err
}

// decodeHeader reads a protected header in any JSON spelling, and checks
// it.
func decodeHeader(raw []byte) (header, error) {
	var h header
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return header{}, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	switch {
	case h.Alg != string(jose.EdDSA):
		return header{}, fmt.Errorf("%w (alg %q)", ErrAlgorithm, h.Alg)
	case h.Typ != Type:
		return header{}, fmt.Errorf("%w (typ %q)", ErrType, h.Typ)
	}
	return h, nil
}

// The protected header every Airlock signer writes (protectedHeader):
// go-jose's JSON, its members sorted, the kid between prefix and suffix.
const (
	plainHeaderPrefix = `{"alg":"EdDSA","kid":"`
	plainHeaderSuffix = `","typ":"` + Type + `"}`
)

// verifyCanonical checks the signature of a token as Airlock's signers
// write it (a plain header, every part in canonical base64url) with
// crypto/ed25519, over the first two parts as they stand, and returns its
// payload. That is what go-jose checks: it verifies over the parts decoded
// and encoded again, the same bytes when they are canonical. It skips
// go-jose's parse of the header (read already) and its copies, about a
// third of a verification beside the signature check. canonical is false
// for any other token, which go-jose then checks as before.
func verifyCanonical(plainHeader bool, pub ed25519.PublicKey, token string) (payload []byte, signed, canonical bool) {
	if !plainHeader {
		return nil, false, false
	}
	protected, rest, _ := strings.Cut(token, ".")
	claims, sig, _ := strings.Cut(rest, ".")
	if _, ok := canonicalPart(protected); !ok {
		return nil, false, false
	}
	payload, ok := canonicalPart(claims)
	if !ok || len(payload) == 0 {
		return nil, false, false
	}
	signature, ok := canonicalPart(sig)
	if !ok {
		return nil, false, false
	}
	return payload, ed25519.Verify(pub, []byte(token[:len(protected)+1+len(claims)]), signature), true
}

// strictBase64 refuses what RawURLEncoding reads loosely: bits set past
// the last byte.
var strictBase64 = base64.RawURLEncoding.Strict()

// canonicalPart decodes a part of a compact JWS that is in canonical
// base64url: the one encoding of its bytes, so that encoding them again
// gives the part back (no bits past the last byte, no line breaks, which
// the decoder skips).
func canonicalPart(part string) ([]byte, bool) {
	b, err := strictBase64.DecodeString(part)
	return b, err == nil && strictBase64.EncodedLen(len(b)) == len(part)
}

// plainHeader reads the header Airlock's signers write without a JSON
// decoder: the prefix, a kid of base64url characters only (nothing to
// unescape, no quote to end the string early) and the suffix. Such bytes
// are a JSON object of exactly alg EdDSA, that kid and typ Type, which the
// decoder would accept alike; any other spelling takes the decoder.
func plainHeader(raw []byte) (string, bool) {
	if len(raw) < len(plainHeaderPrefix)+len(plainHeaderSuffix) ||
		string(raw[:len(plainHeaderPrefix)]) != plainHeaderPrefix ||
		string(raw[len(raw)-len(plainHeaderSuffix):]) != plainHeaderSuffix {
		return "", false
	}
	kid := raw[len(plainHeaderPrefix) : len(raw)-len(plainHeaderSuffix)]
	for _, c := range kid {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return "", false
		}
	}
	return string(kid), true
}

// checkToken holds verified claims to the time and the audience.
func (want Expect) checkToken(c Claims) error {
	now := want.Now
	if now.IsZero() {
		now = time.Now()
	}
	leeway := want.Leeway
	if leeway == 0 {
		leeway = DefaultLeeway
	}
	switch {
	case now.After(time.Unix(c.Expiry, 0).Add(leeway)):
		return fmt.Errorf("%w at %s", ErrExpired, time.Unix(c.Expiry, 0).UTC().Format(time.RFC3339))
	case now.Add(leeway).Before(time.Unix(c.IssuedAt, 0)):
		return fmt.Errorf("%w (iat %d)", ErrNotYet, c.IssuedAt)
	case c.Audience != want.Audience:
		return fmt.Errorf("%w (token %q, expected %q)", ErrAudience, c.Audience, want.Audience)
	}
	return nil
}

// checkCall holds verified claims to the call.
func (want Expect) checkCall(c Claims) error {
	switch {
	case c.Tool != want.Tool:
		return fmt.Errorf("%w (approved %q, called %q)", ErrTool, c.Tool, want.Tool)
	}
	digest, err := ArgsDigest(want.Args)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrArgs, err)
	}
	if digest != c.ArgsDigest {
		return fmt.Errorf("%w (approved %s, called %s)", ErrArgs, c.ArgsDigest, digest)
	}
	return nil
}

// ReplayCache remembers the ids of tokens one process has accepted until
// they expire, so the process runs each approval at most once. Across
// processes, consume the token at the server instead.
type ReplayCache struct {
	mu   sync.Mutex
	seen map[string]int64 // jti → exp
	max  int
}

// NewReplayCache holds at most max unexpired ids; when full, it refuses
// new ones rather than forget one still live.
func NewReplayCache(max int) *ReplayCache {
	return &ReplayCache{seen: make(map[string]int64), max: max}
}

// Use records c's id and fails with ErrReplayed if it was used before.
func (rc *ReplayCache) Use(c Claims, now time.Time) error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if _, ok := rc.seen[c.ID]; ok {
		return fmt.Errorf("%w (jti %s)", ErrReplayed, c.ID)
	}
	if len(rc.seen) >= rc.max {
		for id, exp := range rc.seen {
			if now.Unix() > exp+int64(DefaultLeeway/time.Second) {
				delete(rc.seen, id)
			}
		}
		if len(rc.seen) >= rc.max {
			return fmt.Errorf("replay cache full (%d live tokens): consume tokens at the server instead", rc.max)
		}
	}
	rc.seen[c.ID] = c.Expiry
	return nil
}
