-- The verifiable audit log's tree, checkpoints, key and sequencer lease
-- (sqlcore.AuditSQL).

-- name: Audit.InsertKey
{{tick}}
INSERT INTO audit_keys (id, origin, skey, vkey, created_at)
SELECT 1, @origin::text, @skey::text, @vkey::text, tick.now FROM tick
ON CONFLICT (id) DO NOTHING

-- name: Audit.Key
SELECT origin, skey, vkey, created_at FROM audit_keys WHERE id = 1

-- name: Audit.Acquire
-- One compare-and-set on the lease's row: replicas taking it at once
-- queue on the row lock, and each re-checks the holder and expiry the one
-- before it left.
{{tick}}
UPDATE leases l SET holder = @holder::text, expires_at = tick.now + @ttl::interval
FROM tick
WHERE l.name = 'audit_sequencer' AND (l.holder = @holder::text OR l.expires_at <= tick.now)
RETURNING l.holder

-- name: Audit.LastEvent
SELECT coalesce(max(id), 0) FROM events

-- name: Audit.Unsequenced
-- The anti-join on audit_leaves' unique event_id index finds events that
-- have no leaf, whatever order their IDs committed in. The subquery's own
-- bound on event_id says nothing new, but lets the planner read only the
-- leaves above @after: without it, it read every leaf of the tree each
-- time (a merge or hash anti-join over all of audit_leaves), which at
-- half a million leaves passed the statement timeout and stopped the log.
SELECT e.id, e.type, e.at, e.actor, e.request_id, e.instance_id, e.token_id, e.state, e.subject, e.policy_hash, e.uid,
	r.id IS NOT NULL, coalesce(r.tool, ''), r.arguments, coalesce(r.agent_reasoning, ''), r.context,
	r.purged_at IS NOT NULL, coalesce(r.arguments_digest, ''), coalesce(r.reasoning_digest, ''), coalesce(r.context_digest, '')
FROM events e LEFT JOIN requests r ON e.request_id <> '' AND r.id = e.request_id
WHERE e.id > @after::bigint AND NOT EXISTS (SELECT 1 FROM audit_leaves l WHERE l.event_id = e.id AND l.event_id > @after::bigint)
ORDER BY e.id LIMIT @limit::int

-- name: Audit.Grow
-- The append's compare-and-set: concurrent appenders queue on the tree's
-- row lock, and the loser re-checks a size that has moved.
{{tick}}
UPDATE audit_tree t SET size = @to::bigint
FROM tick
WHERE t.id = 1 AND t.size = @from::bigint
	AND EXISTS (SELECT 1 FROM leases l WHERE l.name = 'audit_sequencer' AND l.holder = @holder::text AND l.expires_at > tick.now)

-- name: Audit.Size
SELECT size FROM audit_tree WHERE id = 1

-- name: Audit.Holder
{{tick}}
SELECT l.holder, l.expires_at > tick.now FROM leases l, tick WHERE l.name = 'audit_sequencer'

-- name: Audit.InsertLeaves
INSERT INTO audit_leaves (idx, event_id, leaf, leaf_hash)
SELECT * FROM unnest(@idxs::bigint[], @event_ids::bigint[], @leaves::bytea[], @leaf_hashes::bytea[])
ON CONFLICT (event_id) DO NOTHING

-- name: Audit.InsertHashes
INSERT INTO audit_hashes (idx, hash) SELECT * FROM unnest(@idxs::bigint[], @hashes::bytea[])

-- name: Audit.Hashes
SELECT false, idx, hash FROM audit_hashes WHERE idx = ANY (@indexes::bigint[])
UNION ALL SELECT true, idx, leaf_hash FROM audit_leaves WHERE idx = ANY (@leaves::bigint[])

-- name: Audit.Leaves
SELECT idx, event_id, leaf FROM audit_leaves WHERE idx >= @start::bigint ORDER BY idx LIMIT @limit::int

-- name: Audit.RequestLeaves
SELECT l.idx, l.event_id, l.leaf FROM events e JOIN audit_leaves l ON l.event_id = e.id
WHERE e.request_id = @request::text ORDER BY l.idx LIMIT @limit::int

-- name: Audit.InsertCheckpoint
{{tick}}
INSERT INTO audit_checkpoints (size, note, created_at) SELECT @size::bigint, @note::bytea, tick.now FROM tick
ON CONFLICT (size) DO NOTHING

-- name: Audit.Checkpoint
SELECT size, note, created_at FROM audit_checkpoints WHERE size = @size::bigint

-- name: Audit.LatestCheckpoint
SELECT size, note, created_at FROM audit_checkpoints ORDER BY size DESC LIMIT 1
