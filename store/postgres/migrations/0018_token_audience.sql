-- 0018: the audience an instance's approval tokens name (docs/tokens.md).
-- Set once, at registration; '' means tokens carry no aud.
ALTER TABLE instances ADD COLUMN IF NOT EXISTS token_audience text NOT NULL DEFAULT '';
