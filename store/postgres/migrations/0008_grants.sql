-- 0008: grants, standing approvals a reviewer gives (docs/policy.md,
-- "Grants"). A new tool call a live grant covers is approved at creation,
-- decided by "grant:<id>", and the use is counted (uses_left) in the
-- same transaction as the insert: the UPDATE's row lock and its re-check
-- of uses_left > 0 keep a grant of N uses to N approvals, whatever the
-- races between replicas.
--
-- Exactly one scope is set: instance_id or agent_id (the other is '').
-- uses and uses_left are NULL for a grant without a limit of uses.

CREATE TABLE grants (
    seq                   bigserial   PRIMARY KEY,
    id                    text        NOT NULL UNIQUE,
    tool                  text        NOT NULL,
    match_kind            text        NOT NULL CHECK (match_kind IN ('same_arguments', 'cel')),
    arguments_fingerprint text        NOT NULL DEFAULT '',
    expression            text        NOT NULL DEFAULT '',
    instance_id           text        NOT NULL DEFAULT '',
    agent_id              text        NOT NULL DEFAULT '',
    uses                  integer,
    uses_left             integer     CHECK (uses_left >= 0),
    validity              interval    NOT NULL,
    created_at            timestamptz NOT NULL,
    expires_at            timestamptz NOT NULL,
    created_by            text        NOT NULL,
    created_by_principal  text        NOT NULL,
    request_id            text        NOT NULL DEFAULT '',
    revoked_at            timestamptz,
    revoked_by            text        NOT NULL DEFAULT ''
);

-- A create looks up the unrevoked grants of its tool.
CREATE INDEX grants_by_tool ON grants (tool, expires_at) WHERE revoked_at IS NULL;
