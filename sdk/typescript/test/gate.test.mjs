// The Gate against the real server: each outcome told apart (ran, denied
// with its note, expired, cancelled, lapsed, already executed, tool failed),
// at most once when the same approval arrives twice or two gates race.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import {
  Gate, DeniedError, ExpiredError, CancelledError, LapsedError, AlreadyExecutedError, ToolError,
  OutcomeUnknownError, describeOutcome, AirlockClient, NetworkError,
} from '../dist/index.js';
import { startServer, tempDir } from './support/server.mjs';

let srv;
const dirs = [];
before(async () => { srv = await startServer(); });
after(async () => {
  await srv?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function newGate(opts = {}) {
  const inst = await srv.agent.registerInstance('gate test');
  const dir = tempDir('airlock-gate-');
  dirs.push(dir);
  return new Gate({ client: srv.agent, instanceId: inst.id, journalDir: join(dir, 'journal'), pollWaitMs: 5000, ...opts });
}

/** A call whose reviewer acts (with the reviewer client) as soon as it is pending. */
function decidedBy(decide, call = {}) {
  return {
    tool: 'send_email', arguments: { to: 'a@example.com', body: 'hi' }, timeout: '5m', ...call,
    onPending: (r) => { if (!call._decided) { call._decided = true; decide(r).catch((e) => { call._err = e; }); } },
  };
}

test('approved: runs once, reports succeeded; the same call again is not re-run', async () => {
  const gate = await newGate();
  let runs = 0;
  const call = decidedBy((r) => srv.reviewer.approve(r.id, 'ok'));
  const out = await gate.run(call, async (signal) => { runs++; assert.ok(signal instanceof AbortSignal); return 42; });
  assert.deepEqual([out.value, out.status, out.request.execution.status, runs], [42, 'succeeded', 'succeeded', 1]);
  assert.equal(out.request.arguments.to, 'a@example.com');
  const again = await gate.run(call, () => { runs++; }).catch((e) => e);
  assert.ok(again instanceof AlreadyExecutedError && again.here && again.status === 'succeeded', String(again));
  assert.equal(runs, 1);
  assert.equal(gate.outstanding(), 0);
  gate.close();
});

test('denied: the note reaches the caller, the tool never runs', async () => {
  const gate = await newGate();
  let runs = 0;
  const err = await gate.run(decidedBy((r) => srv.reviewer.deny(r.id, 'not to customers')), () => { runs++; }).catch((e) => e);
  assert.ok(err instanceof DeniedError, String(err));
  assert.equal(err.note, 'not to customers');
  assert.equal(runs, 0);
  const v = describeOutcome(err);
  assert.deepEqual([v.outcome, v.ran, v.note], ['denied', false, 'not to customers']);
  assert.match(v.message, /not to customers/);
  gate.close();
});

test('expired: nobody decided before the deadline', async () => {
  const gate = await newGate();
  let runs = 0;
  const err = await gate.run({ tool: 'slow', arguments: {}, timeout: '100ms' }, () => { runs++; }).catch((e) => e);
  assert.ok(err instanceof ExpiredError, String(err));
  assert.equal(err.request.state, 'expired');
  assert.equal(runs, 0);
  assert.equal(describeOutcome(err).outcome, 'expired');
  gate.close();
});

test('cancelled: withdrawn by the owner elsewhere, or abandoned by the caller', async () => {
  const gate = await newGate();
  let runs = 0;
  const err = await gate.run(decidedBy((r) => srv.agent.cancelRequest(r.id)), () => { runs++; }).catch((e) => e);
  assert.ok(err instanceof CancelledError && !err.abandoned, String(err));

  const ac = new AbortController();
  const call = { tool: 'wait_forever', arguments: {}, timeout: '5m', onPending: () => ac.abort() };
  const err2 = await gate.run(call, () => { runs++; }, { signal: ac.signal }).catch((e) => e);
  assert.ok(err2 instanceof CancelledError && err2.abandoned, String(err2));
  assert.equal((await srv.agent.getRequest(err2.request.id)).state, 'cancelled', 'the gate withdrew the abandoned request');
  assert.equal(runs, 0);
  assert.equal(describeOutcome(err2).outcome, 'cancelled');
  gate.close();
});

/**
 * A fetch that lets the first create reach the server and reads its answer,
 * then aborts the caller's signal as if the answer had not arrived yet: the
 * request stands on the server, and the caller never learns its ID. Later
 * creates go through, or fail with no answer when failLater is set.
 */
function abortAfterCreate(ac, { failLater = false } = {}) {
  const f = async (url, init) => {
    if (init?.method !== 'POST' || !new URL(url).pathname.endsWith('/approval-requests')) return fetch(url, init);
    if (++f.creates > 1) {
      if (failLater) throw new TypeError('fetch failed: connection refused');
      return fetch(url, init);
    }
    const res = await fetch(url, init);
    await res.text();
    ac.abort();
    throw init.signal.reason;
  };
  f.creates = 0;
  return f;
}

test('abandoned while the create is answered: the gate finds the request with the same key and withdraws it', async () => {
  const ac = new AbortController();
  const lost = abortAfterCreate(ac);
  const client = new AirlockClient({ baseUrl: srv.url, token: srv.agentToken, fetch: lost });
  const gate = await newGate({ client });
  let runs = 0;
  const err = await gate.run({ tool: 'delete_repo', arguments: { repo: 's' }, timeout: '5m' }, () => { runs++; }, { signal: ac.signal }).catch((e) => e);
  assert.ok(err instanceof CancelledError && err.abandoned && err.cancelError === undefined && err.request.id, String(err));
  assert.equal(lost.creates, 2, 'the gate asks twice: the ask cut short, then the same key to find it');
  assert.equal((await srv.agent.getRequest(err.request.id)).state, 'cancelled', 'the gate withdrew the request');
  assert.equal(runs, 0);
  assert.equal(describeOutcome(err).outcome, 'cancelled');
  gate.close();
});

test('abandoned while the create is answered, and the ask again gets no answer: the request, if made, will expire', async () => {
  const ac = new AbortController();
  const lost = abortAfterCreate(ac, { failLater: true });
  const client = new AirlockClient({ baseUrl: srv.url, token: srv.agentToken, fetch: lost, retry: { attempts: 2, minBackoffMs: 1, maxBackoffMs: 2 } });
  const gate = await newGate({ client });
  const err = await gate.run({ tool: 'unreachable_withdraw', arguments: {}, timeout: '5m' }, () => {}, { signal: ac.signal }).catch((e) => e);
  assert.ok(err instanceof CancelledError && err.abandoned && err.request.id === '' && err.cancelError instanceof NetworkError, String(err));
  assert.match(err.message, /gave up asking for approval of unreachable_withdraw; withdrawing failed \(.*connection refused.*\): if the request was made, it will expire/);
  assert.equal(lost.creates, 3, 'the ask cut short, then the same key twice (the client\'s retries)');
  const left = (await srv.agent.listRequests({ state: 'pending', tool: 'unreachable_withdraw' })).items;
  assert.equal(left.length, 1, 'the first ask made the request; nothing could withdraw it');
  gate.close();
});

test('lapsed: approved, but permission to start ended before the call could start', async () => {
  // The local clock is past expires_at before claiming: nothing is claimed.
  let skew = 0;
  const gate = await newGate({ now: () => Date.now() + skew });
  let runs = 0;
  skew = 10 * 60_000;
  const err = await gate.run(decidedBy((r) => srv.reviewer.decide(r.id, { status: 'approved', valid_for: '1m' }), { tool: 'lapse1' }), () => { runs++; }).catch((e) => e);
  assert.ok(err instanceof LapsedError && !err.claimed, String(err));
  assert.equal((await srv.agent.getRequest(err.request.id)).execution, undefined);

  // Past expires_at between the claim and the start: claimed, reported failed, not run.
  let reads = 0;
  const gate2 = await newGate({ now: () => (reads++ === 0 ? Date.now() : Date.now() + 10 * 60_000) });
  const err2 = await gate2.run(decidedBy((r) => srv.reviewer.decide(r.id, { status: 'approved', valid_for: '1m' }), { tool: 'lapse2' }), () => { runs++; }).catch((e) => e);
  assert.ok(err2 instanceof LapsedError && err2.claimed, String(err2));
  assert.equal(err2.request.execution.status, 'failed');
  assert.equal(runs, 0);
  assert.equal(describeOutcome(err2).outcome, 'lapsed');
  gate.close();
  gate2.close();
});

test('a tool that throws is reported failed; an OutcomeUnknownError unknown', async () => {
  const gate = await newGate();
  const err = await gate.run(decidedBy((r) => srv.reviewer.approve(r.id), { tool: 'fails' }), () => { throw new Error('disk full'); }).catch((e) => e);
  assert.ok(err instanceof ToolError && err.status === 'failed', String(err));
  assert.deepEqual([err.request.execution.status, err.request.execution.detail], ['failed', 'disk full']);
  const err2 = await gate.run(decidedBy((r) => srv.reviewer.approve(r.id), { tool: 'unknown' }), () => { throw new OutcomeUnknownError('connection reset mid-call'); }).catch((e) => e);
  assert.ok(err2 instanceof ToolError && err2.status === 'unknown', String(err2));
  assert.equal(err2.request.execution.status, 'unknown');
  assert.equal(describeOutcome(err2).ran, true);
  gate.close();
});

test('two gates racing for one approval: exactly one runs', async () => {
  const inst = await srv.agent.registerInstance('race');
  const mk = () => {
    const dir = tempDir('airlock-race-');
    dirs.push(dir);
    return new Gate({ client: srv.agent, instanceId: inst.id, journalDir: dir, pollWaitMs: 5000 });
  };
  const g1 = mk();
  const g2 = mk();
  const call = { tool: 'race', arguments: { n: 1 }, idempotencyKey: 'race-1', timeout: '5m' };
  const { request } = await srv.agent.createRequest(inst.id, 'race-1', { tool: 'race', arguments: { n: 1 }, timeout: '5m' });
  await srv.reviewer.approve(request.id);
  let runs = 0;
  const results = await Promise.allSettled([g1.run(call, () => { runs++; }), g2.run(call, () => { runs++; })]);
  assert.equal(runs, 1);
  const failed = results.filter((r) => r.status === 'rejected');
  assert.equal(failed.length, 1);
  assert.ok(failed[0].reason instanceof AlreadyExecutedError && !failed[0].reason.here, String(failed[0].reason));
  g1.close();
  g2.close();
});

test('the same call twice at once in one gate runs once', async () => {
  const gate = await newGate();
  let runs = 0;
  let approve;
  const approved = new Promise((r) => { approve = r; });
  const call = { tool: 'twice', arguments: {}, timeout: '5m', onPending: (r) => approve(srv.reviewer.approve(r.id)) };
  const results = await Promise.allSettled([gate.run(call, () => { runs++; }), gate.run(call, () => { runs++; })]);
  await approved;
  assert.equal(runs, 1);
  assert.deepEqual(results.map((r) => r.status).sort(), ['fulfilled', 'rejected']);
  gate.close();
});

test('a journal is locked: a second gate on it is refused until the first closes', async () => {
  const dir = tempDir('airlock-lock-');
  dirs.push(dir);
  const inst = await srv.agent.registerInstance('lock');
  const g1 = new Gate({ client: srv.agent, instanceId: inst.id, journalDir: dir });
  assert.throws(() => new Gate({ client: srv.agent, instanceId: inst.id, journalDir: dir }), /already open/);
  g1.close();
  new Gate({ client: srv.agent, instanceId: inst.id, journalDir: dir }).close();
});

test('keys: same call same key whatever the key order; new arguments or attempt, new key', async () => {
  const gate = await newGate();
  const k = gate.key({ tool: 't', arguments: { a: 1, b: [1, { y: 2, x: 1 }] } });
  assert.equal(gate.key({ tool: 't', arguments: '{"b":[1,{"x":1,"y":2}],"a":1}' }), k);
  assert.notEqual(gate.key({ tool: 't', arguments: { a: 2, b: [1, { y: 2, x: 1 }] } }), k);
  assert.notEqual(gate.key({ tool: 't', arguments: { a: 1, b: [1, { y: 2, x: 1 }] }, attemptKey: 'call_2' }), k);
  assert.match(k, /^gate-[0-9a-f]{40}$/);
  gate.close();
});

test('a journal that lost its last lines to a power cut converges on what the server holds', async () => {
  const inst = await srv.agent.registerInstance('power cut');
  const dir = tempDir('airlock-cut-');
  dirs.push(dir);
  const g1 = new Gate({ client: srv.agent, instanceId: inst.id, journalDir: dir, pollWaitMs: 5000 });
  let runs = 0;
  const call = decidedBy((r) => srv.reviewer.approve(r.id), { tool: 'cut' });
  const out = await g1.run(call, () => { runs++; });
  g1.close();
  // Only the lines up to "claimed" reached the disk.
  const { readdirSync, readFileSync, writeFileSync } = await import('node:fs');
  const file = join(dir, readdirSync(dir).find((f) => f.endsWith('.log')));
  const lines = readFileSync(file, 'utf8').split('\n');
  writeFileSync(file, lines.slice(0, lines.findIndex((l) => l.startsWith('claimed ')) + 1).join('\n') + '\n');

  const g2 = new Gate({ client: srv.agent, instanceId: inst.id, journalDir: dir, pollWaitMs: 5000 });
  assert.equal(g2.outstanding(), 1);
  const recs = await g2.recover();
  assert.deepEqual(recs.map((r) => [r.requestId, r.error]), [[out.request.id, undefined]]);
  assert.equal(g2.outstanding(), 0);
  assert.equal((await srv.agent.getRequest(out.request.id)).execution.status, 'succeeded', 'the server keeps the outcome it had');
  const again = await g2.run(call, () => { runs++; }).catch((e) => e);
  assert.ok(again instanceof AlreadyExecutedError, String(again));
  assert.equal(runs, 1);
  g2.close();
});

test('the claim is sent while the claiming line is fsynced; the call starts only once both are done', async () => {
  const gate = await newGate();
  let release;
  const fsynced = new Promise((resolve) => { release = resolve; });
  const realFsync = gate.journal.fsync;
  let calls = 0;
  gate.journal.fsync = async (fd) => { calls++; await fsynced; return realFsync(fd); };
  let runs = 0;
  let id;
  const call = decidedBy((r) => { id = r.id; return srv.reviewer.approve(r.id); }, { tool: 'overlap' });
  const running = gate.run(call, () => { runs++; return 'ran'; });
  // The claim lands on the server while the fsync is held back; the call has not started.
  for (let i = 0; ; i++) {
    if (id && (await srv.agent.getRequest(id)).execution) break;
    assert.ok(i < 500, 'the claim was not sent while the journal was being fsynced');
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.equal(runs, 0, 'the call started before its claiming line was durable');
  assert.equal(calls, 1);
  release();
  const out = await running;
  assert.deepEqual([out.value, runs, out.request.execution.status], ['ran', 1, 'succeeded']);
  gate.close();
});

test('a claiming line that cannot be fsynced: the call never starts, and the claim is reported failed', async () => {
  const gate = await newGate();
  gate.journal.fsync = async () => { throw Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' }); };
  let runs = 0;
  const call = decidedBy((r) => srv.reviewer.approve(r.id), { tool: 'eio' });
  const err = await gate.run(call, () => { runs++; }).catch((e) => e);
  assert.match(String(err), /not started: EIO/);
  assert.equal(runs, 0);
  const r = await srv.agent.getRequest(gate.journal.read(gate.key(call)).requestId);
  assert.deepEqual([r.execution.status, r.execution.detail], ['failed', 'not started: the gate could not write its journal']);
  gate.close();
});

test('a power cut took the claiming line after the claim landed: the restart does not run the call', async () => {
  // The window the overlap opens: the claim was granted, its "claiming" line
  // not yet durable, and the machine lost power. The call had not started
  // (it waits for the fsync); the journal says only "requested".
  const inst = await srv.agent.registerInstance('lost claiming');
  const dir = tempDir('airlock-lost-');
  dirs.push(dir);
  const g1 = new Gate({ client: srv.agent, instanceId: inst.id, journalDir: dir, pollWaitMs: 5000 });
  const call = { tool: 'lost_claiming', arguments: { n: 1 }, timeout: '5m' };
  const asked = await g1.ask(call);
  await srv.reviewer.approve(asked.id);
  await srv.agent.claimExecution(asked.id); // the claim that landed
  g1.close();

  const g2 = new Gate({ client: srv.agent, instanceId: inst.id, journalDir: dir, pollWaitMs: 5000 });
  assert.equal(g2.outstanding(), 0, 'nothing the journal knows is unsettled');
  assert.deepEqual(await g2.recover(), []);
  let runs = 0;
  const again = await g2.run(call, () => { runs++; }).catch((e) => e);
  assert.ok(again instanceof AlreadyExecutedError && !again.here, String(again));
  assert.equal(runs, 0);
  g2.close();
});

test('syncEveryStep fsyncs every line as it is written', async () => {
  const gate = await newGate({ syncEveryStep: true });
  let asyncFsyncs = 0;
  gate.journal.fsync = async () => { asyncFsyncs++; };
  const call = decidedBy((r) => srv.reviewer.approve(r.id), { tool: 'every_step' });
  const out = await gate.run(call, () => 'ok');
  assert.equal(out.request.execution.status, 'succeeded');
  assert.equal(asyncFsyncs, 0, 'with syncEveryStep the lines are fsynced as they are written, not in the background');
  gate.close();
});
