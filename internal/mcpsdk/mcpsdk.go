// Package mcpsdk holds what Airlock's users of the MCP Go SDK share: the
// gate and the MCP server hand it a quieter logger, and the stdio bridge
// and the benchmark give its HTTP client a bearer token.
package mcpsdk

import (
	"context"
	"log/slog"
	"net/http"
)

// Logger returns a logger for the SDK that writes only warnings and errors
// to h: the SDK logs every session's start and end at info, which is
// noise on a gate's stderr and in a server's log.
func Logger(h slog.Handler) *slog.Logger {
	return slog.New(levelFloor{h, slog.LevelWarn})
}

// levelFloor is a slog.Handler that drops records below a level.
type levelFloor struct {
	slog.Handler
	floor slog.Level
}

func (l levelFloor) Enabled(ctx context.Context, lv slog.Level) bool {
	return lv >= l.floor && l.Handler.Enabled(ctx, lv)
}

func (l levelFloor) WithAttrs(a []slog.Attr) slog.Handler {
	return levelFloor{l.Handler.WithAttrs(a), l.floor}
}

func (l levelFloor) WithGroup(n string) slog.Handler {
	return levelFloor{l.Handler.WithGroup(n), l.floor}
}

// Bearer is an http.RoundTripper that adds "Authorization: Bearer Token"
// to every request and sends it with Next (http.DefaultTransport when
// nil): the SDK's client transports take an *http.Client, not a token.
type Bearer struct {
	Token string
	Next  http.RoundTripper
}

// RoundTrip sends a copy of r with the token.
func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Token)
	next := b.Next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}
