package postgres

import (
	"github.com/airlockhq/airlock/store/sqlcore"
)

// grantStateSQL and grantLiveSQL are a grant's state and its liveness,
// judged at tick.now; the table is aliased g.
const (
	grantStateSQL = sqlcore.GrantStateBeforeClock + "tick.now" + sqlcore.GrantStateAfterClock
	grantLiveSQL  = sqlcore.GrantLiveBeforeClock + "tick.now" + sqlcore.GrantLiveAfterClock
)

// grantMayCoverSQL selects the live grants that could cover a request
// being created (store.NewRequestParams.UnlessGranted): of its tool, in
// its scope, made by another principal than @unless_granted, whatever
// their match. It reads tick.now and inst, as createInsertSQL has them.
const grantMayCoverSQL = `SELECT 1 FROM grants g
	WHERE g.tool = @tool::text AND (g.instance_id = inst.id OR g.agent_id = inst.owner_id)
	AND g.created_by_principal <> @unless_granted::text AND ` + grantLiveSQL

// grantCols is what every grant query selects, in scanGrant's order.
const grantCols = `g.id, g.tool, g.match_kind, g.arguments_fingerprint, g.expression, g.instance_id, g.agent_id,
	g.uses, g.uses_left, g.validity, g.created_at, g.expires_at,
	g.created_by, g.created_by_principal, g.request_id, g.revoked_at, g.revoked_by, ` + grantStateSQL

// useGrantSQL counts one use of grant @grant if it is live and covers the
// request being created (its tool, its scope, another principal's, the
// same arguments for a same_arguments grant), and returns its validity. No row: it does not cover the request now. Two creates
// racing for a grant's last use serialize on its row lock, and the second
// re-checks uses_left once the first commits, so it finds none left.
const useGrantSQL = tickCTE + `UPDATE grants AS g SET uses_left = g.uses_left - 1 FROM tick
WHERE g.id = @grant AND g.tool = @tool AND (g.instance_id = @instance OR g.agent_id = @owner)
	AND g.created_by_principal <> @principal
	AND (g.match_kind <> 'same_arguments' OR g.arguments_fingerprint = @args)
	AND ` + grantLiveSQL + `
RETURNING g.validity`

// grantsSQL selects grants of tool @tool (any when ”), judged at tick.now.
const grantsSQL = tickCTE + `SELECT ` + grantCols + ` FROM grants g, tick WHERE (@tool::text = '' OR g.tool = @tool::text)`

var grantSQL = sqlcore.GrantSQL{
	Create: tickCTE + `INSERT INTO grants (id, tool, match_kind, arguments_fingerprint, expression,
	instance_id, agent_id, uses, uses_left, validity, created_at, expires_at, created_by, created_by_principal, request_id)
SELECT @id::text, @tool::text, @kind::text, @args::text, @expr::text, @instance::text, @agent::text, @uses::integer, @uses::integer,
	@validity::interval, tick.now, tick.now + @lifetime::interval, @by::text, @principal::text, @request::text
FROM tick
WHERE @instance::text = '' OR EXISTS (SELECT 1 FROM instances i WHERE i.id = @instance::text AND i.deleted_at IS NULL)
RETURNING created_at`,
	Grant: tickCTE + `SELECT ` + grantCols + ` FROM grants g, tick WHERE g.id = @id`,
	List:  grantsSQL + ` ORDER BY g.seq DESC LIMIT @limit`,
	Live:  grantsSQL + ` AND ` + grantLiveSQL + ` ORDER BY g.seq DESC LIMIT @limit`,
	Revoke: tickCTE + `UPDATE grants g SET revoked_at = tick.now, revoked_by = @actor FROM tick
WHERE g.id = @id AND g.revoked_at IS NULL RETURNING g.instance_id, tick.now`,
}
