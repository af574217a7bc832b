package sqlite

import (
	"github.com/airlockhq/airlock/store/sqlcore"
)

// grantStateSQL and grantLiveSQL are a grant's state and its liveness,
// judged at @now; the table is aliased g.
const (
	grantStateSQL = sqlcore.GrantStateBeforeClock + "@now" + sqlcore.GrantStateAfterClock
	grantLiveSQL  = sqlcore.GrantLiveBeforeClock + "@now" + sqlcore.GrantLiveAfterClock
)

// grantMayCoverSQL selects the live grants that could cover a request
// being created (store.NewRequestParams.UnlessGranted): of its tool, in
// its scope, made by another principal than @unless_granted, whatever
// their match.
const grantMayCoverSQL = `SELECT 1 FROM grants g
	WHERE g.tool = @tool AND (g.instance_id = @instance OR g.agent_id = @owner)
	AND g.created_by_principal <> @unless_granted AND ` + grantLiveSQL

// grantCols is what every grant query selects, in scanGrant's order.
const grantCols = `g.id, g.tool, g.match_kind, g.arguments_fingerprint, g.expression, g.instance_id, g.agent_id,
	g.uses, g.uses_left, g.validity, g.created_at, g.expires_at, g.created_by, g.created_by_principal,
	g.request_id, g.revoked_at, g.revoked_by, ` + grantStateSQL

// useGrantSQL counts one use of grant @grant if it is live and covers the
// request being created (its tool, its scope, another principal's, the
// same arguments for a same_arguments grant), and returns its validity.
// No row: it does not cover the request now.
const useGrantSQL = `UPDATE grants AS g SET uses_left = g.uses_left - 1
WHERE g.id = @grant AND g.tool = @tool AND (g.instance_id = @instance OR g.agent_id = @owner)
	AND g.created_by_principal <> @principal
	AND (g.match_kind <> 'same_arguments' OR g.arguments_fingerprint = @args)
	AND ` + grantLiveSQL + `
RETURNING validity`

var grantSQL = sqlcore.GrantSQL{
	Create: `INSERT INTO grants (id, tool, match_kind, arguments_fingerprint, expression,
	instance_id, agent_id, uses, uses_left, validity, created_at, expires_at, created_by, created_by_principal, request_id)
SELECT @id, @tool, @kind, @args, @expr, @instance, @agent, @uses, @uses, @validity, @now, @now + @lifetime, @by, @principal, @request
WHERE @instance = '' OR EXISTS (SELECT 1 FROM instances i WHERE i.id = @instance AND i.deleted_at IS NULL)
RETURNING @now`,
	Grant: `SELECT ` + grantCols + ` FROM grants g WHERE g.id = @id`,
	List:  `SELECT ` + grantCols + ` FROM grants g WHERE (@tool = '' OR g.tool = @tool) ORDER BY g.seq DESC LIMIT @limit`,
	Live: `SELECT ` + grantCols + ` FROM grants g WHERE (@tool = '' OR g.tool = @tool) AND ` + grantLiveSQL + `
ORDER BY g.seq DESC LIMIT @limit`,
	Revoke: `UPDATE grants SET revoked_at = @now, revoked_by = @actor WHERE id = @id AND revoked_at IS NULL
RETURNING instance_id, @now`,
}
