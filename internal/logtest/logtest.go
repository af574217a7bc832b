// Package logtest has slog.Handlers for tests that check what was logged:
// Recorder keeps every record as one line of text, Errors the errors only.
package logtest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// Recorder keeps each record it handles as "message key=value …", in
// order. It is safe for concurrent use.
type Recorder struct {
	mu    sync.Mutex
	lines []string
}

// Logger returns a logger writing to r.
func (r *Recorder) Logger() *slog.Logger { return slog.New(r) }

// Enabled reports true: a Recorder keeps every level.
func (r *Recorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps the record as a line.
func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Message)
	rec.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	r.mu.Lock()
	r.lines = append(r.lines, b.String())
	r.mu.Unlock()
	return nil
}

// WithAttrs returns r: the tests' loggers add no attributes.
func (r *Recorder) WithAttrs([]slog.Attr) slog.Handler { return r }

// WithGroup returns r: the tests' loggers add no groups.
func (r *Recorder) WithGroup(string) slog.Handler { return r }

// Containing returns the lines kept so far that contain s.
func (r *Recorder) Containing(s string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lines {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// Take returns the lines kept so far and forgets them.
func (r *Recorder) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.lines
	r.lines = nil
	return out
}
