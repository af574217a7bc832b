package sqlcore

import (
	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/store"
)

// RecordAttempts records each attempt of ps, in order, with record, which
// gets the attempt as JSON (store.AttemptsJSON) and the endpoints whose
// failing mark the batch has cleared so far. It stops at the first error.
func RecordAttempts(ps []store.AttemptParams, attempts []string, record func(p store.AttemptParams, attempt string, cleared FailingMarks) (airlock.Delivery, error)) ([]airlock.Delivery, error) {
	out := make([]airlock.Delivery, len(ps))
	cleared := FailingMarks{}
	for i, p := range ps {
		d, err := record(p, attempts[i], cleared)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// FailingMarks are the endpoints whose failing mark a transaction has
// cleared with no failure since: a batch of successes clears it once.
type FailingMarks map[string]bool

// Delivered records a success at endpoint id: clear, the driver's
// statement that clears the endpoint's failing mark, runs unless this
// batch has cleared it already.
func (m FailingMarks) Delivered(id string, clear func() error) error {
	if m[id] {
		return nil
	}
	err := clear()
	m[id] = err == nil
	return err
}

// Failed records a failure at endpoint id: its next success clears its
// mark again.
func (m FailingMarks) Failed(id string) { m[id] = false }
