package sqlite

import "github.com/airlockhq/airlock/store/sqlcore"

// Reviewers' passkeys and the ceremonies in progress (docs/phone.md,
// "Passkeys"). SQLite's one writer orders every conditional write.

const passkeyCols = `id, principal, token_id, name, public_key, sign_count, transports, aaguid,
	backup_eligible, backup_state, created_at, last_used_at`

const passkeyDecisionCols = `request_id, principal, actor, state, valid_for, note, credential_id, authenticator_data,
	client_data_json, signature, public_key, args_digest, rp_id, at`

var passkeySQL = sqlcore.PasskeySQL{
	Insert: `INSERT INTO passkeys (id, principal, token_id, name, public_key, sign_count, transports, aaguid,
	backup_eligible, backup_state, created_at)
SELECT @id, @principal, @token_id, @name, @public_key, @sign_count, @transports, @aaguid, @backup_eligible, @backup_state, @now
WHERE (SELECT count(*) FROM passkeys WHERE principal = @principal) < @max
ON CONFLICT DO NOTHING
RETURNING ` + passkeyCols,
	Exists: `SELECT 1 FROM passkeys WHERE id = @id`,
	Select: `SELECT ` + passkeyCols + ` FROM passkeys WHERE id = @id`,
	List:   `SELECT ` + passkeyCols + ` FROM passkeys WHERE principal = @principal ORDER BY created_at, id`,
	Use: `UPDATE passkeys SET sign_count = @sign_count, last_used_at = @now
WHERE id = @id AND (@sign_count > sign_count OR (@sign_count = 0 AND sign_count = 0))
RETURNING ` + passkeyCols,
	Delete: `DELETE FROM passkeys WHERE id = @id AND principal = @principal RETURNING @now`,

	SweepCeremonies: `DELETE FROM passkey_ceremonies WHERE challenge_hash IN (
	SELECT challenge_hash FROM passkey_ceremonies WHERE expires_at <= @now ORDER BY expires_at LIMIT 100)`,
	PutCeremony: `INSERT INTO passkey_ceremonies (challenge_hash, kind, principal, state, expires_at)
SELECT @challenge, @kind, @principal, @state, @now + @ttl
WHERE (SELECT count(*) FROM passkey_ceremonies WHERE expires_at > @now) < @max`,
	TakeCeremony: `DELETE FROM passkey_ceremonies WHERE challenge_hash = @challenge AND expires_at > @now
RETURNING challenge_hash, kind, principal, state, expires_at`,

	InsertDecision: `INSERT INTO passkey_decisions (request_id, principal, actor, state, valid_for, note, credential_id,
	authenticator_data, client_data_json, signature, public_key, args_digest, rp_id, at)
VALUES (@id, @principal, @actor, @state, @valid_for, @note, @credential_id, @authenticator_data, @client_data_json, @signature,
	@public_key, @args_digest, @rp_id, @now)`,
	Decisions: `SELECT ` + passkeyDecisionCols + ` FROM passkey_decisions WHERE request_id = @id ORDER BY at, principal`,
	DecisionsOf: `SELECT ` + passkeyDecisionCols + ` FROM passkey_decisions
WHERE request_id IN (SELECT value FROM json_each(@ids)) ORDER BY request_id, at, principal`,
}
