// Edits (docs/protocol.md, "Edits"): a call a reviewer approved with
// changed arguments runs only with acceptEdits, then with the reviewer's
// arguments, once, on the replacement; without it, DeniedError names the
// replacement and nothing runs. The adapter's claims go with the request.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { Gate, DeniedError, AirlockError } from '../dist/index.js';
import { startServer, tempDir } from './support/server.mjs';

let srv;
const dirs = [];
before(async () => { srv = await startServer(); });
after(async () => {
  await srv?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function newGate(opts = {}) {
  const inst = await srv.agent.registerInstance('edit test');
  const dir = tempDir('airlock-edit-');
  dirs.push(dir);
  return new Gate({ client: srv.agent, instanceId: inst.id, journalDir: join(dir, 'journal'), pollWaitMs: 5000, ...opts });
}

function editedBy(args, call) {
  let done = false;
  return {
    tool: 'send_email', arguments: { to: 'all@example.com', body: 'hi' }, timeout: '5m', ...call,
    onPending: (r) => {
      if (done) return;
      done = true;
      srv.reviewer.edit(r.id, args, 'only the team').catch((e) => { call.err = e; });
    },
  };
}

test('without acceptEdits: DeniedError names the replacement, nothing runs', async () => {
  const gate = await newGate();
  let runs = 0;
  const err = await gate.run(editedBy({ to: 'team@example.com', body: 'hi' }, { attemptKey: 'no-edits' }), () => { runs++; }).catch((e) => e);
  assert.ok(err instanceof DeniedError, String(err));
  assert.match(err.replacedBy, /^apr_/);
  assert.match(err.message, /acceptEdits/);
  assert.equal(runs, 0);
  const rep = await srv.agent.getRequest(err.replacedBy);
  assert.deepEqual([rep.state, rep.execution, rep.derived_from], ['approved', undefined, err.request.id]);
  gate.close();
});

test('with acceptEdits: the edited call runs once, with its own arguments', async () => {
  const gate = await newGate({ acceptEdits: true });
  const seen = [];
  const call = editedBy({ to: 'team@example.com', body: 'hi' }, { attemptKey: 'edits',
    preview: { type: 'text', content: 'mails everyone' }, reversibility: 'irreversible' });
  const out = await gate.run(call, (signal, run) => { seen.push(run.arguments); assert.ok(run.approvalToken); return 'sent'; });
  assert.deepEqual(seen, [{ to: 'team@example.com', body: 'hi' }]);
  assert.equal(out.value, 'sent');
  assert.match(out.request.derived_from, /^apr_/);
  const orig = await srv.agent.getRequest(out.request.derived_from);
  assert.deepEqual([orig.state, orig.decision.replaced_by, orig.execution], ['denied', out.request.id, undefined]);
  assert.deepEqual([orig.preview, orig.reversibility], [{ type: 'text', content: 'mails everyone' }, 'irreversible']);
  gate.close();
});

test('agents never edit', async () => {
  const inst = await srv.agent.registerInstance('agent edit');
  const { request } = await srv.agent.createRequest(inst.id, 'agent-edit', { tool: 'send_email', arguments: { to: 'x@example.com' } });
  const err = await srv.agent.edit(request.id, { to: 'y@example.com' }).catch((e) => e);
  assert.ok(err instanceof AirlockError && err.code === 'forbidden', String(err));
});
