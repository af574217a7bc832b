package sqlite

import "github.com/airlockhq/airlock/store/sqlcore"

// The single use of approval tokens (docs/tokens.md, "Single use").

var tokenUseSQL = sqlcore.TokenUseSQL{
	Insert: `INSERT INTO approval_token_uses (request_id, jti, consumed_at, consumed_by)
SELECT id, @jti, @now, @actor FROM requests WHERE id = @request_id
ON CONFLICT (request_id) DO NOTHING
RETURNING consumed_at, (SELECT instance_id FROM requests WHERE id = @request_id)`,
	Get: `SELECT jti, consumed_at, consumed_by FROM approval_token_uses WHERE request_id = @request_id`,
}
