-- 0020: a signing key starts signing at activates_at (docs/tokens.md).
-- A rotation publishes the new key at once and lets it sign a while
-- later, once every replica and verifier has seen it; the old key signs
-- until then. Keys from before sign from their creation.
ALTER TABLE signing_keys ADD COLUMN IF NOT EXISTS activates_at timestamptz;
UPDATE signing_keys SET activates_at = created_at WHERE activates_at IS NULL;
ALTER TABLE signing_keys ALTER COLUMN activates_at SET NOT NULL;
