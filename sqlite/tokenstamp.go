package sqlite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
)

// The token stamp (airlock.TokenStamper) is a file beside the database,
// "<db>-tokens", that grows by one byte after every revocation or
// replacement of a token has committed. Reading it is one stat(2), about a
// microsecond, where looking a token up is a query: providers cache tokens
// between calls for as long as the stamp holds still, and every process on
// the file sees another's revocation at its next call.

// The grant stamp (airlock.GrantStamper) is a second such file,
// "<db>-grants", that grows after every grant creation has committed.

// TokenStampSuffix and GrantStampSuffix name the stamp files: the database
// path plus them. Like "-wal" and "-shm", they go with the database.
const (
	TokenStampSuffix = "-tokens"
	GrantStampSuffix = "-grants"
)

// TokenStamp implements airlock.TokenStamper: the stamp file's size and
// modification time (nanoseconds), hashed. A file that is missing reads as 0,
// so a store whose tokens never changed needs none.
func (s *Store) TokenStamp() (uint64, error) { return readStamp(s.path + TokenStampSuffix) }

// GrantStamp implements airlock.GrantStamper, as TokenStamp does.
func (s *Store) GrantStamp() (uint64, error) { return readStamp(s.path + GrantStampSuffix) }

// readStamp reads the stamp file at path.
func readStamp(path string) (uint64, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: stamp %s: %w", path, err)
	}
	// Hashed from binary, not formatted text: this runs on every call.
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(fi.Size()))
	binary.LittleEndian.PutUint64(b[8:], uint64(fi.ModTime().UnixNano()))
	h := fnv.New64a()
	h.Write(b[:])
	return h.Sum64() | 1, nil // never 0: 0 is "no file"
}

// bumpTokenStamp moves the token stamp after a token change has
// committed. When it fails, the change stands but other processes may go on
// accepting the token they cached: the caller hears so, and can retry (a
// retried revocation bumps again).
func (s *Store) bumpTokenStamp() error {
	if err := bumpStamp(s.path + TokenStampSuffix); err != nil {
		return fmt.Errorf("sqlite: the token change is committed, but other processes on this database may not see it until retried: %w", err)
	}
	return nil
}

// bumpGrantStamp moves the grant stamp after a grant creation has
// committed. When it fails, the grant stands, but a process that found no
// grant for its tool may ask a reviewer for what it covers until the
// stamp next moves: the caller hears so.
func (s *Store) bumpGrantStamp() error {
	if err := bumpStamp(s.path + GrantStampSuffix); err != nil {
		return fmt.Errorf("sqlite: the grant is created, but it may cover requests only after the next grant: %w", err)
	}
	return nil
}

// bumpStamp grows the stamp file at path by a byte.
func bumpStamp(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err == nil {
		_, err = f.Write([]byte{'.'})
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
