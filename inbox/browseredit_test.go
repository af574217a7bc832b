package inbox

import (
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/chromedp/chromedp"
)

// TestBrowserEdit (T37): a pending tool call shows the adapter's claims
// (preview, reversibility) as such; carrying its tool's input schema, "Edit and approve" opens an editor seeded with the exact
// arguments; invalid JSON and arguments the schema refuses are flagged
// and not sent; a valid edit goes to a confirmation showing the diff;
// confirming lands on the new request, approved, with the diff and a link
// to the original, whose page says it was denied and links back. At 390
// and 1440 px.
func TestBrowserEdit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inst := b.instance(t, "sql-adapter")
	tb := b.signedInTab(t, b.reviewer)
	tb.phoneAndDesktop(t, func(t *testing.T, width int64) {
		schema := map[string]any{"type": "object", "required": []any{"sql"},
			"properties": map[string]any{"sql": map[string]any{"type": "string"}, "limit": map[string]any{"type": "integer"}}}
		status, out := b.createREST(t, inst, map[string]any{"tool": "run_sql", "timeout": "30m",
			"arguments":     map[string]any{"sql": "DELETE FROM users", "limit": 10},
			"context":       map[string]any{"adapter": "airlock gate", "input_schema": schema},
			"preview":       map[string]any{"type": "diff", "content": "--- users\n+++ users\n-alice\n-bob\n"},
			"reversibility": "irreversible"})
		if status != 201 {
			t.Fatalf("create over REST: %d %v", status, out)
		}
		id := out["id"].(string)
		tb.open("/requests/" + id)
		// The adapter's claims, labelled as such, beside the facts.
		if got := tb.text("#adapter-claims h2"); got != airlock.AdapterClaim {
			t.Errorf("claims heading %q", got)
		}
		if got := tb.text("#reversibility"); got != "irreversible" {
			t.Errorf("reversibility %q", got)
		}
		if n := eval[int](tb, `document.querySelectorAll("#adapter-preview .del").length`); n != 2 {
			t.Errorf("%d removed lines marked in the preview, want 2", n)
		}
		eval[any](tb, `document.querySelector("#edit summary").click()`)
		if got, want := eval[string](tb, `document.getElementById("edit-arguments").value`), string(b.get(t, id).Arguments); got != want {
			t.Fatalf("the editor's seed %q; want the exact arguments %q", got, want)
		}
		setArgs := func(v string) {
			t.Helper()
			tb.do(chromedp.SetValue(chromedp.ID("edit-arguments"), v))
			eval[any](tb, `document.getElementById("edit-arguments").dispatchEvent(new Event("input"))`)
		}
		for _, bad := range []struct{ args, says string }{
			{`{"sql": "DELETE FROM users WHERE id = 7",}`, "Not valid JSON"},
			{`["DELETE"]`, "must be a JSON object"},
			{`{"limit": 1}`, `requires "sql"`},
			{`{"sql": "SELECT 1", "limit": "ten"}`, `"limit" must be integer`},
		} {
			setArgs(bad.args)
			if got := tb.text("#edit-check"); !strings.Contains(got, bad.says) {
				t.Errorf("editor with %s says %q; want %q", bad.args, got, bad.says)
			}
			// A sent form would leave the page: the editor would be gone or
			// seeded afresh.
			eval[any](tb, `document.getElementById("edit-submit").click()`)
			if got := eval[string](tb, `(document.getElementById("edit-arguments") || {}).value || ""`); got != bad.args || !strings.HasSuffix(tb.location(), "/requests/"+id) {
				t.Fatalf("an invalid edit was sent (now at %s, editor %q)", tb.location(), got)
			}
		}
		setArgs(`{"limit": 1, "sql": "DELETE FROM users WHERE id = 7"}`)
		if got := tb.text("#edit-check"); !strings.Contains(got, "matching the tool's input schema") {
			t.Errorf("a valid edit: %q", got)
		}
		tb.do(chromedp.SetValue(chromedp.ID("edit-note"), "one row only"))
		eval[any](tb, `document.getElementById("edit-submit").click()`)
		tb.waitFor(`document.body.dataset.page === "confirm"`)
		diff := squeeze(tb.text("#edit-diff"))
		for _, want := range []string{`− "limit": 10,`, `+ "limit": 1,`, `− "sql": "DELETE FROM users"`, `+ "sql": "DELETE FROM users WHERE id = 7"`} {
			if !strings.Contains(diff, want) {
				t.Errorf("the confirmation's diff lacks %q:\n%s", want, diff)
			}
		}
		if got := b.get(t, id); got.State != airlock.StatePending {
			t.Fatalf("before confirming the request is %s", got.State)
		}
		if width == 390 {
			tb.screenshot("edit-confirm")
		}
		tb.do(chromedp.Click(chromedp.ID("confirm-ok")))
		tb.waitFor(`document.body.dataset.page === "request" && document.getElementById("derived-from") !== null`)
		if got := tb.text("#flash"); !strings.Contains(got, "Approved with changes.") {
			t.Errorf("flash %q", got)
		}
		if got := tb.text("#derived-from"); got != id {
			t.Errorf("derived-from link %q, want %s", got, id)
		}
		if got := squeeze(tb.text("#edit-diff")); !strings.Contains(got, `+ "limit": 1,`) {
			t.Errorf("the new request's page lacks the diff: %q", got)
		}
		orig := b.get(t, id)
		if orig.State != airlock.StateDenied || orig.ReplacedBy == "" {
			t.Fatalf("the original is %s replaced by %q", orig.State, orig.ReplacedBy)
		}
		edited := b.get(t, orig.ReplacedBy)
		if edited.State != airlock.StateApproved || string(edited.Arguments) != `{"limit": 1, "sql": "DELETE FROM users WHERE id = 7"}` ||
			edited.Decision.Note != "one row only" {
			t.Fatalf("the new request: %s %s %q", edited.State, edited.Arguments, edited.Decision.Note)
		}
		if width == 1440 {
			tb.screenshot("edit-approved")
		}
		tb.open("/requests/" + id)
		if got := tb.text("#replaced-by"); got != edited.ID {
			t.Errorf("replaced-by link %q, want %s", got, edited.ID)
		}
		if got := tb.text("#edit-link"); !strings.Contains(got, "denied and never runs") {
			t.Errorf("the original's page: %q", got)
		}
		if n := eval[int](tb, `document.querySelectorAll("#edit-form, #approve-form").length`); n != 0 {
			t.Errorf("the denied original still offers %d decision forms", n)
		}
	})
}

// squeeze collapses each run of spaces to one, so that a diff's lines
// read the same whatever their indentation.
func squeeze(s string) string {
	for strings.Contains(s, "  ") {
		s = strings.ReplaceAll(s, "  ", " ")
	}
	return s
}
