// A gate in its own process, for the crash tests (crash.test.mjs): one gate,
// one call, killed with SIGKILL at the crash point AIRLOCK_HELPER_CRASH
// names. Its "tool" appends a line to a file, which counts executions
// across processes. It prints "pending <id>" while waiting for a decision
// and, unless killed, one JSON line with how the call ended.
import { appendFileSync, closeSync, fsyncSync, openSync } from 'node:fs';
import { AirlockClient, Gate, InterruptedError, AlreadyExecutedError } from '../../dist/index.js';

const env = (k) => process.env[`AIRLOCK_HELPER_${k}`] ?? '';
const crash = env('CRASH');
const die = () => {
  process.kill(process.pid, 'SIGKILL');
  return new Promise(() => {});
};

// killFetch kills the process at the HTTP-level crash points: when the
// claim is about to be sent (its "claiming" line written), when the claim's
// answer arrives, and when the report is about to be sent.
let claimAnswered;
const answered = new Promise((resolve) => { claimAnswered = resolve; });
const killFetch = async (url, init) => {
  const execution = new URL(url).pathname.endsWith('/execution');
  if (crash === 'after-run' && execution && init?.method === 'PUT') await die();
  if (crash === 'claim-unsent' && execution && init?.method === 'POST') await die();
  const res = await fetch(url, init);
  if (execution && init?.method === 'POST' && res.status === 200) {
    if (crash === 'claim-answer') await die();
    claimAnswered();
  }
  return res;
};

const client = new AirlockClient({ baseUrl: env('URL'), token: env('TOKEN'), fetch: killFetch });
const gate = new Gate({ client, instanceId: env('INSTANCE'), journalDir: env('JOURNAL'), pollWaitMs: 1000 });
// claim-unsynced: the claim landed and its answer arrived while the
// "claiming" line's fsync was still in flight; killed before it completes.
if (crash === 'claim-unsynced') gate.journal.fsync = async () => { await answered; await die(); };
const res = {};
if (env('RECOVER')) {
  res.recover = (await gate.recover()).map((r) => ({ request_id: r.requestId, status: r.status ?? '', error: r.error ? String(r.error) : '' }));
}
const call = {
  tool: 'append_line', arguments: { file: 'count', line: 'ran' }, attemptKey: 't07', timeout: '5m',
  onPending: (r) => console.log(`pending ${r.id}`),
};
try {
  const out = await gate.run(call, async () => {
    if (crash === 'after-claim') await die();
    const fd = openSync(env('COUNT'), 'a');
    appendFileSync(fd, 'ran\n');
    fsyncSync(fd);
    closeSync(fd);
    if (crash === 'during-run') await die();
    return 'done';
  });
  Object.assign(res, { outcome: 'ok', request_id: out.request.id, status: out.status });
} catch (err) {
  if (err instanceof InterruptedError) Object.assign(res, { outcome: 'interrupted', started: err.started, request_id: err.request.id });
  else if (err instanceof AlreadyExecutedError) Object.assign(res, { outcome: 'already_executed', here: err.here, status: err.status, request_id: err.request.id });
  else Object.assign(res, { outcome: err?.name ?? 'error', error: String(err) });
} finally {
  gate.close();
}
console.log(JSON.stringify(res));
