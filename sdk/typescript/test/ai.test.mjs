// The Vercel AI SDK adapter with the AI SDK's own generateText and its mock
// language model (MockLanguageModelV3 from ai/test), against the real server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { generateText, stepCountIs, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';
import { Gate } from '@airlockhq/sdk';
import { airlockTool, airlockTools } from '@airlockhq/sdk/ai';
import { startServer, tempDir } from './support/server.mjs';

let srv;
let dir;
before(async () => { srv = await startServer(); dir = tempDir('airlock-ai-'); });
after(async () => { await srv?.stop(); rmSync(dir, { recursive: true, force: true }); });

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };

/** A model that first calls send_email with input, then answers in text. */
function model(input, toolCallId) {
  return new MockLanguageModelV3({
    doGenerate: [
      { content: [{ type: 'tool-call', toolCallId, toolName: 'send_email', input: JSON.stringify(input) }], finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [] },
      { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] },
    ],
  });
}

let n = 0;
async function gate() {
  const inst = await srv.agent.registerInstance('ai sdk');
  return new Gate({ client: srv.agent, instanceId: inst.id, journalDir: `${dir}/j${n++}`, pollWaitMs: 5000 });
}

function sendEmail(sent) {
  return tool({
    description: 'Send an email',
    inputSchema: z.object({ to: z.string(), body: z.string() }),
    execute: async ({ to, body }) => { sent.push({ to, body }); return { sent: true, to }; },
  });
}

test('approved: the tool runs once with the input the reviewer saw, and the model gets its output', async () => {
  const g = await gate();
  const sent = [];
  const input = { to: 'ops@example.com', body: 'restart db' };
  const m = model(input, 'call_1');
  const result = await generateText({
    model: m, prompt: 'email ops', stopWhen: stepCountIs(3),
    tools: { send_email: airlockTool(g, 'send_email', sendEmail(sent), { onPending: (r) => srv.reviewer.approve(r.id), reasoning: () => 'ops asked' }) },
  });
  assert.deepEqual(sent, [input]);
  assert.equal(result.text, 'done');
  const tr = result.steps[0].toolResults[0];
  assert.deepEqual(tr.output, { sent: true, to: 'ops@example.com' });
  const page = await srv.agent.listRequests({ tool: 'send_email' });
  const r = page.items.find((x) => x.instance_id === g.instanceId);
  assert.deepEqual([r.arguments, r.agent_reasoning, r.execution.status], [input, 'ops asked', 'succeeded']);
  // The model's second call saw the tool's result.
  assert.match(JSON.stringify(m.doGenerateCalls[1].prompt), /"sent":true/);
  g.close();
});

test('denied: the tool never runs and the model reads the reviewer\'s note', async () => {
  const g = await gate();
  const sent = [];
  const m = model({ to: 'all@example.com', body: 'hi' }, 'call_2');
  const result = await generateText({
    model: m, prompt: 'email everyone', stopWhen: stepCountIs(3),
    tools: airlockTools(g, { send_email: sendEmail(sent) }, { onPending: (r) => srv.reviewer.deny(r.id, 'not to the whole company') }),
  });
  assert.deepEqual(sent, []);
  const out = result.steps[0].toolResults[0].output;
  assert.deepEqual([out.airlock.outcome, out.airlock.ran, out.airlock.note], ['denied', false, 'not to the whole company']);
  assert.match(JSON.stringify(m.doGenerateCalls[1].prompt), /not to the whole company/);
  g.close();
});

test('expired: told apart from a denial', async () => {
  const g = await gate();
  const sent = [];
  const result = await generateText({
    model: model({ to: 'x@example.com', body: 'late' }, 'call_3'), prompt: 'p', stopWhen: stepCountIs(3),
    tools: { send_email: airlockTool(g, 'send_email', sendEmail(sent), { timeout: '100ms' }) },
  });
  assert.deepEqual(sent, []);
  assert.equal(result.steps[0].toolResults[0].output.airlock.outcome, 'expired');
  g.close();
});
