package provider

import (
	"time"

	"github.com/airlockhq/airlock/store/storetest"
)

// fakeClock is the conformance suite's clock: it moves only when a test
// moves it, so a test can stand exactly at a deadline.
type fakeClock = storetest.FakeClock

func newFakeClock(start time.Time) *fakeClock { return storetest.NewFakeClock(start) }
