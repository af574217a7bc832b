package testkit

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// ErrorLog is a slog.Handler that keeps what is logged at error level, as
// "message key=value …", so that a test fails when the code under test
// logs an error it did not expect. It is safe for concurrent use.
type ErrorLog struct {
	mu   sync.Mutex
	errs []string
}

// Enabled reports whether lv is error level or above.
func (l *ErrorLog) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelError }

// Handle keeps the record as a line.
func (l *ErrorLog) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelError {
		return nil
	}
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	l.mu.Lock()
	l.errs = append(l.errs, b.String())
	l.mu.Unlock()
	return nil
}

// WithAttrs returns l: the tests' loggers add no attributes.
func (l *ErrorLog) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup returns l: the tests' loggers add no groups.
func (l *ErrorLog) WithGroup(string) slog.Handler { return l }

// Take returns the errors logged so far and forgets them, for a test that
// expects one.
func (l *ErrorLog) Take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	errs := l.errs
	l.errs = nil
	return errs
}

// FailOnErrors makes t fail, when it ends, if errors were logged and not
// taken. Cleanups run last registered first: registered after a server's,
// it looks before the server stops.
func (l *ErrorLog) FailOnErrors(t testing.TB) {
	t.Cleanup(func() {
		if errs := l.Take(); len(errs) > 0 {
			t.Errorf("errors were logged:\n%s", strings.Join(errs, "\n"))
		}
	})
}
