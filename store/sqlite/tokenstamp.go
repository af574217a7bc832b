package sqlite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
)

// The token stamp (store.TokenStamper) is a file beside the database,
// "<db>-tokens", that grows by one byte after every revocation or
// replacement of a token has committed. Reading it is one stat(2), about a
// microsecond, where looking a token up is a query: providers cache tokens
// between calls for as long as the stamp holds still, and every process on
// the file sees another's revocation at its next call.

// TokenStampSuffix names the token stamp file: the database path plus it.
// Like "-wal" and "-shm", it goes with the database.
const TokenStampSuffix = "-tokens"

// TokenStamp implements store.TokenStamper: the stamp file's size and
// modification time (nanoseconds), hashed. A file that is missing reads as 0,
// so a store whose tokens never changed needs none.
func (s *Store) TokenStamp() (uint64, error) {
	fi, err := os.Stat(s.path + TokenStampSuffix)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: token stamp: %w", err)
	}
	// Hashed from binary, not formatted text: this runs on every call.
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(fi.Size()))
	binary.LittleEndian.PutUint64(b[8:], uint64(fi.ModTime().UnixNano()))
	h := fnv.New64a()
	h.Write(b[:])
	return h.Sum64() | 1, nil // never 0: 0 is "no file"
}

// bumpTokenStamp moves the stamp after a token change has committed
// (dialect.Write, for sqlcore.Tx.TokenChanged). When it fails, the change
// stands but other processes may go on accepting the token they cached:
// the caller hears so, and can retry (a retried revocation bumps again).
func (s *Store) bumpTokenStamp() error {
	f, err := os.OpenFile(s.path+TokenStampSuffix, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err == nil {
		_, err = f.Write([]byte{'.'})
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("the token change is committed, but other processes on this database may not see it until retried: %w", err)
	}
	return nil
}
