package sqlite

import "github.com/airlockhq/airlock/store/sqlcore"

// The verifiable audit log's tree, checkpoints, key and sequencer lease
// (sqlcore.AuditSQL). The one writer runs each write after the last
// committed, so the compare-and-sets need no lock, and event IDs commit in
// order; leaves and hashes go in one row each, in process.

var auditSQL = sqlcore.AuditSQL{
	InsertKey: `INSERT INTO audit_keys (id, origin, skey, vkey, created_at) VALUES (1, @origin, @skey, @vkey, @now)
ON CONFLICT (id) DO NOTHING`,
	Key: `SELECT origin, skey, vkey, created_at FROM audit_keys WHERE id = 1`,
	Acquire: `UPDATE leases SET holder = @holder, expires_at = @now + @ttl
WHERE name = 'audit_sequencer' AND (holder = @holder OR expires_at <= @now)
RETURNING holder`,
	// No LastEvent: one statement reads in one snapshot, and the one
	// writer commits event IDs in order, so the page with the largest
	// event in it settles itself (sqlcore.AuditSQL.Unsequenced). The
	// largest event's ID is read once a statement; only its row probes
	// the leaves a second time.
	Unsequenced: `SELECT e.id, e.type, e.at, e.actor, e.request_id, e.instance_id, e.token_id, e.state, e.subject, e.policy_hash, e.uid,
	r.id IS NOT NULL, coalesce(r.tool, ''), r.arguments, coalesce(r.agent_reasoning, ''), r.context,
	r.purged_at IS NOT NULL, coalesce(r.arguments_digest, ''), coalesce(r.reasoning_digest, ''), coalesce(r.context_digest, ''),
	CASE WHEN e.id = (SELECT max(id) FROM events) THEN EXISTS (SELECT 1 FROM audit_leaves l WHERE l.event_id = e.id) ELSE false END
FROM events e LEFT JOIN requests r ON e.request_id <> '' AND r.id = e.request_id
WHERE e.id > @after AND (NOT EXISTS (SELECT 1 FROM audit_leaves l WHERE l.event_id = e.id) OR e.id = (SELECT max(id) FROM events))
ORDER BY e.id LIMIT @limit`,
	Grow: `UPDATE audit_tree SET size = @to
WHERE id = 1 AND size = @from
	AND EXISTS (SELECT 1 FROM leases WHERE name = 'audit_sequencer' AND holder = @holder AND expires_at > @now)`,
	Size:   `SELECT size FROM audit_tree WHERE id = 1`,
	Holder: `SELECT holder, expires_at > @now FROM leases WHERE name = 'audit_sequencer'`,
	InsertLeaf: `INSERT INTO audit_leaves (idx, event_id, leaf, leaf_hash) VALUES (@idx, @event_id, @leaf, @leaf_hash)
ON CONFLICT (event_id) DO NOTHING`,
	InsertHash: `INSERT INTO audit_hashes (idx, hash) VALUES (@idx, @hash)`,
	Hashes: `SELECT false, idx, hash FROM audit_hashes WHERE idx IN (SELECT value FROM json_each(@indexes))
UNION ALL SELECT true, idx, leaf_hash FROM audit_leaves WHERE idx IN (SELECT value FROM json_each(@leaves))`,
	Leaves: `SELECT idx, event_id, leaf FROM audit_leaves WHERE idx >= @start ORDER BY idx LIMIT @limit`,
	RequestLeaves: `SELECT l.idx, l.event_id, l.leaf FROM events e JOIN audit_leaves l ON l.event_id = e.id
WHERE e.request_id = @request ORDER BY l.idx LIMIT @limit`,
	InsertCheckpoint: `INSERT INTO audit_checkpoints (size, note, created_at) VALUES (@size, @note, @now)
ON CONFLICT (size) DO NOTHING`,
	Checkpoint:       `SELECT size, note, created_at FROM audit_checkpoints WHERE size = @size`,
	LatestCheckpoint: `SELECT size, note, created_at FROM audit_checkpoints ORDER BY size DESC LIMIT 1`,
}
