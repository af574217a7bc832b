package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/display"
)

// editedArguments returns the arguments `requests approve` approves
// instead of request id's: read from file (or standard input for "-"),
// or, with edit, typed in $VISUAL or $EDITOR, opened on the request's
// exact arguments (indented when they are one line). Unchanged arguments
// are refused: that is an approval, without --edit.
func (a *App) editedArguments(ctx context.Context, r *remote, id, file string, edit bool) (json.RawMessage, error) {
	var data []byte
	switch {
	case file == "-":
		b, err := io.ReadAll(io.LimitReader(a.Stdin, airlock.MaxBodyBytes+1))
		if err != nil {
			return nil, fmt.Errorf("read the arguments from standard input: %w", err)
		}
		data = b
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, usageErrorf("read the arguments: %v", err)
		}
		data = b
	default:
		c, err := r.client()
		if err != nil {
			return nil, err
		}
		q, err := c.GetRequest(ctx, id)
		if err != nil {
			return nil, apiError(err)
		}
		if data, err = a.runEditor(ctx, q); err != nil {
			return nil, err
		}
	}
	data = bytes.TrimSpace(data)
	if err := airlock.CheckEditedArguments(data); err != nil {
		return nil, usageErrorf("the edited arguments: %v", err)
	}
	return data, nil
}

// runEditor opens the editor on q's arguments and returns what was saved.
func (a *App) runEditor(ctx context.Context, q *client.ApprovalRequest) ([]byte, error) {
	if q.State != airlock.StatePending {
		return nil, &exitError{exitConflict, fmt.Errorf("%s is already %s: nothing was recorded", q.ID, q.State)}
	}
	editor := ""
	for _, k := range []string{"VISUAL", "EDITOR"} {
		if v, ok := a.LookupEnv(k); ok && strings.TrimSpace(v) != "" {
			editor = v
			break
		}
	}
	if editor == "" {
		editor = "vi"
	}
	dir, err := os.MkdirTemp("", "airlock-edit-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, q.ID+".json")
	seed := q.Arguments
	var pretty bytes.Buffer
	if !bytes.Contains(seed, []byte("\n")) && json.Indent(&pretty, seed, "", "  ") == nil {
		seed = pretty.Bytes()
	}
	if err := os.WriteFile(path, append(bytes.Clone(seed), '\n'), 0o600); err != nil {
		return nil, err
	}
	// The editor is a command line, as git runs it: "code --wait" works.
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", editor+` "$1"`, "airlock-edit", path)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, a.Stderr, a.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("the editor (%s) failed: %w; nothing was recorded", editor, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !airlock.Changed(airlock.ArgumentsDiff(q.Arguments, bytes.TrimSpace(data))) {
		return nil, usageErrorf("the arguments are unchanged: nothing was recorded (approve without --edit to approve them as they are)")
	}
	return data, nil
}

// printDiff writes an edit's diff, original against edited, as every
// surface shows it: "-" lines only the original has, "+" lines only the
// edited arguments have.
func printDiff(w io.Writer, original, edited []byte) {
	fmt.Fprintln(w, "Changes to the arguments (- original, + edited):")
	for _, l := range airlock.ArgumentsDiff(original, edited) {
		fmt.Fprintf(w, "  %c %s\n", l.Op, display.Visible(l.Text))
	}
}
