package notify_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/outbound"
	"github.com/airlockhq/airlock/notify"
)

// The example of the Standard Webhooks specification's reference
// libraries: this secret, id, timestamp and payload sign to this.
const (
	specSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTS     = 1614265330
	specBody   = `{"test": 2432232314}`
	specSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignMatchesTheSpecification(t *testing.T) {
	got, err := notify.Sign(specSecret, specID, specTS, []byte(specBody))
	if err != nil || got != specSig {
		t.Fatalf("Sign = %q, %v; want %q", got, err, specSig)
	}
}

func headers(id string, ts int64, sig string) http.Header {
	h := http.Header{}
	h.Set(notify.HeaderID, id)
	h.Set(notify.HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(notify.HeaderSignature, sig)
	return h
}

// TestVerify is T21's receiver side: only a webhook signed with the
// secret, over exactly this body, id and timestamp, within the tolerance,
// is accepted.
func TestVerify(t *testing.T) {
	at := time.Unix(specTS, 0)
	other := airlock.NewWebhookSecret()
	otherSig, _ := notify.Sign(other, specID, specTS, []byte(specBody))
	for _, c := range []struct {
		name   string
		secret string
		h      http.Header
		body   string
		now    time.Time
		ok     bool
	}{
		{"valid", specSecret, headers(specID, specTS, specSig), specBody, at, true},
		{"valid among others", specSecret, headers(specID, specTS, "v1,bm9wZQ== v2,abc "+specSig), specBody, at, true},
		{"tampered body", specSecret, headers(specID, specTS, specSig), `{"test": 2432232315}`, at, false},
		{"other id", specSecret, headers("msg_other", specTS, specSig), specBody, at, false},
		{"other timestamp", specSecret, headers(specID, specTS+1, specSig), specBody, at, false},
		{"wrong secret", specSecret, headers(specID, specTS, otherSig), specBody, at, false},
		{"signed with the wrong secret", other, headers(specID, specTS, specSig), specBody, at, false},
		{"stale: 6 minutes old", specSecret, headers(specID, specTS, specSig), specBody, at.Add(6 * time.Minute), false},
		{"from the future", specSecret, headers(specID, specTS, specSig), specBody, at.Add(-6 * time.Minute), false},
		{"wrong version", specSecret, headers(specID, specTS, strings.Replace(specSig, "v1,", "v2,", 1)), specBody, at, false},
		{"no signature", specSecret, headers(specID, specTS, ""), specBody, at, false},
		{"timestamp not a number", specSecret, http.Header{"Webhook-Id": {specID}, "Webhook-Timestamp": {"soon"}, "Webhook-Signature": {specSig}}, specBody, at, false},
		{"secret without prefix", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", headers(specID, specTS, specSig), specBody, at, false},
		// The same MAC with the last character's unused bits set: it
		// decodes to the signed bytes, but it is not what was signed.
		{"signature after a form feed, not a space", specSecret, headers(specID, specTS, "\f"+specSig), specBody, at, false},
		{"signature not in canonical base64", specSecret, headers(specID, specTS, strings.TrimSuffix(specSig, "E=")+"F="), specBody, at, false},
	} {
		err := notify.Verify(c.secret, c.h, []byte(c.body), c.now, notify.DefaultTolerance)
		if (err == nil) != c.ok {
			t.Errorf("%s: Verify = %v, want ok %v", c.name, err, c.ok)
		}
	}
}

// FuzzVerify: Verify never panics, and accepts only what Sign signed.
func FuzzVerify(f *testing.F) {
	f.Add(specID, "1614265330", specSig, []byte(specBody))
	f.Add("", "", "", []byte{})
	f.Add("msg_1", "-1", "v1,,,", []byte("{}"))
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set(notify.HeaderID, id)
		h.Set(notify.HeaderTimestamp, ts)
		h.Set(notify.HeaderSignature, sig)
		err := notify.Verify(specSecret, h, body, time.Unix(specTS, 0), notify.DefaultTolerance)
		if err == nil {
			n, perr := strconv.ParseInt(h.Get(notify.HeaderTimestamp), 10, 64)
			want, _ := notify.Sign(specSecret, h.Get(notify.HeaderID), n, body)
			if perr != nil || !strings.Contains(" "+h.Get(notify.HeaderSignature)+" ", " "+want+" ") {
				t.Fatalf("accepted id %q ts %q sig %q body %q", id, ts, sig, body)
			}
		}
	})
}

// TestCheckURL: a URL the outbound rules refuse is an invalid_request
// naming the url field (the rules' own table is internal/outbound's).
func TestCheckURL(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1/", "http://0x7f000001/", "http://localhost./", "http://[::127.0.0.1]/"} {
		err := notify.CheckURL(u, false)
		if airlock.ErrorCode(err) != airlock.CodeInvalidRequest || !strings.Contains(err.Error(), "--outbound-allow-private") &&
			!strings.Contains(err.Error(), "resolvers disagree") {
			t.Errorf("CheckURL(%s) = %v, want invalid_request", u, err)
		}
	}
	for _, u := range []string{"https://hooks.example.com/x", "http://8.8.8.8/"} {
		if err := notify.CheckURL(u, false); err != nil {
			t.Errorf("CheckURL(%s) = %v", u, err)
		}
	}
}

// TestRefusesPrivateAtDial is T25's sender side: without
// --outbound-allow-private a receiver on loopback, by address, by a name
// resolving to it or by its IPv4-compatible IPv6 form, gets no request at
// all.
func TestRefusesPrivateAtDial(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	s := notify.NewWebhookSender(notify.WebhookConfig{Timeout: 5 * time.Second})
	defer s.Close()
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	for _, u := range []string{srv.URL, "http://localhost:" + port + "/hook", "http://[::127.0.0.1]:" + port + "/hook",
		"http://[::ffff:0:127.0.0.1]:" + port + "/hook"} {
		status, err := s.Send(context.Background(), airlock.Endpoint{ID: "whk_x", URL: u, Secret: specSecret},
			airlock.Delivery{MessageID: "msg_1", Payload: []byte(`{}`)})
		if _, ok := errors.AsType[*outbound.RefusedError](err); !ok || status != 0 {
			t.Errorf("Send to %s = %d, %v; want a refusal", u, status, err)
		}
		if err != nil && strings.Contains(err.Error(), port) {
			t.Errorf("the refusal names the URL: %v", err)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("the private receiver got %d requests", hits.Load())
	}
}

// TestNoRedirects: a redirect is a failed attempt, and its target gets
// nothing.
func TestNoRedirects(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer target.Close()
	redirect := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	defer redirect.Close()
	s := notify.NewWebhookSender(notify.WebhookConfig{AllowPrivate: true})
	defer s.Close()
	status, err := s.Send(context.Background(), airlock.Endpoint{ID: "whk_x", URL: redirect.URL, Secret: specSecret},
		airlock.Delivery{MessageID: "msg_1", Payload: []byte(`{}`)})
	if status != http.StatusTemporaryRedirect || err == nil || !strings.Contains(err.Error(), "redirects are not followed") {
		t.Fatalf("Send = %d, %v; want 307 refused", status, err)
	}
	if hits.Load() != 0 {
		t.Fatalf("the redirect's target got %d requests", hits.Load())
	}
}
