package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// version, commit and date name a release build. The release script
// (scripts/release.sh, docs/operations.md "Install") stamps them with
// -ldflags "-X main.version=0.1.0 -X main.commit=<sha> -X main.date=<RFC 3339>";
// any other build leaves them empty and the build's own record fills them
// (buildVersion).
var version, commit, date string

// build is what `airlock version` says about the running binary.
type build struct {
	Version  string // the release version (0.1.0), the module's (go install …@v0.1.0, or a checkout's pseudo-version), or "dev"
	Commit   string // the source revision, or "" when unknown
	Date     string // when that revision was committed (or, stamped, built), or ""
	Modified bool   // built from a work tree with uncommitted changes
}

// buildVersion reads what the release script stamped, and fills what it
// did not from the build information Go records in every binary: the
// module's version (when installed with `go install …@version`, or the
// pseudo-version Go derives from the commit of a checkout), and the VCS
// revision, its time and whether the tree was modified. A binary built
// with neither (-buildvcs=false, a test binary) is "dev".
func buildVersion() build {
	b := build{Version: version, Commit: commit, Date: date}
	info, ok := debug.ReadBuildInfo()
	if ok {
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = strings.TrimPrefix(info.Main.Version, "v")
		}
		for _, kv := range info.Settings {
			switch kv.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = kv.Value
				}
			case "vcs.time":
				if b.Date == "" {
					b.Date = kv.Value
				}
			case "vcs.modified":
				b.Modified = kv.Value == "true" && commit == ""
			}
		}
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	return b
}

// userAgentVersion is the version the command line's HTTP clients name
// in their User-Agent.
func userAgentVersion() string { return buildVersion().Version }

func runVersion(ctx context.Context, a *App, args []string) error {
	fs := a.newFlagSet("version")
	if err := a.parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprint(a.Stdout, versionString())
	return nil
}

// versionString says which build this is, so a bug report can name it:
// the version on the first line, then the commit, its date and the Go
// toolchain, one per line.
func versionString() string {
	b := buildVersion()
	s := "airlock " + b.Version + "\n"
	if b.Commit != "" {
		c := b.Commit
		if b.Modified {
			c += " (modified)"
		}
		s += "commit: " + c + "\n"
	}
	if b.Date != "" {
		s += "date:   " + b.Date + "\n"
	}
	return s + fmt.Sprintf("go:     %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
