package sqlite

import "github.com/airlockhq/airlock/store/sqlcore"

// The keys approval tokens are signed with (docs/tokens.md).

const signingKeyCols = `id, seed, created_at, retired_at, published_until, activates_at`

var signingKeySQL = sqlcore.SigningKeySQL{
	Insert: `INSERT INTO signing_keys (id, seed, created_at, activates_at)
SELECT @id, @seed, @now, @now + @delay WHERE NOT EXISTS (SELECT 1 FROM signing_keys WHERE retired_at IS NULL)
RETURNING created_at`,
	Active: `SELECT ` + signingKeyCols + ` FROM signing_keys WHERE retired_at IS NULL`,
	Retire: `UPDATE signing_keys SET retired_at = @now + @delay, published_until = @now + @delay + @keep
WHERE retired_at IS NULL RETURNING id, @now`,
	Published: `SELECT ` + signingKeyCols + ` FROM signing_keys
WHERE retired_at IS NULL OR published_until > @now
ORDER BY retired_at IS NOT NULL, created_at DESC`,
}
