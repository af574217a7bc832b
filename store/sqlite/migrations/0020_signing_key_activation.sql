-- 0020: a signing key starts signing at activates_at (docs/tokens.md).
-- A rotation publishes the new key at once and lets it sign a while
-- later, once every replica and verifier has seen it; the old key signs
-- until then. Keys from before sign from their creation.
ALTER TABLE signing_keys ADD COLUMN activates_at INTEGER NOT NULL DEFAULT 0;
UPDATE signing_keys SET activates_at = created_at;
