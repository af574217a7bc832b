// Package apitest runs Airlock's REST API in this process, over a fresh
// SQLite file, for the tests of what talks to it over HTTP: the Go client,
// the gate, the examples. It is the one place those tests wire the store,
// the provider with its expiry scheduler and the handler, and mint their
// callers' tokens through the client as a person would.
//
// It imports the packages it wires, so the tests of those packages
// (rest, provider, sqlite, client's internal ones) cannot use it; they
// build what they test themselves.
package apitest

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/provider"
	"github.com/airlockhq/airlock/rest"
	"github.com/airlockhq/airlock/store/sqlite"
)

// AdminSecret is the bootstrap admin token of every server Start starts.
const AdminSecret = "apitest-admin-secret-0123456789"

// Config adjusts a server. The zero value is a server on the real clock
// whose rate limits no test reaches.
type Config struct {
	// Clock, when set, is the store's and the provider's clock.
	Clock airlock.Clock
	// MaxWait is the provider's longest long poll (0: its default).
	MaxWait time.Duration
	// RateLimit and RateBurst are the per-token limits (0: 1e6, so that
	// only a test about them meets them).
	RateLimit float64
	RateBurst int
}

// Server is a running Airlock: its URL, an HTTP client for it and the
// provider behind it.
type Server struct {
	URL     string
	HTTP    *http.Client
	Service *provider.Service
	admin   *client.Client
}

// Start starts a server that lives until t ends. Requests may ask for
// timeouts as short as a millisecond, so that expiry needs no sleeping.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.RateLimit == 0 {
		cfg.RateLimit = 1e6
	}
	if cfg.RateBurst == 0 {
		cfg.RateBurst = 1e6
	}
	ctx := context.Background()
	var opts []sqlite.Option
	if cfg.Clock != nil {
		opts = append(opts, sqlite.WithClock(cfg.Clock))
	}
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "airlock.db"), opts...)
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	logger := slog.New(slog.DiscardHandler)
	limits := airlock.DefaultLimits()
	limits.MinTimeout = time.Millisecond
	svc, err := provider.New(provider.Config{Store: store, Clock: cfg.Clock, Limits: limits, Logger: logger, MaxWait: cfg.MaxWait})
	if err != nil {
		t.Fatalf("provider: %v", err)
	}
	if err := svc.LoadSigningKeys(ctx); err != nil {
		t.Fatalf("signing keys: %v", err)
	}
	testkit.Go(t, svc.Run)

	shutdown, stop := context.WithCancel(ctx)
	srv := httptest.NewServer(rest.New(rest.Config{
		Service: svc, Logger: logger, RateLimit: cfg.RateLimit, RateBurst: cfg.RateBurst, Context: shutdown,
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(stop) // runs first: ends streams and long polls so Close returns

	if err := svc.BootstrapAdmin(ctx, AdminSecret); err != nil {
		t.Fatalf("bootstrap admin: %v", err)
	}
	hc := srv.Client()
	// Tests run many requests at once; let them keep their connections.
	hc.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	s := &Server{URL: srv.URL, HTTP: hc, Service: svc}
	s.admin = s.Client(t, AdminSecret)
	return s
}

// Mint creates a token as the admin, and returns a client with it and
// its secret.
func (s *Server) Mint(t testing.TB, name string, role airlock.Role, principal string) (*client.Client, string) {
	t.Helper()
	tok, err := s.admin.CreateToken(context.Background(), client.CreateTokenInput{Name: name, Role: role, Principal: principal})
	if err != nil {
		t.Fatalf("mint %s: %v", name, err)
	}
	return s.Client(t, tok.Secret), tok.Secret
}

// Client returns a client of the server with secret, over s.HTTP, with
// opts after that.
func (s *Server) Client(t testing.TB, secret string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(s.URL, secret, append([]client.Option{client.WithHTTPClient(s.HTTP)}, opts...)...)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return c
}
