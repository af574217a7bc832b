package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is the release version, set at build time with
// -ldflags "-X main.version=v1.2.3"; "dev" for local builds.
var version = "dev"

func runVersion(ctx context.Context, a *App, args []string) error {
	fs := a.newFlagSet("version")
	if err := a.parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(a.Stdout, versionString())
	return nil
}

// versionString says which build this is, so a bug report can name it.
func versionString() string {
	s := fmt.Sprintf("airlock %s (%s %s/%s", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, kv := range info.Settings {
			if kv.Key == "vcs.revision" && len(kv.Value) >= 12 {
				s += ", revision " + kv.Value[:12]
			}
		}
	}
	return s + ")"
}
