package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/testkit"
	"github.com/airlockhq/airlock/provider"
	"github.com/airlockhq/airlock/store"
	"github.com/airlockhq/airlock/store/sqlite"
	"github.com/airlockhq/airlock/store/storetest"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}

// epoch is where fake clocks start.
var epoch = time.Date(2030, time.March, 4, 5, 6, 7, 0, time.UTC)

// bundle is what setup gives a test: the MCP server over a provider over a
// real SQLite store, on a fake clock, with callers of each kind.
type bundle struct {
	svc   *provider.Service
	store *sqlite.Store
	clock *storetest.FakeClock
	srv   *Server

	admin    airlock.Caller
	agent    airlock.Caller // principal alice, scope work:write
	noScope  airlock.Caller // principal alice, no scopes
	other    airlock.Caller // principal carol, scope work:write
	reviewer airlock.Caller // principal bob
	secrets  map[string]string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return setupWith(t, nil)
}

// setupWith is setup with the provider over wrap(store), for tests that
// put a faulty store between the provider and SQLite; nil means none.
func setupWith(t testing.TB, wrap func(*sqlite.Store) store.Store) *bundle {
	t.Helper()
	b := &bundle{clock: storetest.NewFakeClock(epoch), secrets: map[string]string{}}
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "airlock.db"), sqlite.WithClock(b.clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	b.store = db
	var under store.Store = db
	if wrap != nil {
		under = wrap(db)
	}
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	b.svc, err = provider.New(provider.Config{Store: under, Clock: b.clock, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	secret := "bootstrap-secret-for-tests-" + airlock.NewID("")
	if err := b.svc.BootstrapAdmin(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	if b.admin, err = b.svc.Authenticate(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	b.agent = b.mint(t, airlock.RoleAgent, "alice", airlock.ScopeWorkWrite)
	b.noScope = b.mint(t, airlock.RoleAgent, "alice")
	b.other = b.mint(t, airlock.RoleAgent, "carol", airlock.ScopeWorkWrite)
	b.reviewer = b.mint(t, airlock.RoleReviewer, "bob")
	b.srv = New(Config{Service: b.svc, Logger: discard})
	return b
}

// mint creates a token and authenticates with its secret, as a real
// caller would.
func (b *bundle) mint(t testing.TB, role airlock.Role, principal string, scopes ...string) airlock.Caller {
	t.Helper()
	_, secret, err := b.svc.CreateToken(t.Context(), b.admin, airlock.NewTokenInput{
		Name: string(role) + " of " + principal, Role: role, Principal: principal, Scopes: scopes,
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.svc.Authenticate(t.Context(), secret)
	if err != nil {
		t.Fatal(err)
	}
	b.secrets[c.ID] = secret
	return c
}

// setupBoard is setup with a board holding one item (b.board) and the
// agent connected.
func setupBoard(t *testing.T) (*bundle, airlock.WorkItem, *client) {
	t.Helper()
	b := setup(t)
	item := b.board(t)
	return b, item, b.connect(t, b.agent)
}

// client is a Go SDK client session connected in memory as one caller,
// with the output schemas tools/list gave, to check every result against.
type client struct {
	t       *testing.T
	cs      *mcp.ClientSession
	outputs map[string]*jsonschema.Resolved
}

// connect connects an SDK client to b's server in memory, as c.
func (b *bundle) connect(t *testing.T, c airlock.Caller) *client {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := b.srv.Connect(t.Context(), st, c)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return newClient(t, cs)
}

func newClient(t *testing.T, cs *mcp.ClientSession) *client {
	t.Helper()
	cl := &client{t: t, cs: cs, outputs: map[string]*jsonschema.Resolved{}}
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		var s jsonschema.Schema
		remarshal(t, tool.OutputSchema, &s)
		r, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: output schema does not resolve: %v", tool.Name, err)
		}
		cl.outputs[tool.Name] = r
	}
	return cl
}

// call calls a tool with args (any JSON-marshalable value; a string is
// sent as raw JSON) and returns the result. A protocol error fails the test.
func (cl *client) call(name string, args any) *mcp.CallToolResult {
	cl.t.Helper()
	if s, ok := args.(string); ok {
		args = json.RawMessage(s)
	}
	res, err := cl.cs.CallTool(cl.t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		cl.t.Fatalf("%s: protocol error: %v", name, err)
	}
	return res
}

// ok calls a tool that must succeed, checks its structured result against
// the tool's output schema and its text against the structured result, and
// returns the structured result.
func (cl *client) ok(name string, args any) map[string]any {
	cl.t.Helper()
	res := cl.call(name, args)
	if res.IsError {
		cl.t.Fatalf("%s(%v) failed: %s", name, args, text(res))
	}
	var out map[string]any
	remarshal(cl.t, res.StructuredContent, &out)
	if err := cl.outputs[name].Validate(out); err != nil {
		cl.t.Errorf("%s: structuredContent does not match the output schema: %v\n%v", name, err, out)
	}
	if len(res.Content) != 2 {
		cl.t.Fatalf("%s: want a summary and the JSON as content, got %d blocks", name, len(res.Content))
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(res.Content[1].(*mcp.TextContent).Text), &fromText); err != nil {
		cl.t.Fatalf("%s: the second content block is not the JSON result: %v", name, err)
	}
	if a, b := mustJSON(cl.t, fromText), mustJSON(cl.t, out); a != b {
		cl.t.Errorf("%s: text and structured results differ:\n%s\n%s", name, a, b)
	}
	return out
}

// fail calls a tool that must fail with isError, and returns its text.
func (cl *client) fail(name string, args any) string {
	cl.t.Helper()
	res := cl.call(name, args)
	if !res.IsError {
		cl.t.Fatalf("%s(%v) succeeded; want an isError result: %s", name, args, text(res))
	}
	if res.StructuredContent != nil {
		cl.t.Errorf("%s: an error result carries structuredContent %v", name, res.StructuredContent)
	}
	return text(res)
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func remarshal(t *testing.T, from, to any) {
	t.Helper()
	b, err := json.Marshal(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, to); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// str reads a string at a dotted path of a decoded JSON object.
func str(m map[string]any, path string) string {
	v := get(m, path)
	s, _ := v.(string)
	return s
}

func get(m map[string]any, path string) any {
	var v any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

// board creates columns todo, doing and done and one item in todo.
func (b *bundle) board(t *testing.T) airlock.WorkItem {
	t.Helper()
	ctx := t.Context()
	for _, c := range [][2]string{{"todo", "To do"}, {"doing", "Doing"}, {"done", "Done"}} {
		if _, err := b.svc.CreateColumn(ctx, b.reviewer, c[0], c[1]); err != nil {
			t.Fatal(err)
		}
	}
	w, err := b.svc.CreateWorkItem(ctx, b.reviewer, "Write the release notes", "todo")
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// decide records a reviewer's decision through the provider, as the inbox
// or REST would.
func (b *bundle) decide(t *testing.T, id string, in airlock.DecisionInput) (airlock.Request, error) {
	t.Helper()
	return b.svc.Decide(t.Context(), b.reviewer, id, in)
}

// requestArgs returns valid approval_request arguments, changed by edit.
func requestArgs(key string, edit func(m map[string]any)) map[string]any {
	m := map[string]any{
		"kind":           "agent_request",
		"title":          "May I tidy the release branch?",
		"proposal":       map[string]any{"mode": "advisory"},
		"idempotencyKey": key,
	}
	if edit != nil {
		edit(m)
	}
	return m
}

// logRecorder is a slog handler that keeps every record, for tests that
// check what was logged and at which level.
type logRecorder struct {
	mu      sync.Mutex
	records []logRecord
	changed chan struct{} // closed and replaced at each record
}

// logRecord is one kept record, its attributes as text.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func newLogRecorder() *logRecorder { return &logRecorder{changed: make(chan struct{})} }

func (l *logRecorder) logger() *slog.Logger { return slog.New(l) }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, rec)
	close(l.changed)
	l.changed = make(chan struct{})
	return nil
}

func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// await returns the first record that match accepts, waiting for it to be
// logged; the test fails if none is within a generous bound.
func (l *logRecorder) await(t *testing.T, what string, match func(logRecord) bool) logRecord {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		l.mu.Lock()
		for _, r := range l.records {
			if match(r) {
				l.mu.Unlock()
				return r
			}
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("never logged: %s; logged:\n%s", what, l)
		}
	}
}

// at returns the records logged at level or above.
func (l *logRecorder) at(level slog.Level) []logRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logRecord
	for _, r := range l.records {
		if r.level >= level {
			out = append(out, r)
		}
	}
	return out
}

func (l *logRecorder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range l.records {
		fmt.Fprintf(&b, "%s %q %v\n", r.level, r.msg, r.attrs)
	}
	return b.String()
}
