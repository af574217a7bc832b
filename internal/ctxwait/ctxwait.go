// Package ctxwait holds the waits bounded by a context that the client, the
// hook and the server's streaming handlers share.
package ctxwait

import (
	"context"
	"time"
)

// Sleep waits for d and returns nil, or returns ctx's error if ctx ends
// first.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WithStop returns ctx ended also when stop is done (never when stop is
// nil), and the func that releases it. A handler that streams or
// long-polls uses the server's context as stop: http.Server.Shutdown
// cancels no request's context, and would wait for it.
func WithStop(ctx, stop context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	if stop == nil {
		return ctx, cancel
	}
	release := context.AfterFunc(stop, cancel)
	return ctx, func() { release(); cancel() }
}
