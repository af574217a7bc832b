// Package pushrecv is a Web Push service on this machine's loopback, as
// a browser's push service and the browser together would see a push: it
// checks each push's VAPID authorization (RFC 8292: an ES256 JWT for the
// service's origin, signed by the key it names) and decrypts its body
// with the subscription's own keys (RFC 8291, aes128gcm per RFC 8188).
// It is written with the standard library alone and shares no code with
// the sender (notify), so that it checks the sender rather than repeats
// it. `airlock bench --scenario push` measures push lag with it.
package pushrecv

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// MaxBody bounds a push's body: push services take about 4 KB.
const MaxBody = 8 << 10

// Message is one push the receiver got: the subscription's path, when it
// arrived, and its plaintext, or why it was refused (Err: it did not
// decrypt, or its authorization did not verify).
type Message struct {
	Path string
	At   time.Time
	// Plain is the decrypted payload.
	Plain []byte
	// VAPIDKey is the public key (base64url) the push was signed with.
	VAPIDKey string
	Err      error
}

// subscription is a browser's side of a subscription: its private key
// and authentication secret.
type subscription struct {
	key  *ecdh.PrivateKey
	auth []byte
}

// Receiver is a push service on 127.0.0.1. Each subscription is a path of
// its URL; every push to one is checked and decrypted, handed to the
// receiver's function, and answered 201 Created (a push to no
// subscription, 404, as a real push service answers one that ended).
type Receiver struct {
	srv    *http.Server
	url    string
	handle func(Message)

	mu   sync.Mutex
	subs map[string]subscription
}

// Start starts a receiver that hands every push to handle, which must be
// safe to call from several goroutines at once.
func Start(handle func(Message)) (*Receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("push receiver: %w", err)
	}
	rc := &Receiver{url: "http://" + ln.Addr().String(), handle: handle, subs: map[string]subscription{}}
	rc.srv = &http.Server{Handler: http.HandlerFunc(rc.serve), ReadHeaderTimeout: 10 * time.Second}
	go rc.srv.Serve(ln)
	return rc, nil
}

// URL is where the receiver listens.
func (rc *Receiver) URL() string { return rc.url }

// Close stops the receiver.
func (rc *Receiver) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc.srv.Shutdown(ctx)
}

// Subscribe makes a browser's subscription at path (which starts with
// /): fresh keys, and what the browser would post to
// /v1/push/subscriptions.
func (rc *Receiver) Subscribe(path string) (airlock.PushSubscriptionInput, error) {
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return airlock.PushSubscriptionInput{}, err
	}
	auth := make([]byte, 16)
	rand.Read(auth)
	rc.mu.Lock()
	rc.subs[path] = subscription{key: k, auth: auth}
	rc.mu.Unlock()
	return airlock.PushSubscriptionInput{Endpoint: rc.url + path,
		Keys: airlock.PushKeys{P256DH: airlock.EncodePushKey(k.PublicKey().Bytes()), Auth: airlock.EncodePushKey(auth)}}, nil
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	m := Message{Path: r.URL.Path}
	rc.mu.Lock()
	sub, ok := rc.subs[r.URL.Path]
	rc.mu.Unlock()
	switch {
	case !ok:
		w.WriteHeader(http.StatusNotFound)
		return
	case err != nil:
		m.Err = fmt.Errorf("read the body: %w", err)
	default:
		m.Plain, m.VAPIDKey, m.Err = Open(r, body, sub.key, sub.auth)
	}
	m.At = time.Now()
	rc.handle(m)
	if m.Err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

// Open checks a push's headers and VAPID authorization and decrypts its
// body for the subscription (priv, auth), returning the plaintext and
// the VAPID public key it was signed with.
func Open(r *http.Request, body []byte, priv *ecdh.PrivateKey, auth []byte) ([]byte, string, error) {
	if ce := r.Header.Get("Content-Encoding"); ce != "aes128gcm" {
		return nil, "", fmt.Errorf("Content-Encoding %q; want aes128gcm", ce)
	}
	if ttl := r.Header.Get("TTL"); ttl == "" || ttl == "0" {
		return nil, "", fmt.Errorf("TTL %q; want the seconds to the deadline", ttl)
	}
	k, err := CheckVAPID(r.Header.Get("Authorization"), "http://"+r.Host, time.Now())
	if err != nil {
		return nil, "", err
	}
	plain, err := Decrypt(priv, auth, body)
	return plain, k, err
}

// CheckVAPID verifies "vapid t=<JWT>, k=<key>": an ES256 JWT for the push
// service's origin, signed by k, expiring within a day of now, with a
// mailto: or https: subject. It returns k.
func CheckVAPID(h, origin string, now time.Time) (string, error) {
	rest, ok := strings.CutPrefix(h, "vapid ")
	if !ok {
		return "", fmt.Errorf("the Authorization header %q is not vapid", h)
	}
	var tok, key string
	for part := range strings.SplitSeq(rest, ",") {
		part = strings.TrimSpace(part)
		if v, ok := strings.CutPrefix(part, "t="); ok {
			tok = v
		} else if v, ok := strings.CutPrefix(part, "k="); ok {
			key = v
		}
	}
	raw, err := base64.RawURLEncoding.DecodeString(key)
	if err != nil {
		return "", fmt.Errorf("k: %v", err)
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), raw)
	if err != nil {
		return "", fmt.Errorf("k is not a P-256 key: %v", err)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", errors.New("t is not a JWS")
	}
	hdr, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	claims, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err := errors.Join(err1, err2, err3); err != nil || len(sig) != 64 {
		return "", fmt.Errorf("t is not base64url with a 64-byte signature: %v", err)
	}
	var head struct{ Alg string }
	if err := json.Unmarshal(hdr, &head); err != nil || head.Alg != "ES256" {
		return "", fmt.Errorf("JWT header %s; want alg ES256", hdr)
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(pub, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return "", errors.New("the VAPID signature does not verify against k")
	}
	var c struct {
		Aud string
		Exp int64
		Sub string
	}
	if err := json.Unmarshal(claims, &c); err != nil {
		return "", err
	}
	unix := now.Unix()
	if c.Aud != origin || c.Exp <= unix || c.Exp > unix+24*3600 || !strings.HasPrefix(c.Sub, "mailto:") && !strings.HasPrefix(c.Sub, "https:") {
		return "", fmt.Errorf("VAPID claims %s; want aud %s, exp within a day, and a mailto: or https: sub", claims, origin)
	}
	return key, nil
}

// Decrypt opens an aes128gcm body (RFC 8188) encrypted for the
// subscription (priv, auth) as RFC 8291 says: one record, keyed by the
// sender's ephemeral key in the header.
func Decrypt(priv *ecdh.PrivateKey, auth, body []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("body shorter than its header")
	}
	salt, rs, idlen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if idlen != 65 || len(body) < 21+idlen {
		return nil, fmt.Errorf("keyid of %d bytes; want the sender's 65-byte key", idlen)
	}
	asPub, err := ecdh.P256().NewPublicKey(body[21 : 21+idlen])
	if err != nil {
		return nil, err
	}
	ct := body[21+idlen:]
	if rs < 18 || uint32(len(ct)) > rs {
		return nil, fmt.Errorf("record size %d with %d bytes: want one record", rs, len(ct))
	}
	secret, err := priv.ECDH(asPub)
	if err != nil {
		return nil, err
	}
	info := append(append([]byte("WebPush: info\x00"), priv.PublicKey().Bytes()...), asPub.Bytes()...)
	ikm, err := hkdf.Key(sha256.New, secret, auth, string(info), 32)
	if err != nil {
		return nil, err
	}
	cek, err := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, err
	}
	nonce, err := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	plain, err := gcm.Open(nil, nonce, ct, nil)
	if err != nil {
		return nil, fmt.Errorf("decrypt: %v", err)
	}
	plain = bytes.TrimRight(plain, "\x00")
	if len(plain) == 0 || plain[len(plain)-1] != 2 {
		return nil, errors.New("the last record's padding delimiter is not 2")
	}
	return plain[:len(plain)-1], nil
}

// CheckMessage checks that plain is a push as docs/phone.md promises:
// exactly {request_id, tool, deadline_at}, all set, and nothing else —
// no arguments, reasoning, context or note. It returns the request ID.
func CheckMessage(plain []byte) (string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(plain, &m); err != nil {
		return "", fmt.Errorf("the push is not a JSON object: %v", err)
	}
	var extra []string
	for k := range m {
		switch k {
		case "request_id", "tool", "deadline_at":
		default:
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		return "", fmt.Errorf("the push carries %s besides request_id, tool and deadline_at", strings.Join(extra, ", "))
	}
	var p struct {
		RequestID  string    `json:"request_id"`
		Tool       string    `json:"tool"`
		DeadlineAt time.Time `json:"deadline_at"`
	}
	if err := json.Unmarshal(plain, &p); err != nil || p.RequestID == "" || p.Tool == "" || p.DeadlineAt.IsZero() {
		return "", fmt.Errorf("the push %.200s lacks request_id, tool or deadline_at (%v)", plain, err)
	}
	return p.RequestID, nil
}
