-- 0009: grants, standing approvals a reviewer gives (docs/policy.md,
-- "Grants"). A new tool call a live grant covers is approved at creation,
-- decided by "grant:<id>", and the use is counted (uses_left) in the
-- same transaction as the insert.
--
-- Exactly one scope is set: instance_id or agent_id (the other is '').
-- uses and uses_left are NULL for a grant without a limit of uses.
-- validity is in microseconds: how long each approval lets the call start.

CREATE TABLE grants (
    seq                   INTEGER PRIMARY KEY AUTOINCREMENT,
    id                    TEXT    NOT NULL UNIQUE,
    tool                  TEXT    NOT NULL,
    match_kind            TEXT    NOT NULL CHECK (match_kind IN ('same_arguments', 'cel')),
    arguments_fingerprint TEXT    NOT NULL DEFAULT '',
    expression            TEXT    NOT NULL DEFAULT '',
    instance_id           TEXT    NOT NULL DEFAULT '',
    agent_id              TEXT    NOT NULL DEFAULT '',
    uses                  INTEGER,
    uses_left             INTEGER CHECK (uses_left >= 0),
    validity              INTEGER NOT NULL,
    created_at            INTEGER NOT NULL,
    expires_at            INTEGER NOT NULL,
    created_by            TEXT    NOT NULL,
    created_by_principal  TEXT    NOT NULL,
    request_id            TEXT    NOT NULL DEFAULT '',
    revoked_at            INTEGER,
    revoked_by            TEXT    NOT NULL DEFAULT ''
) STRICT;

-- A create looks up the unrevoked grants of its tool.
CREATE INDEX grants_by_tool ON grants (tool, expires_at) WHERE revoked_at IS NULL;
