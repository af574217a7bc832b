package mcpsdk

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestLoggerDropsBelowWarn(t *testing.T) {
	var b bytes.Buffer
	l := Logger(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})).With("k", "v").WithGroup("g")
	l.Info("session started")
	l.Warn("kept")
	if s := b.String(); strings.Contains(s, "session started") || !strings.Contains(s, "kept") || !strings.Contains(s, "k=v") {
		t.Fatalf("log = %q, want only the warning, with its attributes", s)
	}
}

func TestBearer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(r.Header.Get("Authorization")))
	}))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	res, err := (&http.Client{Transport: Bearer{Token: "s3cret"}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var got bytes.Buffer
	got.ReadFrom(res.Body)
	if got.String() != "Bearer s3cret" || req.Header.Get("Authorization") != "" {
		t.Fatalf("server saw %q, caller's request has %q", got.String(), req.Header.Get("Authorization"))
	}
}
