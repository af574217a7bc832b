-- 0031: what a passkey-signed decision needs to be checked by anyone
-- later, with no other table (docs/audit.md, "Passkey-signed decisions"):
-- the credential's COSE public key as it was when the decision was made,
-- so the assertion still verifies after the passkey is deleted; the
-- arguments digest the assertion signed (approvaltoken's); and the
-- relying party ID it was made for. Decisions kept before take the key of
-- their passkey if it still exists; the rest stay empty ('' and an empty
-- key), which the export and `airlock audit verify` say.
ALTER TABLE passkey_decisions ADD COLUMN public_key BLOB NOT NULL DEFAULT x'';
ALTER TABLE passkey_decisions ADD COLUMN args_digest TEXT NOT NULL DEFAULT '';
ALTER TABLE passkey_decisions ADD COLUMN rp_id TEXT NOT NULL DEFAULT '';
UPDATE passkey_decisions SET public_key = (SELECT p.public_key FROM passkeys p WHERE p.id = passkey_decisions.credential_id)
WHERE EXISTS (SELECT 1 FROM passkeys p WHERE p.id = passkey_decisions.credential_id);
