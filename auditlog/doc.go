// Package auditlog turns Airlock's event log into a verifiable transparency
// log: every event is a leaf of an RFC 6962 Merkle tree, in one gapless
// order, and signed checkpoints (C2SP tlog-checkpoint) commit to the tree, so
// anyone holding the public key can check that the log they were given is the
// log Airlock signed, and that a later checkpoint extends an earlier one.
//
// The package does no I/O: the store keeps the leaves and the tree's hashes,
// the sequencer appends, the endpoints serve, and `airlock audit verify`
// checks; each calls in here. The tree and its proofs are Go's own RFC 6962
// implementation (golang.org/x/mod/sumdb/tlog, the Go checksum database's),
// and checkpoints are signed notes (golang.org/x/mod/sumdb/note) with an
// Ed25519 key; nothing here hashes a tree by hand.
//
// # Leaves
//
// A leaf is one event as the tree holds it: a JSON object in its RFC 8785
// canonical form (keys sorted, no insignificant space, strings and numbers as
// RFC 8785 writes them), made by [NewLeaf] and read back by [ParseLeaf]. The
// tree hashes exactly these bytes (RFC 6962 leaf hash: SHA-256 of 0x00 and the
// bytes). Its members, in canonical order:
//
//	actor             the event's actor: a principal, or system:expiry and the like
//	arguments_digest  request events whose request has arguments: their digest
//	context_digest    request events whose request has a context: its digest
//	event_id          the event's sequence number, only for events appended before
//	                  events had a uid (the same fallback as their webhook-id)
//	instance_id       the instance, when the event has one
//	policy_hash       hex SHA-256 of the policy file whose rule decided, when one did
//	reasoning_digest  request events: the digest of the agent's reasoning
//	request_id        the approval request, when the event has one
//	state             the request's state after the change, when the event has one
//	subject           what a board event changed, when it is one
//	time              when the event happened: RFC 3339 in UTC with exactly six
//	                  fractional digits, as 2026-12-06T12:07:00.123456Z
//	token_id          the API token the event is about, when there is one
//	tool_digest       request events: the digest of the tool's name
//	type              the event type, as request.approved
//	uid               the event's random identity, when it has one
//	v                 the leaf format's version: 1
//
// Members marked "when" are left out when empty; every leaf has actor, time,
// type and v, and exactly one of uid and event_id. An event with a request ID
// carries the digests of that request's payloads (tool_digest and
// reasoning_digest always, arguments_digest and context_digest when the
// request has them), so that each event of a request names what was asked on
// its own, and the bytes themselves can be purged later without changing a
// leaf: the tree never holds a payload, only its digest.
//
// A digest is "sha256:" and the unpadded base64url SHA-256 of the payload: of
// the RFC 8785 canonical form of a JSON value (arguments, context), which is
// the approval token's args_digest (package approvaltoken, docs/tokens.md), so
// the same arguments have the same digest in a token and in the log; and of
// the UTF-8 bytes, exactly as stored, of a string (tool, reasoning).
//
// # Entries
//
// The export and `airlock audit verify --entries` carry leaves as JSON lines,
// one entry per line: {"index":N,"leaf":{...}}, where the leaf is the
// leaf's JSON object. A reader canonicalises it (RFC 8785) before hashing, so
// an entry reformatted in transit still verifies, and a changed value does
// not. The entry of a decision or vote signed with a passkey has a third
// member, "passkey" (PasskeyRecord), which is not part of the leaf and which
// VerifyEntries checks against it (VerifyPasskey).
package auditlog
