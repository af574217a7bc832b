// Package hostcheck guards Airlock's browser-reachable endpoints (the inbox
// and /mcp) against DNS rebinding: a request must name this server in its
// Host header, so a hostile page that points its own name at 127.0.0.1
// cannot talk to a local Airlock.
package hostcheck

import (
	"net"
	"slices"
	"strings"
)

// Allowed reports whether a Host header value (host or host:port) names
// this server: a loopback name or address, or one of allowed, matched with
// or without its port. allowed must be lower case.
func Allowed(hostport string, allowed []string) bool {
	hostport = strings.ToLower(hostport)
	host := hostport
	if hp, _, err := net.SplitHostPort(hostport); err == nil {
		host = hp
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	return slices.Contains(allowed, hostport) || slices.Contains(allowed, host)
}
