package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/logtest"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/provider"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlite"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}

// closeRecorder is a store that counts its Close calls.
type closeRecorder struct {
	store.Store
	closed atomic.Int32
}

func (s *closeRecorder) Close() error {
	s.closed.Add(1)
	return s.Store.Close()
}

func openSQLite(t *testing.T, path string) *closeRecorder {
	t.Helper()
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	return &closeRecorder{Store: st}
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	r, err := testkit.Call(t.Context(), http.DefaultClient, "GET", url, token, "")
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return r.Status, r.Raw
}

// TestRunServesEveryListenerAndReleasesAll: the server answers the API
// and the inbox on Addr and on the extra listeners alike, the token it
// generated at the first start is an admin's, and once Run's context ends
// Run returns with the listeners and the store closed. A second start on
// the same database generates no token: it was shown once.
func TestRunServesEveryListenerAndReleasesAll(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "airlock.db")
	st := openSQLite(t, path)
	extra, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var log logtest.Recorder
	var admin string
	show := func(secret string) error { admin = secret; return nil }
	srv, err := New(t.Context(), Config{
		Store: st, StoreName: "test.db", Addr: "127.0.0.1:0", Listeners: []net.Listener{extra}, Logger: log.Logger(),
		ShowAdminToken: show,
	})
	if err != nil {
		t.Fatal(err)
	}
	if admin == "" || srv.AdminTokenMissing() {
		t.Fatal("the first start generated no admin token")
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()

	for _, base := range []string{"http://" + srv.Addr(), "http://" + extra.Addr().String()} {
		if status, body := get(t, base+"/v1/tokens", admin); status != 200 || !strings.Contains(body, provider.BootstrapTokenID) {
			t.Errorf("GET %s/v1/tokens with the generated token: %d %s; want 200 listing %s", base, status, body, provider.BootstrapTokenID)
		}
		if status, body := get(t, base+"/signin", ""); status != 200 || !strings.Contains(body, "<form") {
			t.Errorf("GET %s/signin: %d %.200s; want the inbox's sign-in page", base, status, body)
		}
	}

	stop()
	if err := <-ran; err != nil {
		t.Fatalf("Run returned %v; want nil", err)
	}
	if n := st.closed.Load(); n != 1 {
		t.Errorf("the store was closed %d times; want once", n)
	}
	for _, addr := range []string{srv.Addr(), extra.Addr().String()} {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after Run returned", addr)
		}
	}
	if got := log.Containing("grace period over"); len(got) > 0 {
		t.Errorf("an idle server was cut rather than drained: %v", got)
	}

	first := admin
	again, err := New(t.Context(), Config{Store: openSQLite(t, path), Addr: "127.0.0.1:0", Logger: log.Logger(), ShowAdminToken: show})
	if err != nil {
		t.Fatal(err)
	}
	if admin != first || again.AdminTokenMissing() {
		t.Errorf("the second start generated the admin token %q; want none (the first was shown already)", admin)
	}
	ctx, stop = context.WithCancel(context.Background())
	stop()
	if err := again.Run(ctx); err != nil {
		t.Fatalf("Run returned %v; want nil", err)
	}
}

// TestNewReleasesWhatItTookOnFailure: when New cannot listen, it closes
// the store and the extra listeners it was given, and stores no admin
// token that nobody saw.
func TestNewReleasesWhatItTookOnFailure(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	extra, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "airlock.db")
	st := openSQLite(t, path)
	_, err = New(t.Context(), Config{Store: st, Addr: busy.Addr().String(), Listeners: []net.Listener{extra}})
	if err == nil || !strings.Contains(err.Error(), "--addr") {
		t.Fatalf("New on a busy address returned %v; want an error naming --addr", err)
	}
	if n := st.closed.Load(); n != 1 {
		t.Errorf("the store was closed %d times; want once", n)
	}
	if _, err := extra.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("the extra listener's Accept returned %v; want net.ErrClosed", err)
	}

	reopened := openSQLite(t, path)
	defer reopened.Close()
	if _, err := reopened.GetToken(t.Context(), provider.BootstrapTokenID); airlock.ErrorCode(err) != airlock.CodeNotFound {
		t.Errorf("after a failed start, GetToken(%s) returned %v; want not_found", provider.BootstrapTokenID, err)
	}
}

// TestAdminTokenOnlyWhereShown: a first start generates the admin token
// only when it has somewhere to show it, and stores it only once it was
// shown. A start with nowhere to show it, or whose showing fails, stores
// none, so that a later start still generates one.
func TestAdminTokenOnlyWhereShown(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "airlock.db")
	start := func(show func(string) error) (*Server, error) {
		t.Helper()
		srv, err := New(t.Context(), Config{Store: openSQLite(t, path), Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler), ShowAdminToken: show})
		if err == nil {
			ctx, stop := context.WithCancel(context.Background())
			stop()
			if err := srv.Run(ctx); err != nil {
				t.Fatalf("Run: %v", err)
			}
		}
		return srv, err
	}
	stored := func() bool {
		t.Helper()
		st := openSQLite(t, path)
		defer st.Close()
		_, err := st.GetToken(t.Context(), provider.BootstrapTokenID)
		return err == nil
	}

	srv, err := start(nil)
	if err != nil || !srv.AdminTokenMissing() || stored() {
		t.Fatalf("a start with nowhere to show the token: err %v, missing %v, stored %v; want no error, missing, none stored", err, srv.AdminTokenMissing(), stored())
	}
	refused := errors.New("the file exists")
	if _, err := start(func(string) error { return refused }); !errors.Is(err, refused) || stored() {
		t.Fatalf("a start whose showing failed: err %v, stored %v; want %v and none stored", err, stored(), refused)
	}
	var shown string
	if srv, err = start(func(s string) error { shown = s; return nil }); err != nil || srv.AdminTokenMissing() || shown == "" || !stored() {
		t.Fatalf("a start that showed the token: err %v, shown %q, stored %v; want it shown and stored", err, shown, stored())
	}
}

// TestPublicURLBehindAProxy: a server whose --public-url is https and names
// a host answers the inbox under that Host, as a TLS proxy that keeps the
// Host header sends it, and marks its cookies Secure although the proxy's
// connection is plain HTTP; another host is still refused.
func TestPublicURLBehindAProxy(t *testing.T) {
	t.Parallel()
	st := openSQLite(t, filepath.Join(t.TempDir(), "airlock.db"))
	var log logtest.Recorder
	srv, err := New(t.Context(), Config{
		Store: st, StoreName: "test.db", Addr: "127.0.0.1:0", Logger: log.Logger(),
		PublicURL: "https://airlock.example.com", AdminToken: "admin-token-0123456789abcdef",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go srv.Run(ctx)
	signin := func(host string) *http.Response {
		t.Helper()
		req, err := http.NewRequest("GET", "http://"+srv.Addr()+"/signin", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	res := signin("airlock.example.com")
	if res.StatusCode != 200 {
		t.Fatalf("GET /signin with the public URL's host: %d", res.StatusCode)
	}
	var secure int
	for _, c := range res.Cookies() {
		if !c.Secure {
			t.Errorf("cookie %s is not Secure behind an https public URL", c.Name)
		}
		secure++
	}
	if secure == 0 {
		t.Fatal("the sign-in page set no cookie to check")
	}
	if res := signin("evil.example.net"); res.StatusCode != http.StatusForbidden {
		t.Errorf("GET /signin with another host: %d, want 403", res.StatusCode)
	}
}
