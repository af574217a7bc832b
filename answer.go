package airlock

import (
	"bytes"
	"fmt"
)

// What an adapter may believe of the server's answers. An adapter runs a
// call only on a claimed execution of the request it asked about: a
// success status proves nothing by itself, since a broken proxy or a
// hostile server can answer 200 with an empty body, a page of HTML or
// another request (docs/adapters.md, "What an adapter believes").

// CheckClaimed checks the answer to the claim of request id: it must be
// that request, approved, with its execution just claimed. gotID, state
// and exec are what the answer says ("" for no execution).
func CheckClaimed(id, gotID string, state State, exec ExecutionStatus) error {
	switch {
	case id == "":
		return fmt.Errorf("no request to claim")
	case gotID != id:
		return fmt.Errorf("the answer to the claim of %s is about request %q", id, gotID)
	case state != StateApproved:
		return fmt.Errorf("the answer to the claim of %s says it is %q, not approved", id, state)
	case exec != ExecClaimed:
		return fmt.Errorf("the answer to the claim of %s shows no claimed execution (execution %q)", id, exec)
	}
	return nil
}

// CheckAsked checks that the request an answer carries is the call an
// adapter asked about: the same tool and the same arguments (as JSON
// values; absent arguments are {}). A request with another call is
// another request, whatever its id. A request whose payloads the server's
// retention purged (purged) has no arguments left to compare: it cannot
// be the call, and the error says why, so the adapter's user asks anew
// instead of suspecting the server.
func CheckAsked(tool string, args []byte, gotID, gotTool string, gotArgs []byte, purged bool) error {
	if gotID == "" {
		return fmt.Errorf("the answer names no request")
	}
	if gotTool != tool {
		return fmt.Errorf("the answer is about request %s of tool %q, not %q", gotID, gotTool, tool)
	}
	want, err := canonicalArgs(args)
	if err != nil {
		return fmt.Errorf("the call's arguments: %w", err)
	}
	if purged {
		return fmt.Errorf("the answer is about request %s, whose arguments the server's retention has purged, so it cannot be this call; ask again with a new idempotency key", gotID)
	}
	got, err := canonicalArgs(gotArgs)
	if err != nil || !bytes.Equal(want, got) {
		return fmt.Errorf("the answer is about request %s, whose arguments are not the call's", gotID)
	}
	return nil
}

func canonicalArgs(b []byte) ([]byte, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte(`{}`)
	}
	return Canonical(b)
}
