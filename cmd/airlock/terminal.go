package main

import (
	"io"
	"os"

	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal (not a file, a pipe or
// /dev/null, which is a character device too).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// watchInput is where `requests watch` reads a reviewer's answers, and
// whether that is a terminal (only then does it prompt). Tests replace it.
var watchInput = func() (io.Reader, bool) {
	return os.Stdin, isTerminal(os.Stdin)
}
