// The TypeScript and JavaScript snippets of README.md and docs/ run as
// printed, each in its own node process against the real server, with the
// environment they say they read (AIRLOCK_URL, AIRLOCK_AGENT_TOKEN); a
// reviewer approves what they ask. The quick-start runs twice: the second
// run finds its instance by name and its call's outcome, and asks nothing.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { snippet, snippets } from './support/snippets.mjs';
import { startServer, tempDir } from './support/server.mjs';

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), '..');
let srv;
let codeRoot; // inside this package, where `@airlockhq/sdk` and the frameworks resolve
let workRoot; // where the snippets run, as a user's folder
before(async () => {
  srv = await startServer();
  codeRoot = mkdtempSync(join(pkg, '.snippet-'));
  workRoot = tempDir('airlock-snippet-');
});
after(async () => {
  await srv?.stop();
  for (const d of [codeRoot, workRoot]) if (d) rmSync(d, { recursive: true, force: true });
});

/**
 * Writes a snippet as a module inside this package (so `@airlockhq/sdk`
 * resolves to it, and the frameworks to its devDependencies) and returns
 * run(), which starts it in workDir and approves each request it asks.
 */
function prepare(s) {
  const dir = mkdtempSync(join(codeRoot, 'code-'));
  const work = mkdtempSync(join(workRoot, 'work-'));
  let code = s.code;
  if (s.lang === 'ts' || s.lang === 'typescript') {
    typeCheck(s, join(dir, 'snippet.ts'));
    code = ts.transpileModule(s.code, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;
  }
  const file = join(dir, 'snippet.mjs');
  writeFileSync(file, code);
  return async () => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AIRLOCK_')));
    const proc = spawn(process.execPath, [file], {
      cwd: work, env: { ...env, AIRLOCK_URL: srv.url, AIRLOCK_AGENT_TOKEN: srv.agentToken }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    proc.stdout.setEncoding('utf8').on('data', (c) => { out += c; });
    proc.stderr.setEncoding('utf8').on('data', (c) => { err += c; });
    const exited = new Promise((r) => proc.once('close', (code) => r(code)));
    let done = false;
    exited.then(() => { done = true; });
    const approved = new Set();
    // The reviewer approves what the snippet asks, until it exits.
    while (!done) {
      for (const r of (await srv.reviewer.listRequests({ state: 'pending' })).items) {
        if (!approved.has(r.id)) {
          approved.add(r.id);
          await srv.reviewer.approve(r.id, 'fine');
        }
      }
      await Promise.race([exited, new Promise((r) => setTimeout(r, 25))]);
    }
    const code = await exited;
    assert.equal(code, 0, `${s.file}:${s.line} ("${s.name}") exited ${code}:\n${out}\n${err}`);
    return { out, err, approved: approved.size };
  };
}

/** Type-checks a TypeScript snippet, strictly, against the package's shipped types, as a user's file would be. */
function typeCheck(s, file) {
  writeFileSync(file, s.code);
  const program = ts.createProgram([file], {
    strict: true, noEmit: true, skipLibCheck: true, types: ['node'],
    target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext,
  });
  const errors = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  assert.deepEqual(errors, [], `${s.file}:${s.line} ("${s.name}") does not type-check`);
}

/** The instances called name, and the requests of the first. */
async function instancesNamed(name) {
  const all = (await srv.admin.listInstances()).filter((i) => i.name === name);
  const requests = all.length ? (await srv.admin.listRequests({ instance_id: all[0].id })).items : [];
  return { instances: all, requests };
}

test('every TypeScript, JavaScript and Python block of README.md and docs/ is marked to run or says why not', () => {
  const names = new Set(snippets().map((s) => s.name));
  for (const want of ['typescript quick-start', 'python quick-start', 'vercel ai sdk example', 'langgraph example', 'openai agents example']) {
    assert.ok(names.has(want), `no block is marked <!-- snippet: ${want} -->`);
  }
});

test('the TypeScript quick-start runs as printed, and a second run asks nothing and runs nothing again', async () => {
  const s = snippet('typescript quick-start');
  assert.ok(snippets().filter((x) => x.name === s.name).some((x) => x.file === 'README.md'), 'the README prints the quick-start');
  const run = prepare(s);
  const first = await run();
  assert.match(first.out, /^refunded 500 cents on A-17$/m);
  assert.equal(first.approved, 1);
  const second = await run();
  assert.doesNotMatch(second.out, /refunded 500/);
  assert.match(second.out, /already used; it is not run again/);
  assert.equal(second.approved, 0, 'the restart asked again');
  const { instances, requests } = await instancesNamed('billing-agent');
  assert.equal(instances.length, 1, 'the restart registered a second instance');
  assert.deepEqual(requests.map((r) => [r.tool, r.execution?.status]), [['refund', 'succeeded']]);
});

test('the Vercel AI SDK example runs with the ai package', async () => {
  const { out } = await prepare(snippet('vercel ai sdk example'))();
  assert.match(out, /tool output: \{"sent":true,"to":"ops@example.com"\}/);
  const { requests } = await instancesNamed('ops-mailer');
  assert.deepEqual(requests.map((r) => [r.tool, r.execution?.status]), [['send_email', 'succeeded']]);
});

test('the LangGraph example pauses, resumes with the decision and runs once', async () => {
  const { out } = await prepare(snippet('langgraph example'))();
  assert.match(out, /^refunded 30$/m);
  const { requests } = await instancesNamed('refund-graph');
  assert.deepEqual(requests.map((r) => [r.tool, r.execution?.status]), [['refund', 'succeeded']]);
});

test('the OpenAI Agents SDK example approves the interruption through Airlock and runs once', async () => {
  const { out } = await prepare(snippet('openai agents example'))();
  assert.match(out, /^transfer approved$/m);
  assert.match(out, /^Paid\.$/m);
  const { requests } = await instancesNamed('treasurer');
  assert.deepEqual(requests.map((r) => [r.tool, r.execution?.status]), [['transfer', 'succeeded']]);
});

test('the token verification example (docs/tokens.md) verifies the token its gate hands on, once, for its arguments only', async () => {
  const { out, approved } = await prepare(snippet('typescript verify token'))();
  assert.match(out, /^sent to ops@example\.com, approved by \S.*$/m);
  assert.match(out, /^refused: replayed$/m);
  assert.match(out, /^refused: arguments$/m);
  assert.equal(approved, 1);
  const { requests } = await instancesNamed('mailer');
  assert.deepEqual(requests.map((r) => [r.tool, r.execution?.status]), [['send_mail', 'succeeded']]);
});
