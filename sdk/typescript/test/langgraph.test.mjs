// The LangGraph.js adapter with LangGraph's own StateGraph, interrupt,
// Command and MemorySaver checkpointer, against the real server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { Annotation, END, MemorySaver, START, StateGraph } from '@langchain/langgraph';
import { Gate } from '@airlockhq/sdk';
import { airlockNode, pendingApprovals, resumeWhenDecided } from '@airlockhq/sdk/langgraph';
import { startServer, tempDir } from './support/server.mjs';

let srv;
let dir;
before(async () => { srv = await startServer(); dir = tempDir('airlock-lg-'); });
after(async () => { await srv?.stop(); rmSync(dir, { recursive: true, force: true }); });

const State = Annotation.Root({
  amount: Annotation(),
  result: Annotation(),
  refusal: Annotation(),
});

let n = 0;
async function build(mode, runs) {
  const inst = await srv.agent.registerInstance('langgraph');
  const gate = new Gate({ client: srv.agent, instanceId: inst.id, journalDir: `${dir}/j${n++}`, pollWaitMs: 5000 });
  const graph = new StateGraph(State)
    .addNode('refund', airlockNode({
      gate, mode,
      call: (s) => ({ tool: 'refund', arguments: { amount: s.amount }, agentReasoning: 'customer asked', timeout: mode === 'wait' ? '100ms' : '5m' }),
      run: async (s) => { runs.push(s.amount); return { result: `refunded ${s.amount}` }; },
      refused: (v) => ({ refusal: `${v.outcome}${v.note ? `: ${v.note}` : ''}` }),
    }))
    .addEdge(START, 'refund')
    .addEdge('refund', END)
    .compile({ checkpointer: new MemorySaver() });
  return { gate, graph };
}

test('the graph pauses on Airlock, and resumes with the decision: approved runs once', async () => {
  const runs = [];
  const { gate, graph } = await build('interrupt', runs);
  const config = { configurable: { thread_id: 'approve' } };
  const first = await graph.invoke({ amount: 30 }, config);
  assert.equal(first.result, undefined);
  assert.ok(first.__interrupt__?.length === 1, 'paused with an interrupt');
  const [id] = pendingApprovals(await graph.getState(config));
  const r = await srv.reviewer.getRequest(id);
  assert.deepEqual([r.state, r.tool, r.arguments, r.agent_reasoning], ['pending', 'refund', { amount: 30 }, 'customer asked']);
  assert.deepEqual(runs, []);

  await srv.reviewer.approve(id);
  const done = await resumeWhenDecided(graph, config, srv.agent);
  assert.equal(done.result, 'refunded 30');
  assert.deepEqual(runs, [30]);
  assert.equal((await srv.agent.getRequest(id)).execution.status, 'succeeded');
  // Nothing left to resume; resuming again does not run it again.
  assert.equal(await resumeWhenDecided(graph, config, srv.agent), undefined);
  assert.deepEqual(runs, [30]);
  gate.close();
});

test('denied: the graph resumes with the note, and the action never runs', async () => {
  const runs = [];
  const { gate, graph } = await build('interrupt', runs);
  const config = { configurable: { thread_id: 'deny' } };
  await graph.invoke({ amount: 5000 }, config);
  const [id] = pendingApprovals(await graph.getState(config));
  // The decision comes while resumeWhenDecided is waiting.
  const resumed = resumeWhenDecided(graph, config, srv.agent);
  await srv.reviewer.deny(id, 'over the refund limit');
  const done = await resumed;
  assert.equal(done.refusal, 'denied: over the refund limit');
  assert.equal(done.result, undefined);
  assert.deepEqual(runs, []);
  gate.close();
});

test('a plain waiting node: expiry is told apart', async () => {
  const runs = [];
  const { gate, graph } = await build('wait', runs);
  const done = await graph.invoke({ amount: 1 }, { configurable: { thread_id: 'wait' } });
  assert.equal(done.refusal, 'expired');
  assert.deepEqual(runs, []);
  gate.close();
});
