package logtest

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

// Errors is a Recorder of what is logged at error level only, so that a
// test fails when the code under test logs an error it did not expect.
type Errors struct {
	rec Recorder
}

// Enabled reports whether lv is error level or above.
func (e *Errors) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelError }

// Handle keeps the record as a line, when it is an error.
func (e *Errors) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelError {
		return nil
	}
	return e.rec.Handle(ctx, r)
}

// WithAttrs returns e: the tests' loggers add no attributes.
func (e *Errors) WithAttrs([]slog.Attr) slog.Handler { return e }

// WithGroup returns e: the tests' loggers add no groups.
func (e *Errors) WithGroup(string) slog.Handler { return e }

// Take returns the errors logged so far and forgets them, for a test that
// expects one.
func (e *Errors) Take() []string { return e.rec.Take() }

// FailOnErrors makes t fail, when it ends, if errors were logged and not
// taken. Cleanups run last registered first: registered after a server's,
// it looks before the server stops.
func (e *Errors) FailOnErrors(t testing.TB) {
	t.Cleanup(func() {
		if errs := e.Take(); len(errs) > 0 {
			t.Errorf("errors were logged:\n%s", strings.Join(errs, "\n"))
		}
	})
}
