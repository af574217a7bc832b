-- 0027: MCP tasks (docs/mcp.md, "Tasks").
--
-- A task is a handle an MCP client polls on a request it waits for: one
-- row per task, naming its request and owner (the agent token that made
-- the call) and the kind of call it answers for, with what that answer
-- needs besides the request (call, JSON). Its status is the request's,
-- read with it, so any replica answers it.
CREATE TABLE IF NOT EXISTS mcp_tasks (
    id         text        PRIMARY KEY,
    request_id text        NOT NULL REFERENCES requests (id),
    owner_id   text        NOT NULL,
    kind       text        NOT NULL,
    call       text,
    created_at timestamptz NOT NULL
);
