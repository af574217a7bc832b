package ratelimit

import (
	"testing"
	"time"
)

// TestLimiterRefills checks the bucket with an injected clock.
func TestLimiterRefills(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	l := New(10, 2, func() time.Time { return now })
	for i := range 2 {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	ok, retry := l.Allow("a")
	if ok || retry != 100*time.Millisecond {
		t.Fatalf("empty bucket: ok=%v retry=%s, want refused, 100ms", ok, retry)
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Fatal("another key shares the bucket")
	}
	now = now.Add(99 * time.Millisecond)
	if ok, _ := l.Allow("a"); ok {
		t.Fatal("allowed before a whole request refilled")
	}
	now = now.Add(time.Millisecond)
	if ok, _ := l.Allow("a"); !ok {
		t.Fatal("refused after refill")
	}
	now = now.Add(time.Hour)
	for i := range 3 {
		ok, _ := l.Allow("a")
		if ok != (i < 2) {
			t.Fatalf("after an hour, request %d: ok=%v; the bucket must cap at the burst", i+1, ok)
		}
	}
}

// BenchmarkLimiterAllow measures what the per-token budget adds to an
// authenticated call within its budget.
func BenchmarkLimiterAllow(b *testing.B) {
	l := New(1e9, 1<<30, time.Now)
	for b.Loop() {
		l.Allow("token")
	}
}
