// Starts the real `airlock serve` (built by build-airlock.mjs) on a fresh
// SQLite file, and mints the tokens the tests use.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AirlockClient } from '../../dist/index.js';

const here = dirname(fileURLToPath(import.meta.url));
export const ADMIN = 'admin-secret-for-the-sdk-tests';

export function airlockBin() {
  const bin = process.env.AIRLOCK_BIN || resolve(here, '..', '..', '.airlock-test', 'airlock');
  if (!existsSync(bin)) throw new Error(`no airlock binary at ${bin}: run the tests with npm test (its pretest builds it)`);
  return bin;
}

/** A fresh temporary directory, removed by cleanup(). */
export function tempDir(prefix = 'airlock-sdk-') {
  return mkdtempSync(join(tmpdir(), prefix));
}

/**
 * Starts airlock serve and returns {url, admin, agent, reviewer, stop}: an
 * admin client, and clients with a fresh agent and reviewer token.
 */
export async function startServer(extraArgs = []) {
  const dir = tempDir();
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AIRLOCK_')));
  const proc = spawn(airlockBin(), [
    'serve', '--addr', '127.0.0.1:0', '--db', join(dir, 'airlock.db'), '--admin-token', ADMIN,
    '--min-timeout', '1ms', '--rate-limit', '1000000',
    '--key-activation-delay', '1ms', // one server: a rotated-in signing key signs at once
    ...extraArgs,
  ], { env: { ...env, HOME: dir }, stdio: ['ignore', 'ignore', 'pipe'] });
  let logs = '';
  const url = await new Promise((resolveUrl, reject) => {
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (chunk) => {
      logs += chunk;
      const m = /Airlock listening on (http:\/\/\S+) /.exec(logs);
      if (m) resolveUrl(m[1]);
    });
    proc.on('exit', (code) => reject(new Error(`airlock serve exited (${code}) before listening:\n${logs}`)));
  });
  const admin = new AirlockClient({ baseUrl: url, token: ADMIN });
  const agentTok = await admin.createToken({ name: 'sdk agent', role: 'agent' });
  const reviewerTok = await admin.createToken({ name: 'sdk reviewer', role: 'reviewer' });
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGINT');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  return {
    url, dir, proc, admin, stop, logs: () => logs,
    agentToken: agentTok.secret, reviewerToken: reviewerTok.secret,
    agent: new AirlockClient({ baseUrl: url, token: agentTok.secret }),
    reviewer: new AirlockClient({ baseUrl: url, token: reviewerTok.secret }),
  };
}

/** Resolves once the predicate holds for a request the agent can read; polls the server (no sleeps standing in for synchronisation). */
export async function waitFor(fn, what, timeoutMs = 30_000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The first pending request the reviewer can see for tool, once it exists. */
export async function pendingFor(reviewer, tool) {
  return waitFor(async () => (await reviewer.listRequests({ state: 'pending', tool })).items[0], `a pending ${tool} request`);
}
