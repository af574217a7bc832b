package sqlite

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/sequencer"
	"github.com/airlockhq/airlock/store"
)

// BenchmarkSequence measures the audit log's sequencer appending the
// events of created and approved requests (two a request) made before
// the clock starts, in batches of up to sequencer.DefaultBatch: what the
// log costs a lifecycle apart from the request's path. ns/op is per
// event.
func BenchmarkSequence(b *testing.B) {
	ctx := context.Background()
	s := benchStore(b)
	if ok, err := s.AcquireSequencer(ctx, "bench", time.Hour); err != nil || !ok {
		b.Fatalf("the sequencer's lease: %v %v", ok, err)
	}
	sequenceAll := func(after int64) (next int64, appended int) {
		for next = after; ; {
			bt, err := sequencer.StepBatch(ctx, s, "bench", next, sequencer.DefaultBatch)
			if err != nil {
				b.Fatal(err)
			}
			next, appended = bt.Next, appended+len(bt.At)
			if len(bt.At) == 0 {
				return next, appended
			}
		}
	}
	// The events made before (benchStore's instance).
	after, _ := sequenceAll(0)
	for i := 0; i < b.N; i += 2 {
		r, err := benchCreate(ctx, s)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Decide(ctx, store.DecideParams{ID: r.ID, Status: airlock.StateApproved, Validity: time.Minute, Actor: "tok_r"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	cpu0 := processCPU()
	_, n := sequenceAll(after)
	cpu := processCPU() - cpu0
	b.StopTimer()
	// The process's CPU, which the machine's other work does not inflate
	// as it does ns/op: the sequencer's and the writer's.
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(max(n, 1)), "cpu-ns/event")
	if want := (b.N + 1) / 2 * 2; n != want {
		b.Fatalf("appended %d events, want %d", n, want)
	}
}

// processCPU is the CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
