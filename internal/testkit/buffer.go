package testkit

import (
	"strings"
	"sync"
)

// Buffer collects text that one goroutine writes (a logger, a process's
// stderr) while a test reads it: a strings.Builder behind a mutex.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.b.Write(p)
	l.mu.Unlock()
	return len(p), nil
}

// String returns all that was written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
