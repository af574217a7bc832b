-- Reviewers' passkeys and the ceremonies in progress (docs/phone.md,
-- "Passkeys"; sqlcore.PasskeySQL).

-- name: passkeyCols
pk.id, pk.principal, pk.token_id, pk.name, pk.public_key, pk.sign_count, pk.transports, pk.aaguid,
	pk.backup_eligible, pk.backup_state, pk.created_at, pk.last_used_at

-- name: Passkeys.Insert
-- A credential ID stored already inserts nothing (ON CONFLICT); the
-- count may let two concurrent registrations past the limit by one.
{{tick}}
INSERT INTO passkeys AS pk (id, principal, token_id, name, public_key, sign_count, transports, aaguid,
	backup_eligible, backup_state, created_at)
SELECT @id::bytea, @principal::text, @token_id::text, @name::text, @public_key::bytea, @sign_count::bigint, @transports::text,
	@aaguid::bytea, @backup_eligible::boolean, @backup_state::boolean, tick.now
FROM tick
WHERE (SELECT count(*) FROM passkeys c WHERE c.principal = @principal::text) < @max::int
ON CONFLICT DO NOTHING
RETURNING {{passkeyCols}}

-- name: Passkeys.Exists
SELECT 1 FROM passkeys WHERE id = @id

-- name: Passkeys.Select
SELECT {{passkeyCols}} FROM passkeys pk WHERE pk.id = @id

-- name: Passkeys.List
SELECT {{passkeyCols}} FROM passkeys pk WHERE pk.principal = @principal ORDER BY pk.created_at, pk.id

-- name: Passkeys.Use
-- The row lock orders two uses of one counter value: the second reads
-- the first's count and updates nothing.
{{tick}}
UPDATE passkeys pk SET sign_count = @sign_count::bigint, last_used_at = tick.now
FROM tick
WHERE pk.id = @id AND (@sign_count::bigint > pk.sign_count OR (@sign_count::bigint = 0 AND pk.sign_count = 0))
RETURNING {{passkeyCols}}

-- name: Passkeys.Delete
{{tick}}
DELETE FROM passkeys pk USING tick
WHERE pk.id = @id AND pk.principal = @principal
RETURNING tick.now

-- name: Passkeys.SweepCeremonies
{{tick}}
DELETE FROM passkey_ceremonies WHERE challenge_hash IN (
	SELECT c.challenge_hash FROM passkey_ceremonies c, tick WHERE c.expires_at <= tick.now
	ORDER BY c.expires_at LIMIT 100 FOR UPDATE OF c SKIP LOCKED)

-- name: Passkeys.PutCeremony
{{tick}}
INSERT INTO passkey_ceremonies (challenge_hash, kind, principal, state, expires_at)
SELECT @challenge::bytea, @kind::text, @principal::text, @state::bytea, tick.now + @ttl::interval FROM tick
WHERE (SELECT count(*) FROM passkey_ceremonies c WHERE c.expires_at > tick.now) < @max::int

-- name: Passkeys.TakeCeremony
{{tick}}
DELETE FROM passkey_ceremonies c USING tick
WHERE c.challenge_hash = @challenge AND c.expires_at > tick.now
RETURNING c.challenge_hash, c.kind, c.principal, c.state, c.expires_at

-- name: Passkeys.InsertDecision
INSERT INTO passkey_decisions (request_id, principal, actor, state, valid_for, note, credential_id,
	authenticator_data, client_data_json, signature, public_key, args_digest, rp_id, at)
VALUES (@id, @principal, @actor, @state, @valid_for, @note, @credential_id::bytea, @authenticator_data::bytea,
	@client_data_json::bytea, @signature::bytea, @public_key::bytea, @args_digest, @rp_id, @now)

-- name: Passkeys.Decisions
SELECT {{passkeyDecisionCols}} FROM passkey_decisions WHERE request_id = @id ORDER BY at, principal

-- name: Passkeys.DecisionsOf
SELECT {{passkeyDecisionCols}} FROM passkey_decisions WHERE request_id = ANY(@ids) ORDER BY request_id, at, principal

-- name: passkeyDecisionCols
request_id, principal, actor, state, valid_for, note, credential_id, authenticator_data,
	client_data_json, signature, public_key, args_digest, rp_id, at
