package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// runHealthcheck asks a server on this machine whether it is ready
// (GET /readyz) and exits 0 when it answers 200, 1 otherwise. It is the
// container image's HEALTHCHECK: a scratch image has no curl, so the
// binary checks itself (docs/operations.md, "The container image").
// --addr is serve's own flag and variable (AIRLOCK_ADDR), so the check
// finds the server where the same configuration makes it listen; a
// wildcard host (0.0.0.0, ::) is reached on loopback.
func runHealthcheck(ctx context.Context, a *App, args []string) error {
	fs := a.newFlagSet("healthcheck")
	addr := fs.String("addr", DefaultConfig().Addr, "the address `airlock serve` listens on (its --addr); a wildcard host is checked on loopback")
	timeout := fs.Duration("timeout", 5*time.Second, "how long the check may take in all; no answer by then is not ready")
	if err := a.parseFlags(fs, args); err != nil {
		return err
	}
	if *timeout <= 0 || *timeout > time.Minute {
		return usageErrorf("--timeout must be between 1ns and 1m, got %s", *timeout)
	}
	url, err := readyzURL(*addr)
	if err != nil {
		return usageErrorf("--addr: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return usageErrorf("--addr: %v", err)
	}
	req.Header.Set("User-Agent", "airlock-healthcheck/"+userAgentVersion())
	// No proxy from the environment: the server is on this machine.
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("not ready: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("not ready: %s answered %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	fmt.Fprintf(a.Stdout, "ready: %s answered %s\n", url, resp.Status)
	return nil
}

// readyzURL is the /readyz URL of a server listening on addr.
func readyzURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if port == "" || port == "0" {
		return "", fmt.Errorf("%q names no port to check", addr)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}
