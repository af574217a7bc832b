// The gate killed with SIGKILL at each crash point, then restarted with the
// same journal (docs/reliability.md): the tool never runs twice, and a run
// a crash interrupted is reported unknown. The gate is its own node process
// (support/gate-helper.mjs) against the real server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, tempDir } from './support/server.mjs';

const helperPath = join(dirname(fileURLToPath(import.meta.url)), 'support', 'gate-helper.mjs');
let srv;
before(async () => { srv = await startServer(); });
after(async () => { await srv?.stop(); });

/** Runs the helper, approving its request when it shows pending; resolves {killed, res}. */
async function runHelper(h) {
  const proc = spawn(process.execPath, [helperPath], {
    env: {
      ...process.env, AIRLOCK_HELPER_URL: srv.url, AIRLOCK_HELPER_TOKEN: srv.agentToken,
      AIRLOCK_HELPER_INSTANCE: h.instance, AIRLOCK_HELPER_JOURNAL: h.journal, AIRLOCK_HELPER_COUNT: h.count,
      AIRLOCK_HELPER_CRASH: h.mode, AIRLOCK_HELPER_RECOVER: h.recover ? '1' : '',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  let last = '';
  for await (const line of createInterface({ input: proc.stdout })) {
    if (line.startsWith('pending ')) {
      await srv.reviewer.approve(line.slice('pending '.length));
      continue;
    }
    last = line;
  }
  const { code, signal } = await exited;
  if (signal === 'SIGKILL') return { killed: true };
  assert.equal(code, 0, `helper ${h.mode} exited ${code}: ${last}\n${stderr}`);
  return { killed: false, res: JSON.parse(last) };
}

function runs(path) {
  return existsSync(path) ? readFileSync(path, 'utf8').split('ran\n').length - 1 : 0;
}

const cases = [
  // crash point, tool runs before the crash, outcome of running the same call again, started, server's final status
  ['claim-answer', 0, 'interrupted', false, 'unknown'],
  ['claim-unsynced', 0, 'interrupted', false, 'unknown'],
  ['after-claim', 0, 'interrupted', true, 'unknown'],
  ['during-run', 1, 'interrupted', true, 'unknown'],
  ['after-run', 1, 'already_executed', false, 'succeeded'],
];

// Killed with the "claiming" line written but the claim not sent: the claim
// never landed, so the restart claims and runs the call, once.
for (const recover of [false, true]) {
  test(`crash claim-unsent, restart ${recover ? 'recovers first' : 'runs the call again'}: runs once`, async () => {
    const inst = await srv.agent.registerInstance(`crash claim-unsent ${recover}`);
    const dir = tempDir('airlock-crash-');
    try {
      const h = { instance: inst.id, journal: join(dir, 'journal'), count: join(dir, 'count'), mode: 'claim-unsent', recover: false };
      assert.ok((await runHelper(h)).killed, 'the helper was not killed before the claim');
      assert.equal(runs(h.count), 0);
      Object.assign(h, { mode: 'none', recover });
      let { res } = await runHelper(h);
      if (recover) assert.deepEqual(res.recover, [], 'nothing to report: the claim never landed');
      assert.equal(res.outcome, 'ok', JSON.stringify(res));
      assert.equal(runs(h.count), 1);
      assert.equal((await srv.agent.getRequest(res.request_id)).execution?.status, 'succeeded');
      ({ res } = await runHelper(h));
      assert.equal(runs(h.count), 1, 'run again after it ran');
      assert.deepEqual([res.outcome, res.here, res.status], ['already_executed', true, 'succeeded']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

for (const [crash, wantRuns, outcome, started, status] of cases) {
  for (const recover of [false, true]) {
    test(`crash ${crash}, restart ${recover ? 'recovers first' : 'runs the call again'}`, async () => {
      const inst = await srv.agent.registerInstance(`crash ${crash} ${recover}`);
      const dir = tempDir('airlock-crash-');
      try {
        const h = { instance: inst.id, journal: join(dir, 'journal'), count: join(dir, 'count'), mode: crash, recover: false };
        const first = await runHelper(h);
        assert.ok(first.killed, `the helper was not killed at ${crash}: ${JSON.stringify(first.res)}`);
        assert.equal(runs(h.count), wantRuns, 'runs before the crash');

        Object.assign(h, { mode: 'none', recover });
        let { res } = await runHelper(h);
        assert.equal(runs(h.count), wantRuns, 'the restart ran the tool again');
        let want = outcome;
        if (recover) {
          // recover() settled it; the run finds the outcome recorded.
          want = 'already_executed';
          assert.deepEqual(res.recover.map((r) => [r.status, r.error]), [[status, '']], 'recover');
        }
        assert.equal(res.outcome, want, JSON.stringify(res));
        if (want === 'interrupted') assert.equal(res.started, started);
        else assert.deepEqual([res.here, res.status], [true, status]);
        const r = await srv.agent.getRequest(res.request_id);
        assert.equal(r.execution?.status, status, "the server's execution");

        // And again: still never re-run, the same answer.
        ({ res } = await runHelper(h));
        assert.equal(runs(h.count), wantRuns);
        assert.deepEqual([res.outcome, res.here, res.status], ['already_executed', true, status]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
}
