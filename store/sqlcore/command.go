package sqlcore

import (
	"database/sql"
	"errors"

	"github.com/airlockhq/airlock"
)

// Fault points of the drivers' WithFaultHook: where, inside the
// transaction that records an approval of a command proposal, a test may
// make it fail. Both drivers have the same points, so one test of T12
// (docs/reliability.md) holds for either store.
const (
	// FaultAfterApproval is after the approval is written and before the
	// command's effect.
	FaultAfterApproval = "decide.after_approval"
	// FaultAfterEffect is after the command's effect and before its result
	// is written on the request.
	FaultAfterEffect = "decide.after_effect"
)

// FaultError is an error a fault hook injected.
type FaultError struct {
	Point string
	Err   error
}

func (e *FaultError) Error() string { return "fault injected at " + e.Point + ": " + e.Err.Error() }
func (e *FaultError) Unwrap() error { return e.Err }

// InjectFault calls hook, when one is installed, at point, and returns its
// error as a *FaultError.
func InjectFault(hook func(point string) error, point string) error {
	if hook == nil {
		return nil
	}
	if err := hook(point); err != nil {
		return &FaultError{Point: point, Err: err}
	}
	return nil
}

// ApplyCommand runs the effect of the command the approved request r
// proposes, between the two fault points, and returns the detail its
// result records. workMove is the driver's effect of a work_move; any
// other method is unknown. An error rolls the approval back.
func ApplyCommand(r airlock.Request, hook func(point string) error, workMove func() (string, error)) (string, error) {
	if err := InjectFault(hook, FaultAfterApproval); err != nil {
		return "", err
	}
	var (
		detail string
		err    error
	)
	switch r.Proposal.Command.Method {
	case airlock.MethodWorkMove:
		detail, err = workMove()
	default:
		err = airlock.UnknownCommand(r)
	}
	if err != nil {
		return "", err
	}
	return detail, InjectFault(hook, FaultAfterEffect)
}

// MoveLost is the error of a work move whose compare-and-set changed no
// row, from the read of its item after it: err is that read's error
// (sql.ErrNoRows, or an error wrapping it, when the item is gone).
func MoveLost(m airlock.WorkMove, cur airlock.WorkItem, err error) error {
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return m.Lost(nil)
	case err != nil:
		return err
	}
	return m.Lost(&cur)
}
