package testkit

import (
	"testing"
	"time"
)

// Alternate is the loop of a benchmark that compares two operations under
// the same load of a shared machine: each iteration runs first, then
// second, each returning how long its measured part took. It reports each
// one's rate, as firstName and secondName, and "ratio", second's rate over
// first's.
func Alternate(b *testing.B, firstName string, first func() time.Duration, secondName string, second func() time.Duration) {
	var one, two time.Duration
	n := 0
	for b.Loop() {
		one += first()
		two += second()
		n++
	}
	b.ReportMetric(float64(n)/one.Seconds(), firstName)
	b.ReportMetric(float64(n)/two.Seconds(), secondName)
	b.ReportMetric(one.Seconds()/two.Seconds(), "ratio")
}
