// How much the Gate adds over the raw HTTP calls it makes (docs/sdks.md,
// "Overhead"). For each sample an approved request is prepared untimed;
// then either the Gate runs it (create replay, claim, report, and its
// fsynced journal lines), or bare fetch makes the same three calls. The two
// kinds alternate, so drift hits both alike. Prints p50 and p90 of each and
// the p50 difference; it asserts nothing (timings are figures, not tests).
// It runs twice: with the journal in the system's temporary folder (on
// disk: the Gate's fsyncs, one before the claim and one for the journal
// file's directory entry, are in the figure), and, where /dev/shm exists,
// in memory, which leaves the SDK's own code.
//
// The server's database is in the temporary folder too, so on one disk the
// Gate's fsyncs queue behind the server's own. JOURNAL_DISK puts the on-disk
// journal elsewhere: with TMPDIR=/dev/shm the server runs in memory and only
// the Gate syncs to the disk, as when the agent and Airlock run on
// different machines.
//
//   npm run bench            (builds airlock from the checkout first)
//   SAMPLES=500 npm run bench
//   npm run build && TMPDIR=/dev/shm JOURNAL_DISK=/var/tmp node bench/gate-overhead.mjs
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Gate } from '../dist/index.js';
import { startServer, tempDir } from '../test/support/server.mjs';

const samples = Number(process.env.SAMPLES ?? 300);
const srv = await startServer();
const dir = process.env.JOURNAL_DISK ? mkdtempSync(join(process.env.JOURNAL_DISK, 'airlock-bench-')) : tempDir('airlock-bench-');
async function measure(journalDir, label) {
  const inst = await srv.agent.registerInstance('bench');
  const gate = new Gate({ client: srv.agent, instanceId: inst.id, journalDir });
  const auth = { Authorization: `Bearer ${srv.agentToken}` };

  let n = 0;
  async function prepare() {
    const key = `bench-${label.split(" ")[0]}-${n++}`;
    const body = { tool: 'bench', arguments: { n }, timeout: '5m' };
    const { request } = await srv.agent.createRequest(inst.id, key, body);
    await srv.reviewer.approve(request.id);
    return { key, body, id: request.id };
  }

  async function raw(p) {
    const post = async (path, init) => {
      const res = await fetch(srv.url + path, init);
      const text = await res.text();
      if (!res.ok) throw new Error(`${path}: ${res.status} ${text}`);
      return JSON.parse(text);
    };
    await post(`/v1/instances/${inst.id}/approval-requests`, {
      method: 'POST', headers: { ...auth, 'Content-Type': 'application/json', 'Idempotency-Key': p.key }, body: JSON.stringify(p.body),
    });
    await post(`/v1/approval-requests/${p.id}/execution`, { method: 'POST', headers: auth });
    await post(`/v1/approval-requests/${p.id}/execution`, {
      method: 'PUT', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ status: 'succeeded' }),
    });
  }

  async function gated(p) {
    await gate.run({ tool: 'bench', arguments: p.body.arguments, idempotencyKey: p.key, timeout: '5m' }, () => 'ok');
  }

  const times = { raw: [], gate: [] };
  const warmup = 20;
  for (let i = 0; i < samples + warmup; i++) {
    for (const [name, fn] of i % 2 ? [['raw', raw], ['gate', gated]] : [['gate', gated], ['raw', raw]]) {
      const p = await prepare();
      const t0 = process.hrtime.bigint();
      await fn(p);
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      if (i >= warmup) times[name].push(ms);
    }
  }
  gate.close();
  const q = (xs, f) => [...xs].sort((a, b) => a - b)[Math.floor(f * (xs.length - 1))];
  const fmt = (x) => x.toFixed(2).padStart(7);
  console.log(`TypeScript SDK, journal ${label}: ${samples} samples each (create replay + claim + report; ms)`);
  console.log(`  raw HTTP (fetch)   p50 ${fmt(q(times.raw, 0.5))}  p90 ${fmt(q(times.raw, 0.9))}`);
  console.log(`  Gate.run           p50 ${fmt(q(times.gate, 0.5))}  p90 ${fmt(q(times.gate, 0.9))}`);
  console.log(`  overhead at p50        ${fmt(q(times.gate, 0.5) - q(times.raw, 0.5))}  (target: at most 2 ms)`);
}

try {
  await measure(join(dir, 'journal'), 'on-disk');
  if (existsSync('/dev/shm')) {
    const shm = mkdtempSync('/dev/shm/airlock-bench-');
    try {
      await measure(shm, 'in-memory');
    } finally {
      rmSync(shm, { recursive: true, force: true });
    }
  }
} finally {
  await srv.stop();
  rmSync(dir, { recursive: true, force: true });
}
