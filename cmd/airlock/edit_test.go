package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIApproveEdit (T37): `requests approve --arguments FILE` and
// `--edit` (a scripted $EDITOR on the exact arguments) approve the call
// with changed arguments: the request is denied, naming the new one, and
// the new one carries the edited bytes; an agent's edit is refused, and an
// editor that changes nothing records nothing.
func TestCLIApproveEdit(t *testing.T) {
	t.Parallel()
	s := startCLIServer(t)
	dir := t.TempDir()

	id := s.create(t, `{"tool":"run_sql","arguments":{"sql":"DELETE FROM users","db":"prod"}}`)
	file := filepath.Join(dir, "edited.json")
	if err := os.WriteFile(file, []byte(`{"sql":"DELETE FROM users WHERE id = 7","db":"prod"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.cli(t, s.agent, "requests", "approve", id, "--arguments", file, "--yes").want(t, exitAuth, "an agent editing")
	s.cli(t, s.reviewer, "requests", "approve", id, "--arguments", "-").want(t, exitUsage, "--arguments - without --yes")
	out := s.cli(t, s.reviewer, "requests", "approve", id, "--arguments", file, "--yes", "--note", "one row only").want(t, 0, "approve --arguments").stdout
	if !strings.Contains(out, "approved with changes: ") || !strings.Contains(out, id+" is denied and never runs") {
		t.Fatalf("approve --arguments said %q", out)
	}
	var orig struct {
		State    string `json:"state"`
		Decision struct {
			ReplacedBy string `json:"replaced_by"`
			Note       string `json:"note"`
		} `json:"decision"`
	}
	if err := json.Unmarshal([]byte(s.cli(t, s.reviewer, "requests", "show", id, "--json").want(t, 0, "show").stdout), &orig); err != nil {
		t.Fatal(err)
	}
	if orig.State != "denied" || orig.Decision.ReplacedBy == "" || orig.Decision.Note != "one row only" {
		t.Fatalf("the original: %+v", orig)
	}
	rep := s.cli(t, s.reviewer, "requests", "show", orig.Decision.ReplacedBy, "--json").want(t, 0, "show the replacement").stdout
	if !strings.Contains(rep, `"sql": "DELETE FROM users WHERE id = 7"`) || !strings.Contains(rep, `"derived_from": "`+id+`"`) ||
		!strings.Contains(rep, `"status": "approved"`) {
		t.Fatalf("the replacement: %s", rep)
	}

	// show, for people, names the replacement on the original and the
	// original on the replacement.
	if show := s.cli(t, s.reviewer, "requests", "show", id).want(t, 0, "show the original").stdout; !strings.Contains(show, orig.Decision.ReplacedBy+" (approved with changes") {
		t.Errorf("show of the original lacks its replacement:\n%s", show)
	}
	if show := s.cli(t, s.reviewer, "requests", "show", orig.Decision.ReplacedBy).want(t, 0, "show the replacement").stdout; !strings.Contains(show, id+" (approved with changes") {
		t.Errorf("show of the replacement lacks its original:\n%s", show)
	}

	// The adapter's claims, labelled as such.
	claimed := s.create(t, `{"tool":"run_sql","arguments":{"sql":"DROP TABLE t"},"reversibility":"irreversible","preview":{"type":"text","content":"drops table t (120 rows)"}}`)
	if show := s.cli(t, s.reviewer, "requests", "show", claimed).want(t, 0, "show claims").stdout; !strings.Contains(show, "The adapter's claim (unverified):\n  Reversibility: irreversible\n  Preview (text):\n    drops table t (120 rows)") {
		t.Errorf("show lacks the adapter's claims:\n%s", show)
	}

	// --edit: the editor is a command line run on the file, as git runs it.
	editor := filepath.Join(dir, "editor.sh")
	script := "#!/bin/sh\nsed -i 's/\"prod\"/\"staging\"/' \"$1\"\n"
	if err := os.WriteFile(editor, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	id2 := s.create(t, `{"tool":"run_sql","arguments":{"sql":"VACUUM","db":"prod"}}`)
	env := map[string]string{"AIRLOCK_URL": s.url, "AIRLOCK_TOKEN": s.reviewer, "EDITOR": editor}
	run := s.cliEnv(t, env, "requests", "approve", id2, "--edit", "--yes").want(t, 0, "approve --edit")
	if !strings.Contains(run.stdout, "approved with changes") {
		t.Fatalf("approve --edit said %q", run.stdout)
	}
	var r2 struct {
		Decision struct {
			ReplacedBy string `json:"replaced_by"`
		} `json:"decision"`
	}
	if err := json.Unmarshal([]byte(s.cli(t, s.reviewer, "requests", "show", id2, "--json").want(t, 0, "show").stdout), &r2); err != nil {
		t.Fatal(err)
	}
	if rep := s.cli(t, s.reviewer, "requests", "show", r2.Decision.ReplacedBy, "--json").stdout; !strings.Contains(rep, `"db": "staging"`) {
		t.Fatalf("the replacement of --edit: %s", rep)
	}

	// An editor that changes nothing records nothing.
	id3 := s.create(t, `{"tool":"run_sql","arguments":{"sql":"SELECT 1"}}`)
	env["EDITOR"] = "true"
	s.cliEnv(t, env, "requests", "approve", id3, "--edit", "--yes").want(t, exitUsage, "an unchanged edit")
	if show := s.cli(t, s.reviewer, "requests", "show", id3, "--json").stdout; !strings.Contains(show, `"state": "pending"`) {
		t.Fatalf("after an unchanged edit: %s", show)
	}
}
