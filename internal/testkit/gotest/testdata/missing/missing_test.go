// Package missing is a package whose tests TestRun runs: one skips for a
// missing part, through testkit.Unavailable, as Airlock's tests do.
package missing

import (
	"testing"

	"github.com/airlockhq/airlock/internal/testkit"
)

func TestNeedsAPart(t *testing.T) {
	testkit.Unavailable(t, "the part is not installed (install it, or set PART)")
}

func TestSkipsForAnotherReason(t *testing.T) { t.Skip("not on this system") }

func TestPasses(t *testing.T) {}
