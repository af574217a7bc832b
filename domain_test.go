package airlock_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

func TestErrorCode(t *testing.T) {
	t.Parallel()
	invalid := airlock.Invalid("tool", "tool is required")
	tests := []struct {
		name string
		err  error
		want airlock.Code
	}{
		{"no error has no code", nil, ""},
		{"an *Error has its code", invalid, airlock.CodeInvalidRequest},
		{"a conflict has its code", airlock.Conflict(airlock.CodeNotPending, airlock.StateDenied, "request is denied"), airlock.CodeNotPending},
		{"a wrapped *Error keeps its code", fmt.Errorf("create: %w", invalid), airlock.CodeInvalidRequest},
		{"a twice-wrapped *Error keeps its code", fmt.Errorf("a: %w", fmt.Errorf("b: %w", airlock.NotFound("request", "apr_1"))), airlock.CodeNotFound},
		{"a joined *Error keeps its code", errors.Join(errors.New("other"), airlock.Errorf(airlock.CodeRateLimited, "slow down")), airlock.CodeRateLimited},
		{"ErrNotFound is not_found", airlock.ErrNotFound, airlock.CodeNotFound},
		{"a plain error is internal", errors.New("disk on fire"), airlock.CodeInternal},
		{"a wrapped plain error is internal", fmt.Errorf("x: %w", context.Canceled), airlock.CodeInternal},
		{"an error formatted with %v loses its code", fmt.Errorf("x: %v", invalid), airlock.CodeInternal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := airlock.ErrorCode(tc.err); got != tc.want {
				t.Fatalf("ErrorCode(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

func TestErrorConstructors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  *airlock.Error
		want airlock.Error
	}{
		{"Invalid names the field", airlock.Invalid("note", "note must be at most %d bytes", 4000),
			airlock.Error{Code: airlock.CodeInvalidRequest, Field: "note", Message: "note must be at most 4000 bytes"}},
		{"Conflict names the state that won", airlock.Conflict(airlock.CodeNotPending, airlock.StateExpired, "request is %s", "expired"),
			airlock.Error{Code: airlock.CodeNotPending, State: airlock.StateExpired, Message: "request is expired"}},
		{"NotFound names what was missing", airlock.NotFound("request", "apr_x"),
			airlock.Error{Code: airlock.CodeNotFound, Message: `request "apr_x" not found`}},
		{"Errorf formats", airlock.Errorf(airlock.CodeForbidden, "only %s may decide", "reviewers"),
			airlock.Error{Code: airlock.CodeForbidden, Message: "only reviewers may decide"}},
	}
	for _, tc := range tests {
		if *tc.err != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, *tc.err, tc.want)
		}
		if tc.err.Error() != tc.want.Message {
			t.Errorf("%s: Error() = %q, want %q", tc.name, tc.err.Error(), tc.want.Message)
		}
	}
	if got := (&airlock.Error{Code: airlock.CodeRateLimited}).Error(); got != "rate_limited" {
		t.Errorf("an error without a message reads %q, want its code", got)
	}
}

// TestUnavailable checks that an unavailable error keeps the store's error
// as its cause: the log shows it (Error), errors.Is finds it, and the
// message alone is what callers read.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	cause := fmt.Errorf("sqlite: request apr_x: %w", io.ErrShortWrite)
	err := airlock.Unavailable(cause, "the disk is %s", "full")
	if err.Code != airlock.CodeUnavailable || err.Message != "the disk is full; retry in 2s" {
		t.Errorf("Unavailable = %+v, want code unavailable and the message saying when to retry", err)
	}
	if !errors.Is(err, io.ErrShortWrite) {
		t.Errorf("errors.Is does not find the cause in %v", err)
	}
	if got, want := err.Error(), "the disk is full; retry in 2s: sqlite: request apr_x: short write"; got != want {
		t.Errorf("Error() = %q, want %q (the message, then the cause, for the log)", got, want)
	}
	if airlock.ErrorCode(fmt.Errorf("create: %w", err)) != airlock.CodeUnavailable {
		t.Errorf("a wrapped unavailable error lost its code")
	}
}

// The codes of docs/protocol.md's error table, each once.
func TestCodes(t *testing.T) {
	t.Parallel()
	want := []string{"invalid_request", "unauthorized", "forbidden", "not_found", "idempotency_conflict",
		"not_pending", "deadline_passed", "not_approved", "approval_expired", "already_executed",
		"command_failed", "invalid_token", "already_used", "payload_too_large", "rate_limited", "unavailable", "internal"}
	if len(airlock.Codes) != len(want) {
		t.Fatalf("%d codes, want %d", len(airlock.Codes), len(want))
	}
	for i, c := range airlock.Codes {
		if string(c) != want[i] {
			t.Errorf("code %d = %q, want %q", i, c, want[i])
		}
	}
}

func TestStates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		state           airlock.State
		valid, terminal bool
	}{
		{airlock.StatePending, true, false},
		{airlock.StateApproved, true, true},
		{airlock.StateDenied, true, true},
		{airlock.StateExpired, true, true},
		{airlock.StateCancelled, true, true},
		{"", false, false},
		{"Pending", false, false},
		{"APPROVED", false, false},
		{"canceled", false, false},
		{"claimed", false, false},
	}
	for _, tc := range tests {
		if tc.state.Valid() != tc.valid || tc.state.Terminal() != tc.terminal {
			t.Errorf("%q: Valid %v Terminal %v, want %v %v", tc.state, tc.state.Valid(), tc.state.Terminal(), tc.valid, tc.terminal)
		}
	}
	if len(airlock.States) != 5 || airlock.States[0] != airlock.StatePending {
		t.Errorf("States = %v, want the five states, pending first", airlock.States)
	}
	for _, s := range airlock.States {
		if !s.Valid() {
			t.Errorf("States lists invalid %q", s)
		}
	}
}

func TestStateEvent(t *testing.T) {
	t.Parallel()
	for state, want := range map[airlock.State]airlock.EventType{
		airlock.StatePending:   airlock.EventRequestCreated,
		airlock.StateApproved:  airlock.EventRequestApproved,
		airlock.StateDenied:    airlock.EventRequestDenied,
		airlock.StateExpired:   airlock.EventRequestExpired,
		airlock.StateCancelled: airlock.EventRequestCancelled,
	} {
		if got := airlock.StateEvent(state); got != want {
			t.Errorf("StateEvent(%q) = %q, want %q", state, got, want)
		}
	}
}

func TestKindsRolesAndExecutionStatuses(t *testing.T) {
	t.Parallel()
	kinds := map[airlock.Kind]bool{
		"tool_call": true, "work_change": true, "memory_change": true, "life_change": true, "agent_request": true,
		"": false, "Tool_Call": false, "command": false,
	}
	for k, want := range kinds {
		if k.Valid() != want {
			t.Errorf("Kind(%q).Valid() = %v, want %v", k, !want, want)
		}
	}
	if len(airlock.Kinds) != 5 {
		t.Errorf("Kinds = %v, want five", airlock.Kinds)
	}
	roles := map[airlock.Role]bool{"admin": true, "agent": true, "reviewer": true, "verifier": true, "auditor": true, "": false, "Admin": false, "root": false}
	for r, want := range roles {
		if r.Valid() != want {
			t.Errorf("Role(%q).Valid() = %v, want %v", r, !want, want)
		}
	}
	// Only the verifier and the auditor are limited to their one power;
	// only the auditor and the admin read the audit log.
	for _, r := range []airlock.Role{airlock.RoleAdmin, airlock.RoleAgent, airlock.RoleReviewer, airlock.RoleVerifier, airlock.RoleAuditor} {
		limited := r == airlock.RoleVerifier || r == airlock.RoleAuditor
		reads := r == airlock.RoleAuditor || r == airlock.RoleAdmin
		if r.Limited() != limited || r.MayReadAuditLog() != reads {
			t.Errorf("Role(%q): Limited %v, MayReadAuditLog %v; want %v, %v", r, r.Limited(), r.MayReadAuditLog(), limited, reads)
		}
	}
	statuses := map[airlock.ExecutionStatus]bool{"succeeded": true, "failed": true, "unknown": true, "claimed": false, "": false}
	for s, want := range statuses {
		if s.Valid() != want {
			t.Errorf("ExecutionStatus(%q).Valid() = %v, want %v", s, !want, want)
		}
	}
}

// Reviewers and admins see every request and instance; an agent sees only
// its own; anyone else sees nothing (docs/protocol.md S3).
func TestCanRead(t *testing.T) {
	t.Parallel()
	agentA := airlock.Caller{Token: airlock.Token{ID: "tok_a", Role: airlock.RoleAgent}}
	agentB := airlock.Caller{Token: airlock.Token{ID: "tok_b", Role: airlock.RoleAgent}}
	reviewer := airlock.Caller{Token: airlock.Token{ID: "tok_r", Role: airlock.RoleReviewer}}
	admin := airlock.Caller{Token: airlock.Token{ID: "tok_adm", Role: airlock.RoleAdmin}}
	noRole := airlock.Caller{Token: airlock.Token{ID: "tok_a"}}
	unknownRole := airlock.Caller{Token: airlock.Token{ID: "tok_a", Role: "root"}}
	zeroAgent := airlock.Caller{Token: airlock.Token{Role: airlock.RoleAgent}}
	tests := []struct {
		name   string
		caller airlock.Caller
		owner  string
		want   bool
	}{
		{"an agent reads its own", agentA, "tok_a", true},
		{"an agent does not read another agent's", agentB, "tok_a", false},
		{"a reviewer reads any", reviewer, "tok_a", true},
		{"an admin reads any", admin, "tok_a", true},
		{"a caller without a role reads nothing, even with the owner's ID", noRole, "tok_a", false},
		{"a caller with an unknown role reads nothing", unknownRole, "tok_a", false},
		{"an agent without an ID does not read an unowned row", zeroAgent, "", false},
		{"an agent does not read an unowned row", agentA, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := airlock.CanReadRequest(tc.caller, airlock.Request{ID: "apr_1", OwnerID: tc.owner}); got != tc.want {
				t.Errorf("CanReadRequest = %v, want %v", got, tc.want)
			}
			if got := airlock.CanReadInstance(tc.caller, airlock.Instance{ID: "ins_1", OwnerID: tc.owner}); got != tc.want {
				t.Errorf("CanReadInstance = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTokenHasScope(t *testing.T) {
	t.Parallel()
	tok := airlock.Token{Scopes: []string{airlock.ScopeWorkWrite}}
	if !tok.HasScope("work:write") || tok.HasScope("work:read") || (airlock.Token{}).HasScope("work:write") {
		t.Fatal("HasScope does not match scopes exactly")
	}
}

var idPattern = regexp.MustCompile(`^[a-z]{3}_[a-z2-7]{24}$`)

// Clock IDs look like any other, are unique, and those made in the same
// second share their leading characters, which keeps them together in an
// index.
func TestNewClockID(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	seen := map[string]bool{}
	for i := range 2000 {
		id := airlock.NewClockID(airlock.PrefixDelivery, at.Add(time.Duration(i)*time.Millisecond/4))
		if !strings.HasPrefix(id, airlock.PrefixDelivery) || !idPattern.MatchString(id) {
			t.Fatalf("NewClockID = %q, want %s followed by 24 base32 characters", id, airlock.PrefixDelivery)
		}
		if seen[id] {
			t.Fatalf("NewClockID repeated %q", id)
		}
		seen[id] = true
	}
	a := airlock.NewClockID(airlock.PrefixDelivery, at)
	b := airlock.NewClockID(airlock.PrefixDelivery, at.Add(999*time.Millisecond))
	c := airlock.NewClockID(airlock.PrefixDelivery, at.Add(time.Hour))
	if n := len(airlock.PrefixDelivery) + 6; a[:n] != b[:n] || a[:n] == c[:n] {
		t.Fatalf("IDs a second apart %q, %q and an hour apart %q: want the first two, and only them, to share %d characters", a, b, c, n)
	}
}

// Request IDs made within a second share their leading characters (the
// clock's milliseconds, airlock.NewClockID), so that requests made
// together, which mostly fall due together, keep their index entries on
// neighbouring pages (docs/performance.md, "Expiry's sweeps").
func TestNewRequestID(t *testing.T) {
	t.Parallel()
	// 7 base32 characters are the clock's top 35 bits of 48: windows of
	// 8,192 ms. This second lies within one.
	at := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	if at.UnixMilli()%8192 > 8192-1000 {
		t.Fatalf("the test's second %s crosses a window of 8,192 ms: choose another", at)
	}
	first := airlock.NewRequestID(at)
	n := len(airlock.PrefixRequest) + 7
	seen := map[string]bool{}
	for i := range 1000 {
		id := airlock.NewRequestID(at.Add(time.Duration(i) * time.Millisecond))
		if !strings.HasPrefix(id, airlock.PrefixRequest) || !idPattern.MatchString(id) {
			t.Fatalf("NewRequestID = %q, want %s followed by 24 base32 characters", id, airlock.PrefixRequest)
		}
		if id[:n] != first[:n] || seen[id] {
			t.Fatalf("request ID %q, made %d ms after %q: want it new, and the first %d characters shared", id, i, first, n)
		}
		seen[id] = true
	}
}

// IDs are opaque, prefixed and unique.
func TestNewID(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{airlock.PrefixRequest, airlock.PrefixInstance, airlock.PrefixSession, airlock.PrefixToken} {
		seen := map[string]bool{}
		for range 2000 {
			id := airlock.NewID(prefix)
			if !strings.HasPrefix(id, prefix) || !idPattern.MatchString(id) {
				t.Fatalf("NewID(%q) = %q, want %s followed by 24 base32 characters", prefix, id, prefix)
			}
			if seen[id] {
				t.Fatalf("NewID(%q) repeated %q", prefix, id)
			}
			seen[id] = true
		}
	}
	want := map[string]string{"apr_": airlock.PrefixRequest, "ins_": airlock.PrefixInstance, "ses_": airlock.PrefixSession, "tok_": airlock.PrefixToken}
	for w, got := range want {
		if w != got {
			t.Errorf("prefix %q, want %q", got, w)
		}
	}
}

func TestNewTokenSecret(t *testing.T) {
	t.Parallel()
	secretPattern := regexp.MustCompile(`^airlock_[a-z2-7]{52}$`) // 256 bits
	seen := map[string]bool{}
	for range 1000 {
		s := airlock.NewTokenSecret()
		if !secretPattern.MatchString(s) {
			t.Fatalf("secret %q does not look like airlock_ + 52 base32 characters", s)
		}
		if seen[s] {
			t.Fatalf("secret repeated")
		}
		seen[s] = true
	}
}

// Only the SHA-256 of a secret is stored.
func TestHashSecret(t *testing.T) {
	t.Parallel()
	// FIPS 180-2 test vector.
	if got := hex.EncodeToString(airlock.HashSecret("abc")); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("HashSecret(abc) = %s", got)
	}
	a, b := airlock.NewTokenSecret(), airlock.NewTokenSecret()
	if len(airlock.HashSecret(a)) != sha256.Size || string(airlock.HashSecret(a)) == string(airlock.HashSecret(b)) {
		t.Fatal("different secrets hash alike, or the hash is not 32 bytes")
	}
	if first, again := airlock.HashSecret(a), airlock.HashSecret(a); string(first) != string(again) {
		t.Fatal("HashSecret is not deterministic")
	}
}

// TestSummaryArgumentsHead checks that a summary's head and cut mark are
// those of the whole arguments, although Summary reads only their start.
func TestSummaryArgumentsHead(t *testing.T) {
	t.Parallel()
	for name, args := range map[string]string{
		"empty":                 "",
		"short":                 `{"a":1}`,
		"200 characters":        strings.Repeat("a", airlock.ArgumentsHeadLen),
		"201 characters":        strings.Repeat("a", airlock.ArgumentsHeadLen+1),
		"200 wide, then more":   strings.Repeat("😀", airlock.ArgumentsHeadLen) + "a",
		"200 wide, exactly":     strings.Repeat("😀", airlock.ArgumentsHeadLen),
		"a mebibyte":            strings.Repeat("é", 1<<19),
		"wide after the head":   strings.Repeat("a", 199) + strings.Repeat("😀", 1000),
		"broken bytes in front": "\xff\xfe" + strings.Repeat("b", 900),
	} {
		wantHead, wantCut := airlock.ArgumentsHead(args)
		s := airlock.Request{Arguments: json.RawMessage(args)}.Summary()
		if s.ArgumentsHead != wantHead || s.ArgumentsCut != wantCut {
			t.Errorf("%s: head %q cut %v, want %q cut %v", name, s.ArgumentsHead, s.ArgumentsCut, wantHead, wantCut)
		}
	}
}

// TestRequester: a tool call is from its instance; an MCP request from its
// agent, never from the default instance's "mcp", with its session's name
// when made in one.
func TestRequester(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind            airlock.Kind
		instance, agent string
		inSession       bool
		want            string
	}{
		{airlock.KindToolCall, "laptop", "claude bot", false, "laptop"},
		{airlock.KindWorkChange, "mcp", "release bot", false, "release bot"},
		{airlock.KindAgentRequest, "Release 2.4", "release bot", true, "release bot (session Release 2.4)"},
	} {
		if got := airlock.Requester(tc.kind, tc.instance, tc.agent, tc.inSession); got != tc.want {
			t.Errorf("Requester(%s, %q, %q, %v) = %q, want %q", tc.kind, tc.instance, tc.agent, tc.inSession, got, tc.want)
		}
		if tc.kind.AgentWrote() == (tc.kind == airlock.KindToolCall) {
			t.Errorf("%s: AgentWrote %v", tc.kind, tc.kind.AgentWrote())
		}
	}
}
