-- 0021: the verifiable audit log (docs/architecture.md, "The audit log").
--
-- Every event becomes a leaf of an RFC 6962 Merkle tree (package
-- auditlog), at a gapless index assigned after commit by the one
-- sequencer that holds the lease. Events that exist before this migration
-- have no leaf: the sequencer finds them (an event without a leaf, by the
-- unique index on event_id) and catches up. Times are in microseconds.
--
-- audit_tree holds the tree's size in its one row: an append is a
-- compare-and-set on it (size = the size the sequencer read), so two
-- sequencers can never both append at one index, whatever their leases
-- say.
CREATE TABLE audit_tree (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    size INTEGER NOT NULL CHECK (size >= 0)
) STRICT;
INSERT INTO audit_tree (id, size) VALUES (1, 0);

-- One row per leaf: the leaf's canonical bytes and its RFC 6962 leaf hash.
CREATE TABLE audit_leaves (
    idx       INTEGER PRIMARY KEY CHECK (idx >= 0),
    event_id  INTEGER NOT NULL UNIQUE REFERENCES events (id),
    leaf      BLOB    NOT NULL,
    leaf_hash BLOB    NOT NULL CHECK (length(leaf_hash) = 32)
) STRICT;

-- The tree's stored hashes (golang.org/x/mod/sumdb/tlog's numbering:
-- each leaf's hash and the interior nodes it completes), written with
-- their leaves and never changed.
CREATE TABLE audit_hashes (
    idx  INTEGER PRIMARY KEY CHECK (idx >= 0),
    hash BLOB    NOT NULL CHECK (length(hash) = 32)
) STRICT;

-- Signed checkpoints (C2SP tlog-checkpoint), one per tree size.
CREATE TABLE audit_checkpoints (
    size       INTEGER PRIMARY KEY CHECK (size >= 0),
    note       BLOB    NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;

-- The checkpoints' note key: one for every process on the file. skey is
-- the signer key, never served.
CREATE TABLE audit_keys (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    origin     TEXT    NOT NULL,
    skey       TEXT    NOT NULL,
    vkey       TEXT    NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;

-- Leases of work one process at a time does, by name. A lease is taken by
-- a compare-and-set: by its holder, to renew it, or by anyone once it has
-- expired.
CREATE TABLE leases (
    name       TEXT    PRIMARY KEY,
    holder     TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
INSERT INTO leases (name, holder, expires_at) VALUES ('audit_sequencer', '', 0);
