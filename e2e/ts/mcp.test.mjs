// End-to-end test of Airlock's MCP server with the official TypeScript SDK
// client (@modelcontextprotocol/sdk, pinned in package.json). It drives the
// real binary two ways: over stdio through `airlock mcp`, and over
// streamable HTTP at /mcp. e2e/ts/ts_test.go builds the binary, starts
// `airlock serve`, mints tokens and runs this file with node --test, passing:
//
//   AIRLOCK_BIN             the airlock binary
//   AIRLOCK_URL             the running server's base URL
//   AIRLOCK_TOKEN           an agent token with the work:write scope
//   AIRLOCK_REVIEWER_TOKEN  a reviewer token, to decide over REST
//   AIRLOCK_ITEM_ID         a work item in column "todo" of a todo/done board

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { EmptyResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';

const env = (name) => {
  const v = process.env[name];
  assert.ok(v, `${name} must be set (run this through go test ./e2e/ts/)`);
  return v;
};
const bin = env('AIRLOCK_BIN');
const base = env('AIRLOCK_URL');
const token = env('AIRLOCK_TOKEN');
const reviewer = env('AIRLOCK_REVIEWER_TOKEN');
const itemId = env('AIRLOCK_ITEM_ID');

const toolNames = [
  'approval_request', 'approval_status', 'approval_cancel', 'approval_prompt',
  'session_open', 'session_heartbeat', 'session_close',
  'work_list', 'work_get',
];

async function stdioClient() {
  const transport = new StdioClientTransport({
    command: bin,
    args: ['mcp'],
    env: { AIRLOCK_URL: base, AIRLOCK_AGENT_TOKEN: token, PATH: process.env.PATH ?? '' },
    stderr: 'pipe',
  });
  const client = new Client({ name: 'airlock-e2e-stdio', version: '0.0.0' });
  await client.connect(transport);
  return { client, transport };
}

async function httpClient(secret = token) {
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', base), {
    requestInit: { headers: { Authorization: `Bearer ${secret}` } },
  });
  const client = new Client({ name: 'airlock-e2e-http', version: '0.0.0' });
  await client.connect(transport);
  return { client, transport };
}

// call calls a tool that must succeed; the SDK has already checked its
// structuredContent against the tool's outputSchema.
async function call(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  assert.ok(!res.isError, `${name} failed: ${JSON.stringify(res.content)}`);
  assert.ok(res.structuredContent, `${name} returned no structuredContent`);
  return res.structuredContent;
}

async function decide(id, body) {
  const res = await fetch(new URL(`/v1/approval-requests/${id}/decision`, base), {
    method: 'POST',
    headers: { Authorization: `Bearer ${reviewer}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 200, `decide ${id}: ${await res.text()}`);
}

test('stdio: tools, a question answered once on the heartbeat, a clean exit', async () => {
  const { client, transport } = await stdioClient();
  let stderr = '';
  transport.stderr?.on('data', (chunk) => { stderr += chunk; });
  try {
    assert.equal(client.getServerVersion()?.name, 'airlock');
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), [...toolNames].sort());
    const ar = tools.find((t) => t.name === 'approval_request');
    assert.equal(ar.inputSchema.additionalProperties, false);
    assert.deepEqual(ar.inputSchema.required, ['kind', 'title', 'proposal', 'idempotencyKey']);
    assert.deepEqual(ar.inputSchema.properties.kind.enum, ['work_change', 'memory_change', 'life_change', 'agent_request']);
    assert.ok(ar.outputSchema, 'approval_request has an output schema');

    const session = await call(client, 'session_open', { name: 'typescript e2e' });
    assert.match(session.sessionId, /^ses_/);
    const ask = {
      kind: 'agent_request',
      title: 'Which day should the release go out?',
      proposal: { mode: 'advisory' },
      sessionId: session.sessionId,
      question: { choices: ['Tuesday', 'Thursday'] },
      idempotencyKey: 'ts-e2e-question',
    };
    const req = await call(client, 'approval_request', ask);
    assert.equal(req.status, 'pending');
    assert.match(req.next, /^pending: a person will decide/);

    const waiting = await call(client, 'session_heartbeat', { sessionId: session.sessionId });
    assert.equal(waiting.session.status, 'waiting');
    assert.deepEqual(waiting.instructions, []);

    await decide(req.approvalId, { status: 'approved', answer: 'Thursday' });
    const status = await call(client, 'approval_status', { approvalId: req.approvalId });
    assert.equal(status.status, 'approved');
    assert.equal(status.answer, 'Thursday');

    const hb = await call(client, 'session_heartbeat', { sessionId: session.sessionId });
    assert.equal(hb.instructions.length, 1);
    assert.equal(hb.instructions[0].answer, 'Thursday');
    assert.match(hb.instructions[0].instructionId, /^ist_/);
    const again = await call(client, 'session_heartbeat', { sessionId: session.sessionId });
    assert.equal(again.instructions.length, 0, 'an instruction is delivered once');

    const bad = await client.callTool({
      name: 'approval_request',
      arguments: { kind: 'agent_request', title: 't', proposal: { mode: 'advisory' }, idempotencyKey: 'ts-bad', expiresInMinutes: 4 },
    });
    assert.equal(bad.isError, true);
    assert.match(bad.content[0].text, /expiresInMinutes must be between 5 and 10080/);

    // The same call again, key and all, replays the request.
    const replay = await call(client, 'approval_request', ask);
    assert.equal(replay.approvalId, req.approvalId);
    assert.equal(replay.replayed, true);

    const closed = await call(client, 'session_close', { sessionId: session.sessionId });
    assert.equal(closed.status, 'closed');
  } finally {
    await client.close();
  }
  assert.doesNotMatch(stderr, /level=ERROR/, `airlock mcp logged errors:\n${stderr}`);
});

test('http: a work_move command runs only when approved', async () => {
  const { client } = await httpClient();
  try {
    const board = await call(client, 'work_list', {});
    assert.deepEqual(board.columns.map((c) => c.key), ['todo', 'done']);
    const req = await call(client, 'approval_request', {
      kind: 'work_change',
      title: 'Close the e2e card',
      proposal: { mode: 'command', command: { method: 'work_move', input: { itemId, columnKey: 'done' } } },
      idempotencyKey: 'ts-e2e-move',
    });
    assert.equal(req.status, 'pending');
    assert.equal(req.commandOutcome.status, 'awaiting_decision');
    assert.equal((await call(client, 'work_get', { itemId })).columnKey, 'todo', 'nothing runs before approval');

    await decide(req.approvalId, { status: 'approved' });
    const status = await call(client, 'approval_status', { approvalId: req.approvalId });
    assert.equal(status.commandOutcome.status, 'applied');
    assert.equal((await call(client, 'work_get', { itemId })).columnKey, 'done');
  } finally {
    await client.close();
  }
});

test('stdio and http: an unknown method is JSON-RPC error -32601, and the session goes on', async () => {
  for (const connect of [stdioClient, httpClient]) {
    const { client } = await connect();
    try {
      await assert.rejects(client.request({ method: 'foo/bar', params: {} }, EmptyResultSchema), (err) => {
        assert.ok(err instanceof McpError, `${connect.name}: ${err}`);
        assert.equal(err.code, -32601);
        assert.match(err.message, /method not found: "foo\/bar"/);
        return true;
      });
      assert.equal((await client.listTools()).tools.length, toolNames.length);
    } finally {
      await client.close();
    }
  }
});

test('http: a bad token is refused', async () => {
  await assert.rejects(httpClient('airlock_not_a_token'), /401|revoked|unknown/i);
});
