package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func runHealthcheckApp(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	app := &App{Stdout: &out, Stderr: &out, LookupEnv: mapEnv(env)}
	code := exitCode(app, app.Run(t.Context(), append([]string{"healthcheck"}, args...)))
	return code, out.String()
}

// TestHealthcheck runs `airlock healthcheck` against a real server, one
// whose /readyz says not ready, and an address nobody listens on: only
// the first is exit 0.
func TestHealthcheck(t *testing.T) {
	t.Parallel()
	srv, _ := serveNew(t)
	_, port, _ := net.SplitHostPort(srv.addr)

	notReady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			t.Errorf("healthcheck asked for %s, want /readyz", r.URL.Path)
		}
		http.Error(w, "not ready: the store cannot serve", http.StatusServiceUnavailable)
	}))
	t.Cleanup(notReady.Close)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
		out  string
	}{
		{"a ready server is exit 0", nil, []string{"--addr", srv.addr}, exitOK, "ready: http://" + srv.addr + "/readyz answered 200 OK"},
		{"serve's AIRLOCK_ADDR, a wildcard host, is checked on loopback", map[string]string{"AIRLOCK_ADDR": "0.0.0.0:" + port}, nil, exitOK, "ready: http://127.0.0.1:" + port + "/readyz"},
		{"a 503 from /readyz is exit 1", nil, []string{"--addr", strings.TrimPrefix(notReady.URL, "http://")}, exitFailure, "answered 503 Service Unavailable: not ready: the store cannot serve"},
		{"nobody listening is exit 1", nil, []string{"--addr", closedAddr}, exitFailure, "airlock: not ready: "},
		{"an address without a port is a usage error", nil, []string{"--addr", "localhost"}, exitUsage, "--addr: "},
		{"port 0 is a usage error", nil, []string{"--addr", "127.0.0.1:0"}, exitUsage, "names no port"},
		{"a timeout out of range is a usage error", nil, []string{"--timeout", "2m"}, exitUsage, "--timeout must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out := runHealthcheckApp(t, tc.env, tc.args...)
			if code != tc.code || !strings.Contains(out, tc.out) {
				t.Errorf("exit %d, want %d, with %q in:\n%s", code, tc.code, tc.out, out)
			}
		})
	}
}

func TestReadyzURL(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080/readyz",
		"0.0.0.0:8080":   "http://127.0.0.1:8080/readyz",
		":8080":          "http://127.0.0.1:8080/readyz",
		"[::]:8080":      "http://[::1]:8080/readyz",
		"[::1]:9":        "http://[::1]:9/readyz",
		"airlock:8080":   "http://airlock:8080/readyz",
	} {
		if got, err := readyzURL(addr); err != nil || got != want {
			t.Errorf("readyzURL(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
}
