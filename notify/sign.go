// Package notify delivers notifications derived from the committed audit
// log (docs/notifications.md): a fan-out step turns events into queued
// deliveries, and per-endpoint workers attempt them under leases, with
// retries that back off with jitter, until the endpoint accepts or the
// retries run out. Each endpoint kind has a Sender; webhooks are signed
// as the Standard Webhooks specification says.
package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

// The Standard Webhooks headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// DefaultTolerance is how far a webhook's timestamp may be from the
// receiver's clock before Verify refuses it, as the specification's
// libraries default.
const DefaultTolerance = 5 * time.Minute

// secretKey returns the HMAC key of a "whsec_…" secret.
func secretKey(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, airlock.WebhookSecretPrefix)
	if !ok {
		return nil, fmt.Errorf("a webhook secret starts with %q", airlock.WebhookSecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) == 0 {
		return nil, errors.New("a webhook secret is whsec_ followed by base64")
	}
	return key, nil
}

// Sign returns the webhook-signature header of body sent as message id at
// unix second ts: "v1," and the base64 HMAC-SHA256 of "id.ts.body" keyed
// by the secret's decoded bytes.
func Sign(secret, id string, ts int64, body []byte) (string, error) {
	key, err := secretKey(secret)
	if err != nil {
		return "", err
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, ts, body)), nil
}

func mac(key []byte, id string, ts int64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a received webhook as a receiver should: the three
// headers present, the timestamp within tolerance of now, and one of the
// signature header's space-separated "v1,…" entries matching (compared in
// constant time). Receivers should also drop a webhook-id they have
// already processed: deliveries are at least once.
func Verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	key, err := secretKey(secret)
	if err != nil {
		return err
	}
	id, tsText, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || tsText == "" || sigs == "" {
		return errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return errors.New("webhook-timestamp is not unix seconds")
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("webhook-timestamp is %s from now; at most %s is accepted", d.Round(time.Second), tolerance)
	}
	// The encoded signatures are compared, not their decoded bytes:
	// base64 decoding ignores a last character's unused bits, so several
	// strings decode to one MAC, and only the one Sign writes may pass.
	want := []byte(base64.StdEncoding.EncodeToString(mac(key, id, ts, body)))
	// Signatures are separated by single spaces, as the specification
	// and its reference libraries split them: no other whitespace.
	for sig := range strings.SplitSeq(sigs, " ") {
		v, b64, ok := strings.Cut(sig, ",")
		if ok && v == "v1" && hmac.Equal([]byte(b64), want) {
			return nil
		}
	}
	return errors.New("no webhook-signature matches")
}
