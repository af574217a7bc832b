// The OpenAI Agents SDK adapter with the Agents SDK's own Agent, run(),
// tool(), interruptions and RunState approve/reject, against the real
// server. The package ships no fake model, so the model is the SDK's own
// extension point: an object implementing its Model interface that
// answers with scripted responses (no network).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { Agent, Usage, run, setTracingDisabled } from '@openai/agents';
import { z } from 'zod';
import { Gate } from '@airlockhq/sdk';
import { airlockTool, approveWithAirlock } from '@airlockhq/sdk/openai-agents';
import { startServer, tempDir } from './support/server.mjs';

setTracingDisabled(true);
let srv;
let dir;
before(async () => { srv = await startServer(); dir = tempDir('airlock-agents-'); });
after(async () => { await srv?.stop(); rmSync(dir, { recursive: true, force: true }); });

/** A Model that calls transfer once, then answers with the tool's output it was given. */
class ScriptedModel {
  constructor(args, callId) { this.args = args; this.callId = callId; this.requests = []; }
  async getResponse(request) {
    this.requests.push(request);
    if (this.requests.length === 1) {
      return { usage: new Usage(), output: [{ type: 'function_call', callId: this.callId, name: 'transfer', arguments: JSON.stringify(this.args), status: 'completed' }] };
    }
    const input = JSON.stringify(request.input);
    return { usage: new Usage(), output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: `saw: ${input}` }] }] };
  }
  // eslint-disable-next-line require-yield
  async *getStreamedResponse() { throw new Error('not used'); }
}

let n = 0;
async function setup(args, callId, gateOpts = {}) {
  const inst = await srv.agent.registerInstance('openai agents');
  const gate = new Gate({ client: srv.agent, instanceId: inst.id, journalDir: `${dir}/j${n++}`, pollWaitMs: 5000, ...gateOpts });
  const runs = [];
  const transfer = airlockTool(gate, {
    name: 'transfer', description: 'Move money',
    parameters: z.object({ to: z.string(), cents: z.number() }),
    execute: async ({ to, cents }) => { runs.push({ to, cents }); return `moved ${cents} to ${to}`; },
  });
  const model = new ScriptedModel(args, callId);
  const agent = new Agent({ name: 'treasurer', instructions: 'move money', model, tools: [transfer] });
  return { gate, runs, model, agent };
}

test('approved in Airlock: the interruption is approved and the tool runs once', async () => {
  const { gate, runs, model, agent } = await setup({ to: 'acct_1', cents: 500 }, 'call_a');
  let result = await run(agent, 'pay acct_1');
  assert.equal(result.interruptions.length, 1);
  assert.deepEqual(runs, []);
  const settled = await approveWithAirlock(result, gate, { onPending: (id) => srv.reviewer.approve(id, 'ok') });
  assert.deepEqual(settled.map((s) => [s.tool, s.approved]), [['transfer', true]]);
  result = await run(agent, result.state);
  assert.deepEqual(runs, [{ to: 'acct_1', cents: 500 }]);
  assert.match(result.finalOutput, /moved 500 to acct_1/);
  const r = await srv.agent.getRequest(settled[0].requestId);
  assert.deepEqual([r.tool, r.arguments, r.execution.status], ['transfer', { to: 'acct_1', cents: 500 }, 'succeeded']);
  assert.equal(model.requests.length, 2);
  gate.close();
});

test('denied in Airlock: rejected with the reviewer\'s note, the tool never runs', async () => {
  const { gate, runs, agent } = await setup({ to: 'acct_2', cents: 10_000_00 }, 'call_b');
  let result = await run(agent, 'pay acct_2');
  const settled = await approveWithAirlock(result, gate, { onPending: (id) => srv.reviewer.deny(id, 'needs a second signer') });
  assert.equal(settled[0].approved, false);
  result = await run(agent, result.state);
  assert.deepEqual(runs, []);
  assert.match(result.finalOutput, /needs a second signer/);
  assert.equal((await srv.agent.getRequest(settled[0].requestId)).state, 'denied');
  gate.close();
});

test('approved, but the approval lapsed before the tool could start: not run, the model is told', async () => {
  let skew = 0;
  const { gate, runs, agent } = await setup({ to: 'acct_3', cents: 1 }, 'call_c', { now: () => Date.now() + skew });
  let result = await run(agent, 'pay acct_3');
  const [s] = await approveWithAirlock(result, gate, { onPending: (id) => srv.reviewer.decide(id, { status: 'approved', valid_for: '1m' }) });
  assert.equal(s.approved, true);
  // The gate's clock passes expires_at before the run resumes: it checks before claiming.
  skew = 2 * 60_000;
  result = await run(agent, result.state);
  assert.deepEqual(runs, []);
  assert.match(result.finalOutput, /lapsed/);
  assert.equal((await srv.agent.getRequest(s.requestId)).execution, undefined, 'nothing was claimed');
  gate.close();
});
