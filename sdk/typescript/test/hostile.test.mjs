// The client and the gate believe only what they can check: a fake server
// (node:http, speaking the real API's shapes) approves a call and then
// answers the claim with an empty 2xx, HTML, a truncated body, another
// request's id or state. The tool must never run, here or through the
// framework adapters.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { generateText, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';
import { AirlockClient, Gate, InterruptedError, MalformedAnswerError } from '../dist/index.js';
import { airlockTool } from '../dist/adapters/ai.js';
import { airlockNode } from '../dist/adapters/langgraph.js';
import { airlockTool as agentsTool, approveWithAirlock } from '../dist/adapters/openai-agents.js';
import { Agent, Usage, run, setTracingDisabled } from '@openai/agents';
import { tempDir } from './support/server.mjs';

setTracingDisabled(true);
const ID = 'apr_fake0001';
const INSTANCE = 'ins_fake0001';

function request(over = {}) {
  const now = new Date();
  return {
    id: ID, instance_id: INSTANCE, state: 'approved', kind: 'tool_call', tool: 'refund', arguments: { order: 'A-17' },
    created_at: now.toISOString(), deadline_at: new Date(+now + 600_000).toISOString(),
    decision: { status: 'approved', decided_at: now.toISOString(), expires_at: new Date(+now + 600_000).toISOString() },
    ...over,
  };
}

const claimed = () => request({ execution: { claimed_at: new Date().toISOString(), status: 'claimed' } });

// Each hostile answer to the claim: [what it is, status, content type, body].
const answers = [
  ['an empty 200', 200, 'application/json', ''],
  ['an empty 204', 204, '', ''],
  ['an empty 201', 201, 'application/json', ''],
  ['an HTML page', 200, 'text/html', '<html><body>OK</body></html>'],
  ['a truncated body', 200, 'application/json', JSON.stringify(claimed()).slice(0, 40)],
  ['JSON null', 200, 'application/json', 'null'],
  ['a JSON array', 200, 'application/json', `[${JSON.stringify(claimed())}]`],
  ["another request's id", 200, 'application/json', JSON.stringify({ ...claimed(), id: 'apr_other0001' })],
  ['the request still pending', 200, 'application/json', JSON.stringify({ ...claimed(), state: 'pending' })],
  ['the request denied', 200, 'application/json', JSON.stringify({ ...claimed(), state: 'denied' })],
  ['no execution', 200, 'application/json', JSON.stringify(request())],
  ['the execution already succeeded', 200, 'application/json', JSON.stringify({ ...claimed(), execution: { claimed_at: new Date().toISOString(), status: 'succeeded' } })],
];

/** A fake Airlock: creates answer an approved request; the claim gets srv.claim; reads show srv.readBack. */
function fake() {
  const srv = { claim: answers[0], readBack: request(), claims: 0, reports: [] };
  srv.http = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      const json = (status, v) => {
        res.writeHead(status, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify(v));
      };
      const path = req.url.split('?')[0];
      if (req.method === 'POST' && path === `/v1/instances/${INSTANCE}/approval-requests`) return json(201, request());
      if (req.method === 'GET' && path === `/v1/approval-requests/${ID}`) return json(200, srv.readBack);
      if (req.method === 'POST' && path === `/v1/approval-requests/${ID}/execution`) {
        srv.claims++;
        const [, status, type, text] = srv.claim;
        res.writeHead(status, type ? { 'Content-Type': type } : {});
        return res.end(text);
      }
      if (req.method === 'PUT' && path === `/v1/approval-requests/${ID}/execution`) {
        srv.reports.push(JSON.parse(body).status);
        return json(200, { ...claimed(), execution: { claimed_at: new Date().toISOString(), status: JSON.parse(body).status } });
      }
      json(404, { code: 'not_found', detail: `no ${req.method} ${path} in this fake` });
    });
  });
  return srv;
}

let srv;
let url;
let dir;
let n = 0;
before(async () => {
  srv = fake();
  await new Promise((r) => srv.http.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${srv.http.address().port}`;
  dir = tempDir('airlock-hostile-');
});
after(async () => {
  await new Promise((r) => srv.http.close(r));
  rmSync(dir, { recursive: true, force: true });
});

function client() {
  return new AirlockClient({ baseUrl: url, token: 'agent', retry: { attempts: 2, minBackoffMs: 1, maxBackoffMs: 2 } });
}

function gate() {
  return new Gate({ client: client(), instanceId: INSTANCE, journalDir: join(dir, `j${n++}`) });
}

for (const answer of answers) {
  test(`a claim answered with ${answer[0]}: the client refuses it, the gate never runs the tool`, async () => {
    srv.claim = answer;
    srv.readBack = request();
    await assert.rejects(client().claimExecution(ID), MalformedAnswerError);

    const g = gate();
    let runs = 0;
    const err = await g.run({ tool: 'refund', arguments: { order: 'A-17' } }, () => { runs++; }).catch((e) => e);
    g.close();
    assert.equal(runs, 0, 'the tool ran');
    assert.ok(err instanceof Error, `run resolved: ${JSON.stringify(err)}`);
    assert.match(String(err), /cannot be trusted/);
  });
}

test('a claim that landed but whose answer cannot be trusted is reported unknown, not run', async () => {
  srv.claim = answers[3]; // HTML
  srv.readBack = claimed(); // the read-back shows the claim landed
  srv.reports = [];
  const g = gate();
  let runs = 0;
  const err = await g.run({ tool: 'refund', arguments: { order: 'A-17' } }, () => { runs++; }).catch((e) => e);
  g.close();
  assert.equal(runs, 0);
  assert.ok(err instanceof InterruptedError && !err.started, String(err));
  assert.deepEqual(srv.reports, ['unknown']);
});

test('a create answered with another request, or with HTML, is refused before anything is asked', async () => {
  const c = client();
  const fakeCreate = (body, type = 'application/json') => new AirlockClient({
    baseUrl: url, token: 'agent', retry: { attempts: 1 },
    fetch: async () => new Response(body, { status: 201, headers: { 'Content-Type': type } }),
  });
  await assert.rejects(fakeCreate(JSON.stringify(request({ tool: 'rm' }))).createRequest(INSTANCE, 'k1', { tool: 'refund' }), /tool "rm", not "refund"/);
  await assert.rejects(fakeCreate(JSON.stringify(request({ instance_id: 'ins_other' }))).createRequest(INSTANCE, 'k1', { tool: 'refund' }), MalformedAnswerError);
  await assert.rejects(fakeCreate('<html></html>', 'text/html').createRequest(INSTANCE, 'k1', { tool: 'refund' }), MalformedAnswerError);
  srv.readBack = { ...request(), id: 'apr_other0001' };
  await assert.rejects(c.getRequest(ID), /"apr_other0001", not "apr_fake0001"/);
});

test('the AI SDK adapter: a claim answered with an empty 200 never runs the tool', async () => {
  srv.claim = answers[0];
  srv.readBack = request();
  const g = gate();
  const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
  const model = new MockLanguageModelV3({
    doGenerate: [
      { content: [{ type: 'tool-call', toolCallId: 'call-1', toolName: 'refund', input: '{"order":"A-17"}' }], finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [] },
      { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] },
    ],
  });
  let runs = 0;
  const refund = tool({ inputSchema: z.object({ order: z.string() }), execute: async () => { runs++; return 'refunded'; } });
  const out = await generateText({ model, tools: { refund: airlockTool(g, 'refund', refund) }, prompt: 'refund A-17' }).catch((e) => e);
  g.close();
  assert.equal(runs, 0, 'the tool ran');
  const results = out instanceof Error ? [] : out.steps.flatMap((s) => s.content).filter((p) => p.type === 'tool-result');
  assert.deepEqual(results, [], 'the model got a tool result');
});

test('the LangGraph adapter: a claim answered with HTML never runs the action', async () => {
  srv.claim = answers[3];
  srv.readBack = request();
  const g = gate();
  let runs = 0;
  const node = airlockNode({
    gate: g, mode: 'wait', call: () => ({ tool: 'refund', arguments: { order: 'A-17' } }),
    run: () => { runs++; return { done: true }; }, refused: (v) => ({ refused: v.outcome }),
  });
  await assert.rejects(node({}), /cannot be trusted/);
  g.close();
  assert.equal(runs, 0);
});

test('the OpenAI Agents SDK adapter: a claim answered with another request\'s id never runs the tool', async () => {
  srv.claim = answers[7];
  srv.readBack = request();
  const g = gate();
  let runs = 0;
  const refund = agentsTool(g, {
    name: 'refund', description: 'Refund an order', parameters: z.object({ order: z.string() }),
    execute: async () => { runs++; return 'refunded'; },
  });
  let calls = 0;
  const model = {
    async getResponse() {
      if (calls++ === 0) {
        return { usage: new Usage(), output: [{ type: 'function_call', callId: 'call-1', name: 'refund', arguments: '{"order":"A-17"}', status: 'completed' }] };
      }
      return { usage: new Usage(), output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }] };
    },
    async *getStreamedResponse() { throw new Error('not used'); },
  };
  const agent = new Agent({ name: 'clerk', instructions: 'refund', model, tools: [refund] });
  const first = await run(agent, 'refund A-17');
  const settled = await approveWithAirlock(first, g);
  assert.deepEqual(settled.map((s) => s.approved), [true]); // the fake approved it
  await run(agent, first.state).catch((e) => e);
  g.close();
  assert.equal(runs, 0, 'the tool ran');
});
