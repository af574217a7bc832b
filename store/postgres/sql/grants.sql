-- Grants (sqlcore.GrantSQL). grantState and grantLive, a grant's state
-- and its liveness judged at tick.now (the table aliased g), are built in
-- Go from the rules sqlcore keeps for both engines.

-- name: grantMayCover
-- grantMayCover selects the live grants that could cover a request being
-- created (store.NewRequestParams.UnlessGranted): of its tool, in its
-- scope, made by another principal than @unless_granted, whatever their
-- match. It reads tick.now and inst, as createInsertBefore has them.
SELECT 1 FROM grants g
	WHERE g.tool = @tool::text AND (g.instance_id = inst.id OR g.agent_id = inst.owner_id)
	AND g.created_by_principal <> @unless_granted::text AND {{grantLive}}

-- name: grantCols
-- grantCols is what every grant query selects, in the order sqlcore scans
-- a grant.
g.id, g.tool, g.match_kind, g.arguments_fingerprint, g.expression, g.instance_id, g.agent_id,
	g.uses, g.uses_left, g.validity, g.created_at, g.expires_at,
	g.created_by, g.created_by_principal, g.request_id, g.revoked_at, g.revoked_by, {{grantState}}

-- name: Requests.UseGrant
-- UseGrant counts one use of grant @grant if it is live and covers the
-- request being created (its tool, its scope, another principal's, the
-- same arguments for a same_arguments grant), and returns its validity.
-- No row: it does not cover the request now. Two creates racing for a
-- grant's last use serialize on its row lock, and the second re-checks
-- uses_left once the first commits, so it finds none left.
{{tick}}
UPDATE grants AS g SET uses_left = g.uses_left - 1 FROM tick
WHERE g.id = @grant AND g.tool = @tool AND (g.instance_id = @instance OR g.agent_id = @owner)
	AND g.created_by_principal <> @principal
	AND (g.match_kind <> 'same_arguments' OR g.arguments_fingerprint = @args)
	AND {{grantLive}}
RETURNING g.validity

-- name: grants
-- grants selects grants of tool @tool (any when ''), judged at tick.now.
{{tick}}
SELECT {{grantCols}} FROM grants g, tick WHERE (@tool::text = '' OR g.tool = @tool::text)

-- name: Grants.Create
{{tick}}
INSERT INTO grants (id, tool, match_kind, arguments_fingerprint, expression,
	instance_id, agent_id, uses, uses_left, validity, created_at, expires_at, created_by, created_by_principal, request_id)
SELECT @id::text, @tool::text, @kind::text, @args::text, @expr::text, @instance::text, @agent::text, @uses::integer, @uses::integer,
	@validity::interval, tick.now, tick.now + @lifetime::interval, @by::text, @principal::text, @request::text
FROM tick
WHERE @instance::text = '' OR EXISTS (SELECT 1 FROM instances i WHERE i.id = @instance::text AND i.deleted_at IS NULL)
RETURNING created_at

-- name: Grants.Grant
{{tick}}
SELECT {{grantCols}} FROM grants g, tick WHERE g.id = @id

-- name: Grants.List
{{grants}} ORDER BY g.seq DESC LIMIT @limit

-- name: Grants.Live
{{grants}} AND {{grantLive}} ORDER BY g.seq DESC LIMIT @limit

-- name: Grants.Revoke
{{tick}}
UPDATE grants g SET revoked_at = tick.now, revoked_by = @actor FROM tick
WHERE g.id = @id AND g.revoked_at IS NULL RETURNING g.instance_id, tick.now
