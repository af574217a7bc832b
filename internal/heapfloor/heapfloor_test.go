package heapfloor

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercentFor(t *testing.T) {
	for _, tt := range []struct {
		live, floor uint64
		want        int
	}{
		{live: 2 << 20, floor: 32 << 20, want: 800}, // the runtime's minimum, 4 MiB × 8, is the floor
		{live: 3 << 20, floor: 32 << 20, want: 800},
		{live: 5 << 20, floor: 32 << 20, want: 540},
		{live: 6 << 20, floor: 32 << 20, want: 434}, // rounded up: never below the floor
		{live: 15 << 20, floor: 32 << 20, want: 114},
		{live: 16 << 20, floor: 32 << 20, want: 100},
		{live: 3 << 30, floor: 32 << 20, want: 100},
		{live: 1 << 10, floor: 32 << 20, want: 800},
		{live: 0, floor: 32 << 20, want: 800},
		{live: 1 << 10, floor: 2 << 20, want: 100},
	} {
		if got := PercentFor(tt.live, tt.floor); got != tt.want {
			t.Errorf("PercentFor(%d, %d) = %d, want %d", tt.live, tt.floor, got, tt.want)
		}
	}
}

// read returns a runtime metric's value.
func read(t *testing.T, name string) uint64 {
	t.Helper()
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatalf("no metric %s", name)
	}
	return s[0].Value.Uint64()
}

// collect runs a collection and waits for the tuner's adjustment after it.
func collect(t *testing.T, adjusted <-chan int) int {
	t.Helper()
	runtime.GC()
	select {
	case p := <-adjusted:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no adjustment after a collection")
		return 0
	}
}

// TestStart: after a collection the heap goal is the floor; stop gives
// GOGC back its default. Not parallel: GOGC is the
// process's.
func TestStart(t *testing.T) {
	const floor = 64 << 20
	adjusted := make(chan int, 16)
	stop := start(floor, func(p int) {
		select {
		case adjusted <- p:
		default:
		}
	})
	defer stop()
	// A second Start is refused, and its stop leaves the first running:
	// the adjustments below come from the first.
	Start(floor)()
	if running == nil {
		t.Fatal("a second Start's stop stopped the first")
	}
	collect(t, adjusted)
	p := collect(t, adjusted) // the first may have begun before Start
	live, goal := read(t, "/gc/heap/live:bytes"), read(t, "/gc/heap/goal:bytes")
	if p <= 100 || read(t, "/gc/gogc:percent") != uint64(p) {
		t.Fatalf("GOGC %d (set %d) with %d bytes live; want above 100", read(t, "/gc/gogc:percent"), p, live)
	}
	if goal < floor*9/10 || goal > floor*11/10 {
		t.Fatalf("heap goal %d with %d live: want about the floor, %d", goal, live, floor)
	}
	stop()
	for len(adjusted) > 0 {
		<-adjusted // made before stop
	}
	if got := read(t, "/gc/gogc:percent"); got != 100 || running != nil {
		t.Fatalf("GOGC %d after stop (want 100), tuner still registered: %v", got, running != nil)
	}
	runtime.GC()
	runtime.GC()
	select {
	case p := <-adjusted:
		t.Fatalf("adjusted to %d after stop", p)
	default:
	}
}

// TestStartLeavesGOGC: GOGC in the environment is the operator's choice.
func TestStartLeavesGOGC(t *testing.T) {
	t.Setenv("GOGC", "100")
	adjusted := make(chan int, 1)
	stop := start(64<<20, func(p int) { adjusted <- p })
	defer stop()
	if running != nil {
		t.Fatal("a tuner started with GOGC set")
	}
	runtime.GC()
	runtime.GC()
	if got := read(t, "/gc/gogc:percent"); got != 100 {
		t.Fatalf("GOGC %d with GOGC=100 in the environment", got)
	}
	select {
	case p := <-adjusted:
		t.Fatalf("adjusted to %d with GOGC set", p)
	default:
	}
}
