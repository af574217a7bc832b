package airlock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}

// checkOutcome fails t unless err matches want: nil want means the input must
// be accepted; otherwise err must be an *airlock.Error with code
// invalid_request whose message contains every string in want.
func checkOutcome(t *testing.T, err error, want []string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("refused, want accepted: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("accepted, want refused with %q", want)
	}
	var e *airlock.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *airlock.Error", err, err)
	}
	if e.Code != airlock.CodeInvalidRequest {
		t.Fatalf("code %q, want %q (%v)", e.Code, airlock.CodeInvalidRequest, err)
	}
	for _, w := range want {
		if !strings.Contains(e.Message, w) {
			t.Fatalf("message %q does not contain %q", e.Message, w)
		}
	}
}

// refusedWith says what an error message must contain; accepted is nil.
func refusedWith(parts ...string) []string {
	if parts == nil {
		return []string{}
	}
	return parts
}

var accepted []string
