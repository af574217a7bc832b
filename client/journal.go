package client

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockhq/airlock"
)

// The journal is what a Gate keeps on disk so that a call runs at most once
// even across restarts, and so that a run a crash interrupted is reported
// unknown instead of being run again. It is a directory with one small
// append-only file per call (named by a hash of the call's idempotency
// key); each line is one step, written and fsynced before the gate goes
// on:
//
//	requested <request id> <key>   the request exists (after create)
//	claiming  <request id>         about to claim the execution
//	claimed   <request id>         the server granted the claim; the call may start
//	refused   <request id> <code>  the server refused the claim
//	finished  <request id> <status> the call ended: succeeded, failed or unknown
//	reported  <request id> <status> the server has the outcome
//
// A last line without its newline was torn by a crash and never counted:
// the step after it did not happen. The directory is locked while a gate
// has it open, so two processes never share one.

// recKind is one kind of journal line.
type recKind string

const (
	recRequested recKind = "requested"
	recClaiming  recKind = "claiming"
	recClaimed   recKind = "claimed"
	recRefused   recKind = "refused"
	recFinished  recKind = "finished"
	recReported  recKind = "reported"
)

// entry is what the journal knows of one call.
type entry struct {
	file      string
	key       string
	requestID string
	claiming  bool // a claim was sent; its answer may be lost
	claimed   bool
	refused   bool
	finished  airlock.ExecutionStatus // "" until the call ended
	reported  bool
}

// settled reports whether the server has everything this entry knows.
func (e entry) settled() bool {
	switch {
	case e.finished != "":
		return e.reported
	case e.claimed:
		return false
	case e.claiming:
		return false
	}
	return true
}

// journal is an open, locked journal directory.
type journal struct {
	dir    string
	unlock func() error
}

// lockName is the lock file inside a journal directory.
const lockName = ".lock"

// errJournalBusy says another process holds the journal.
var errJournalBusy = errors.New("journal in use by another process")

// openJournal creates (if needed) and locks dir.
func openJournal(dir string) (*journal, error) {
	if dir == "" {
		return nil, errors.New("airlock gate: a journal directory is required: it is how a call runs at most once across restarts")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("airlock gate: create journal %s: %w", dir, err)
	}
	unlock, err := lockDir(filepath.Join(dir, lockName))
	if errors.Is(err, errJournalBusy) {
		return nil, fmt.Errorf("airlock gate: journal %s: %w; give each gate process its own journal directory", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("airlock gate: lock journal %s: %w", dir, err)
	}
	return &journal{dir: dir, unlock: unlock}, nil
}

func (j *journal) close() error { return j.unlock() }

// file returns the journal file of a key.
func (j *journal) file(key string) string {
	h := sha256.Sum256([]byte(key))
	return filepath.Join(j.dir, hex.EncodeToString(h[:16])+".log")
}

// append writes one line for key and makes it durable before returning.
func (j *journal) append(key string, kind recKind, requestID string, more ...string) error {
	path := j.file(key)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("journal %s: %w", kind, err)
	}
	line := strings.Join(append([]string{string(kind), requestID}, more...), " ") +
		" " + time.Now().UTC().Format(time.RFC3339Nano) + "\n"
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return fmt.Errorf("journal %s: %w", kind, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("journal %s: sync: %w", kind, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("journal %s: %w", kind, err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// A new file is durable only once its directory entry is.
		return syncDir(j.dir)
	}
	return nil
}

// read returns the entry of key; a zero entry when there is none.
func (j *journal) read(key string) (entry, error) {
	e, err := readEntry(j.file(key))
	if errors.Is(err, fs.ErrNotExist) {
		return entry{key: key}, nil
	}
	return e, err
}

// entries returns every entry of the journal.
func (j *journal) entries() ([]entry, error) {
	files, err := filepath.Glob(filepath.Join(j.dir, "*.log"))
	if err != nil {
		return nil, err
	}
	var es []entry
	for _, f := range files {
		e, err := readEntry(f)
		if err != nil {
			return nil, err
		}
		es = append(es, e)
	}
	return es, nil
}

// readEntry parses one journal file.
func readEntry(path string) (entry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return entry{}, err
	}
	e := entry{file: path}
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		data = data[:i+1] // a torn last line: its step never counted
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			return e, fmt.Errorf("journal %s: malformed line %q", path, sc.Text())
		}
		if e.requestID == "" {
			e.requestID = f[1]
		}
		switch recKind(f[0]) {
		case recRequested:
			if len(f) > 2 {
				e.key = f[2]
			}
		case recClaiming:
			e.claiming, e.refused = true, false
		case recClaimed:
			e.claimed = true
		case recRefused:
			e.claiming, e.refused = false, true
		case recFinished:
			if len(f) > 2 {
				e.finished = airlock.ExecutionStatus(f[2])
			}
		case recReported:
			e.reported = true
		default:
			return e, fmt.Errorf("journal %s: unknown record %q", path, f[0])
		}
	}
	return e, sc.Err()
}

// syncDir fsyncs a directory, so entries created in it survive a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
