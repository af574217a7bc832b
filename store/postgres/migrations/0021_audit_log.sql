-- 0021: the verifiable audit log (docs/architecture.md, "The audit log").
--
-- Every event becomes a leaf of an RFC 6962 Merkle tree (package
-- auditlog), at a gapless index assigned after commit by the one
-- sequencer that holds the lease. Events that exist before this migration
-- have no leaf: the sequencer finds them (an event without a leaf, by the
-- unique index on event_id) and catches up.
--
-- audit_tree holds the tree's size in its one row: an append is a
-- compare-and-set on it (size = the size the sequencer read), so two
-- sequencers can never both append at one index, whatever their leases
-- say.
CREATE TABLE IF NOT EXISTS audit_tree (
    id   smallint PRIMARY KEY CHECK (id = 1),
    size bigint   NOT NULL CHECK (size >= 0)
);
INSERT INTO audit_tree (id, size) VALUES (1, 0) ON CONFLICT DO NOTHING;

-- One row per leaf: the leaf's canonical bytes and its RFC 6962 leaf hash.
CREATE TABLE IF NOT EXISTS audit_leaves (
    idx       bigint PRIMARY KEY CHECK (idx >= 0),
    event_id  bigint NOT NULL UNIQUE REFERENCES events (id),
    leaf      bytea  NOT NULL,
    leaf_hash bytea  NOT NULL CHECK (length(leaf_hash) = 32)
);

-- The tree's stored hashes (golang.org/x/mod/sumdb/tlog's numbering:
-- each leaf's hash and the interior nodes it completes), written with
-- their leaves and never changed.
CREATE TABLE IF NOT EXISTS audit_hashes (
    idx  bigint PRIMARY KEY CHECK (idx >= 0),
    hash bytea  NOT NULL CHECK (length(hash) = 32)
);

-- Signed checkpoints (C2SP tlog-checkpoint), one per tree size.
CREATE TABLE IF NOT EXISTS audit_checkpoints (
    size       bigint      PRIMARY KEY CHECK (size >= 0),
    note       bytea       NOT NULL,
    created_at timestamptz NOT NULL
);

-- The checkpoints' note key: one for every replica, so that any replica
-- that sequences signs with it. skey is the signer key, never served.
CREATE TABLE IF NOT EXISTS audit_keys (
    id         smallint    PRIMARY KEY CHECK (id = 1),
    origin     text        NOT NULL,
    skey       text        NOT NULL,
    vkey       text        NOT NULL,
    created_at timestamptz NOT NULL
);

-- Leases of work one replica at a time does, by name. A lease is taken
-- by a compare-and-set: by its holder, to renew it, or by anyone once it
-- has expired.
CREATE TABLE IF NOT EXISTS leases (
    name       text        PRIMARY KEY,
    holder     text        NOT NULL,
    expires_at timestamptz NOT NULL
);
INSERT INTO leases (name, holder, expires_at) VALUES ('audit_sequencer', '', '-infinity') ON CONFLICT DO NOTHING;
