//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package client

// lockDir does not lock on this platform: give each gate process its own
// journal directory.
func lockDir(string) (func() error, error) { return func() error { return nil }, nil }
