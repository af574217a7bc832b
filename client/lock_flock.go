//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package client

import (
	"errors"
	"os"
	"syscall"
)

// lockDir takes an exclusive, non-blocking lock on path (created if
// needed). The kernel releases it when the process dies, even by SIGKILL,
// so a crashed gate never leaves its journal locked.
func lockDir(path string) (func() error, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errJournalBusy
		}
		return nil, err
	}
	return f.Close, nil
}
