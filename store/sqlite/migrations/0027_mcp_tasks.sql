-- 0027: MCP tasks (docs/mcp.md, "Tasks").
--
-- A task is a handle an MCP client polls on a request it waits for: one
-- row per task, naming its request and owner (the agent token that made
-- the call) and the kind of call it answers for, with what that answer
-- needs besides the request (call, JSON). Its status is the request's,
-- read with it, so any process answers it. Times are in microseconds.
CREATE TABLE mcp_tasks (
    id         TEXT    PRIMARY KEY,
    request_id TEXT    NOT NULL REFERENCES requests (id),
    owner_id   TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    call       TEXT,
    created_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
