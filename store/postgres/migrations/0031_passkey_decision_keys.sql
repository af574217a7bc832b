-- 0031: what a passkey-signed decision needs to be checked by anyone
-- later, with no other table (docs/audit.md, "Passkey-signed decisions"):
-- the credential's COSE public key as it was when the decision was made,
-- so the assertion still verifies after the passkey is deleted; the
-- arguments digest the assertion signed (approvaltoken's); and the
-- relying party ID it was made for. Decisions kept before take the key of
-- their passkey if it still exists; the rest stay empty ('' and an empty
-- key), which the export and `airlock audit verify` say.
ALTER TABLE passkey_decisions ADD COLUMN IF NOT EXISTS public_key bytea NOT NULL DEFAULT '\x'::bytea;
ALTER TABLE passkey_decisions ADD COLUMN IF NOT EXISTS args_digest text NOT NULL DEFAULT '';
ALTER TABLE passkey_decisions ADD COLUMN IF NOT EXISTS rp_id text NOT NULL DEFAULT '';
UPDATE passkey_decisions d SET public_key = p.public_key FROM passkeys p
WHERE p.id = d.credential_id AND d.public_key = '\x'::bytea;
