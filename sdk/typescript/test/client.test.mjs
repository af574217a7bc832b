// The REST client against the real server: every endpoint, errors with
// their stable code, long-poll, retries with the same Idempotency-Key, and
// the event stream resuming after a dropped connection.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, createPublicKey, generateKeyPairSync, randomBytes, timingSafeEqual, verify as cryptoVerify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AirlockClient, AirlockError, NetworkError, isCode } from '../dist/index.js';
import { startServer, waitFor } from './support/server.mjs';

let srv;
before(async () => { srv = await startServer(); });
after(async () => { await srv?.stop(); });

// Each operation of rest/openapi.yaml, and the client method that calls it.
const operations = {
  listInstances: 'listInstances', createInstance: 'registerInstance', getInstance: 'getInstance',
  deleteInstance: 'deleteInstance', createApprovalRequest: 'createRequest', listApprovalRequests: 'listRequests',
  getApprovalRequest: 'getRequest', cancelApprovalRequest: 'cancelRequest', decideApprovalRequest: 'decide', decideApprovalRequests: 'decideBatch',
  claimExecution: 'claimExecution', reportExecution: 'reportExecution', streamEvents: 'events',
  getBoard: 'board', createColumn: 'createColumn', createWorkItem: 'createWorkItem', getWorkItem: 'getWorkItem',
  updateWorkItem: 'updateWorkItem', listSessions: 'listSessions', createToken: 'createToken',
  listTokens: 'listTokens', revokeToken: 'revokeToken', healthz: 'healthz', readyz: 'readyz',
  metrics: 'metrics', openapi: 'openapi',
  createWebhook: 'createWebhook', listWebhooks: 'listWebhooks', getWebhook: 'getWebhook', deleteWebhook: 'deleteWebhook',
  listWebhookDeliveries: 'listWebhookDeliveries', testWebhook: 'testWebhook',
  createGrant: 'createGrant', listGrants: 'listGrants', getGrant: 'getGrant', revokeGrant: 'revokeGrant',
  enableWebhook: 'enableWebhook',
  listReviewers: 'listReviewers', linkReviewer: 'linkReviewer', endReviewerSessions: 'endReviewerSessions',
  getReviewerStats: 'reviewerStats', listSuggestions: 'suggestions',
  jwks: 'jwks', listSigningKeys: 'listSigningKeys', rotateSigningKey: 'rotateSigningKey',
  consumeApprovalToken: 'consumeApprovalToken',
  getAuditCheckpoint: 'getAuditCheckpoint', getAuditKey: 'getAuditKey', listAuditEntries: 'listAuditEntries',
  getAuditInclusionProof: 'getAuditInclusionProof', getAuditConsistencyProof: 'getAuditConsistencyProof',
  exportAudit: 'exportAudit', getRequestProof: 'getRequestProof',
  getVAPIDPublicKey: 'getVAPIDPublicKey', createPushSubscription: 'createPushSubscription', deletePushSubscription: 'deletePushSubscription',
};

// Operations that are not the SDK's to call, each with the reason: a deliberate
// exclusion, not a skip. Each must still exist in rest/openapi.yaml.
const notForTheSDK = {
  claudeCodeHook: "Claude Code's own HTTP hook calls it, not an agent's code",
  slackInteractions: "Slack calls it, signed with the app's signing secret",
};

test('the client has a method for every operation of rest/openapi.yaml', () => {
  const spec = readFileSync(join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'rest', 'openapi.yaml'), 'utf8');
  const ids = [...spec.matchAll(/^\s+operationId:\s*(\S+)\s*$/gm)].map((m) => m[1]);
  assert.ok(ids.length >= 20, `found only ${ids.length} operations`);
  for (const id of ids.filter((id) => !(id in notForTheSDK))) {
    const method = operations[id];
    assert.ok(method, `rest/openapi.yaml has operation ${id}: add a client method (and its python twin) and list it here`);
    assert.equal(typeof AirlockClient.prototype[method], 'function', `${id} → ${method}`);
  }
  // Both lists stay true: no stale or renamed operation, none both wrapped and excluded.
  for (const id of Object.keys(operations)) assert.ok(ids.includes(id), `${id} is listed but rest/openapi.yaml has no such operation`);
  for (const id of Object.keys(notForTheSDK)) {
    assert.ok(ids.includes(id), `${id} is excluded but rest/openapi.yaml has no such operation: drop it from notForTheSDK`);
    assert.ok(!(id in operations), `${id} is both wrapped and excluded`);
  }
});

test('instances: register, read, list, delete cancels pending', async () => {
  const inst = await srv.agent.registerInstance('client test', { host: 'ci' });
  assert.match(inst.id, /^ins_/);
  assert.deepEqual(inst.metadata, { host: 'ci' });
  await srv.agent.createRequest(inst.id, 'k-inst-1', { tool: 'x', arguments: {} });
  assert.equal((await srv.agent.getInstance(inst.id)).pending_count, 1);
  assert.ok((await srv.agent.listInstances()).some((i) => i.id === inst.id));
  assert.equal(await srv.agent.deleteInstance(inst.id), 1);
  await assert.rejects(srv.agent.getInstance(inst.id), (e) => isCode(e, 'not_found') && e.status === 404);
});

test('requests: idempotent create, byte-for-byte arguments, conflict, list, cancel', async () => {
  const inst = await srv.agent.registerInstance('requests');
  const raw = '{"z": 1,  "a": "<b>é</b>", "n": 1.50}';
  const a = await srv.agent.createRequest(inst.id, 'k-req-1', { tool: 'send_email', arguments: raw, agent_reasoning: 'because', context: { seen: true } });
  assert.equal(a.created, true);
  const b = await srv.agent.createRequest(inst.id, 'k-req-1', { tool: 'send_email', arguments: raw, agent_reasoning: 'because', context: { seen: true } });
  assert.deepEqual([b.created, b.request.id], [false, a.request.id]);
  // The stored arguments are exactly the submitted text.
  const res = await fetch(`${srv.url}/v1/approval-requests/${a.request.id}`, { headers: { Authorization: `Bearer ${srv.agentToken}` } });
  assert.ok((await res.text()).includes(`"arguments":${raw}`));
  await assert.rejects(
    srv.agent.createRequest(inst.id, 'k-req-1', { tool: 'send_email', arguments: { other: true } }),
    (e) => e instanceof AirlockError && e.code === 'idempotency_conflict' && e.status === 422);
  const page = await srv.reviewer.listRequests({ instance_id: inst.id, state: 'pending', limit: 10 });
  assert.deepEqual(page.items.map((r) => r.id), [a.request.id]);
  const all = [];
  for await (const r of srv.agent.allRequests({ instance_id: inst.id, limit: 1 })) all.push(r.id);
  assert.deepEqual(all, [a.request.id]);
  const c = await srv.agent.cancelRequest(a.request.id);
  assert.equal(c.state, 'cancelled');
  await assert.rejects(srv.agent.cancelRequest(a.request.id), (e) => e.code === 'not_pending' && e.state === 'cancelled');
});

test('errors carry the stable code, status, field and state', async () => {
  const inst = await srv.agent.registerInstance('errors');
  const { request } = await srv.agent.createRequest(inst.id, 'k-err-1', { tool: 't', arguments: {} });
  const bad = new AirlockClient({ baseUrl: srv.url, token: 'airlock_wrong' });
  await assert.rejects(bad.listInstances(), (e) => e.code === 'unauthorized' && e.status === 401);
  await assert.rejects(srv.agent.approve(request.id), (e) => e.code === 'forbidden' && e.status === 403);
  await assert.rejects(srv.agent.claimExecution(request.id), (e) => e.code === 'not_approved' && e.state === 'pending');
  await assert.rejects(srv.agent.createRequest(inst.id, 'k-err-2', { tool: 'bad tool name', arguments: {} }),
    (e) => e.code === 'invalid_request' && e.field === 'tool');
  await assert.rejects(srv.agent.getRequest('apr_nothing'), (e) => e.code === 'not_found');
});

test('batch decisions: a result per id, in order; refusals inside, a bad batch thrown', async () => {
  const inst = await srv.agent.registerInstance('batch');
  const { request: a } = await srv.agent.createRequest(inst.id, 'k-batch-1', { tool: 't', arguments: { n: 1 } });
  const { request: b } = await srv.agent.createRequest(inst.id, 'k-batch-2', { tool: 't', arguments: { n: 2 } });
  await srv.reviewer.deny(b.id, 'no');
  const got = await srv.reviewer.decideBatch({ ids: [a.id, b.id], status: 'approved', note: 'both', valid_for: '1m' });
  assert.deepEqual(got.map((r) => [r.id, r.status]), [[a.id, 200], [b.id, 409]]);
  assert.equal(got[0].request.state, 'approved');
  assert.deepEqual([got[1].problem.code, got[1].problem.state, got[1].request], ['not_pending', 'denied', undefined]);
  await assert.rejects(srv.reviewer.decideBatch({ ids: [a.id, a.id], status: 'denied' }), (e) => isCode(e, 'invalid_request') && e.field === 'ids');
  await assert.rejects(srv.agent.decideBatch({ ids: [a.id], status: 'denied' }), (e) => isCode(e, 'forbidden'));
});

test('long-poll: holds until the wait ends, and answers once decided', async () => {
  const inst = await srv.agent.registerInstance('long-poll');
  const { request } = await srv.agent.createRequest(inst.id, 'k-lp-1', { tool: 't', arguments: {} });
  const still = await srv.agent.longPollRequest(request.id, 50);
  assert.equal(still.state, 'pending');
  const waiting = srv.agent.waitRequest(request.id, { pollWaitMs: 5000 });
  await srv.reviewer.decide(request.id, { status: 'approved', note: 'fine', valid_for: '2m' });
  const decided = await waiting;
  assert.equal(decided.state, 'approved');
  assert.equal(decided.decision.note, 'fine');
  assert.ok(decided.decision.expires_at > decided.decision.decided_at);
  // Names for people to read: the instance, the agent token that asked, the reviewer token that decided.
  assert.deepEqual([decided.instance_name, decided.created_by_name, decided.decision.decided_by_name],
    ['long-poll', 'sdk agent', 'sdk reviewer']);
});

test('a lost answer is retried with the same Idempotency-Key; the server creates one request', async () => {
  const inst = await srv.agent.registerInstance('retries');
  const keys = [];
  let lose = 1;
  const losing = async (url, init) => {
    const res = await fetch(url, init);
    if (init.method === 'POST' && url.includes('/approval-requests')) {
      keys.push(init.headers['Idempotency-Key']);
      if (lose-- > 0) throw new TypeError('fetch failed: the answer was lost'); // the server acted; the answer never came
    }
    return res;
  };
  const c = new AirlockClient({ baseUrl: srv.url, token: srv.agentToken, fetch: losing, retry: { minBackoffMs: 1, maxBackoffMs: 2 } });
  const { request, created } = await c.createRequest(inst.id, 'k-retry-1', { tool: 't', arguments: { a: 1 } });
  assert.deepEqual(keys, ['k-retry-1', 'k-retry-1']);
  assert.equal(created, false, 'the retry got the replay of the request the lost attempt created');
  const page = await srv.agent.listRequests({ instance_id: inst.id });
  assert.deepEqual(page.items.map((r) => r.id), [request.id]);

  // A claim is never retried: a lost claim answer could not tell a win from a loss.
  lose = 1;
  let claims = 0;
  const c2 = new AirlockClient({
    baseUrl: srv.url, token: srv.agentToken, retry: { minBackoffMs: 1, maxBackoffMs: 2 },
    fetch: async (url, init) => {
      if (init.method === 'POST' && url.endsWith('/execution')) claims++;
      throw new TypeError('fetch failed');
    },
  });
  await assert.rejects(c2.claimExecution(request.id), NetworkError);
  assert.equal(claims, 1);
});

test('a rate-limited call is retried after Retry-After', async () => {
  let calls = 0;
  const limited = async (url, init) => {
    if (calls++ === 0) {
      return new Response(JSON.stringify({ type: 'urn:airlock:problem:rate_limited', title: 'Too Many Requests', status: 429, detail: 'slow down', code: 'rate_limited' }),
        { status: 429, headers: { 'Content-Type': 'application/problem+json', 'Retry-After': '0' } });
    }
    return fetch(url, init);
  };
  const c = new AirlockClient({ baseUrl: srv.url, token: srv.agentToken, fetch: limited });
  assert.ok(Array.isArray(await c.listInstances()));
  assert.equal(calls, 2);
});

test('board, work items, sessions, tokens and operations', async () => {
  const col = await srv.reviewer.createColumn('todo', 'To do');
  assert.equal(col.key, 'todo');
  await srv.reviewer.createColumn('done', 'Done');
  const item = await srv.reviewer.createWorkItem('card', 'todo');
  assert.match(item.id, /^wi_/);
  const moved = await srv.reviewer.updateWorkItem(item.id, { column_key: 'done', if_version: item.version });
  assert.equal(moved.column_key, 'done');
  assert.equal((await srv.agent.getWorkItem(item.id)).version, item.version + 1);
  assert.deepEqual((await srv.agent.board()).columns.map((c) => c.key), ['todo', 'done']);
  assert.ok(Array.isArray(await srv.reviewer.listSessions()));
  // An OIDC principal that never signed in: nothing to end, and no error.
  assert.deepEqual(await srv.admin.endReviewerSessions('oidc:https://idp.example#nobody'),
    { principal: 'oidc:https://idp.example#nobody', ended: 0 });
  // A decider with no decision in the window answers zeros; an OIDC principal is percent-encoded.
  const st = await srv.admin.reviewerStats('oidc:https://idp.example#nobody', { since: '7d' });
  assert.deepEqual([st.decided_by, st.kind, st.window_seconds, st.decisions, st.fast_approvals],
    ['oidc:https://idp.example#nobody', 'person', 7 * 86400, 0, 0]);
  assert.ok(Array.isArray(await srv.admin.suggestions({ min: 2, since: '30d' })));
  await assert.rejects(srv.reviewer.suggestions(), (e) => e.code === 'forbidden');

  const tok = await srv.admin.createToken({ name: 'short-lived', role: 'agent' });
  assert.match(tok.secret, /^airlock_/);
  assert.ok((await srv.admin.listTokens()).some((t) => t.id === tok.id));
  const revoked = await srv.admin.revokeToken(tok.id);
  assert.ok(revoked.revoked_at);
  const gone = new AirlockClient({ baseUrl: srv.url, token: tok.secret });
  await assert.rejects(gone.listInstances(), (e) => e.code === 'unauthorized');

  assert.deepEqual(await srv.agent.healthz(), { status: 'ok' });
  assert.deepEqual(await srv.agent.readyz(), { status: 'ok' });
  assert.match(await srv.agent.metrics(), /# TYPE/);
  assert.match(await srv.agent.openapi(), /^openapi: 3\.1/);
});

test('signing keys: the public set, the list and a rotation', async () => {
  const before = (await srv.agent.jwks()).keys.map((k) => k.kid);
  const fresh = await srv.admin.rotateSigningKey();
  // Published at once, signing from activates_at (this server's
  // --key-activation-delay is 1ms).
  assert.ok(fresh.activates_at >= fresh.created_at);
  assert.ok(!('seed' in fresh));
  const after = (await srv.agent.jwks()).keys.map((k) => k.kid);
  assert.equal(after[0], fresh.id);
  assert.ok(after.includes(before[0]));
  assert.equal((await srv.admin.listSigningKeys())[0].id, fresh.id);
  await assert.rejects(srv.agent.rotateSigningKey(), (e) => e.code === 'forbidden');
});

test('approval tokens: a verifier consumes a claim\'s token once, then already_used', async () => {
  const inst = await srv.agent.registerInstance('consume');
  const { request } = await srv.agent.createRequest(inst.id, 'k-consume-1', { tool: 'send_mail', arguments: { to: 'ada', n: 1 } });
  await srv.reviewer.decide(request.id, { status: 'approved' });
  const token = (await srv.agent.claimExecution(request.id)).execution.approval_token;
  const tok = await srv.admin.createToken({ name: 'tool server', role: 'verifier' });
  const verifier = new AirlockClient({ baseUrl: srv.url, token: tok.secret });
  const use = await verifier.consumeApprovalToken({ token, tool: 'send_mail', arguments: { n: 1.0, to: 'ada' } });
  assert.equal(use.request_id, request.id);
  assert.ok(use.jti && use.consumed_at);
  await assert.rejects(verifier.consumeApprovalToken({ token }),
    (e) => isCode(e, 'already_used') && e.status === 409 && e.consumedAt === use.consumed_at);
  await assert.rejects(verifier.consumeApprovalToken({ token: token.slice(0, -4) + 'AAAA' }),
    (e) => isCode(e, 'invalid_token') && e.status === 400 && e.reason === 'signature');
  await assert.rejects(verifier.listInstances(), (e) => e.code === 'forbidden');
});

test('audit log: an auditor verifies the checkpoint with the key alone, reads entries, proofs, a request\'s proof and the export', async () => {
  const as = await startServer(['--checkpoint-interval', '1s']);
  try {
    const tok = await as.admin.createToken({ name: 'auditor', role: 'auditor' });
    const auditor = new AirlockClient({ baseUrl: as.url, token: tok.secret });
    const inst = await as.agent.registerInstance('audit');
    const { request } = await as.agent.createRequest(inst.id, 'k-audit-1', { tool: 'send_mail', arguments: { cell: '=1+1' } });
    await as.reviewer.decide(request.id, { status: 'approved' });
    // Checkpoints follow the tree every second: wait for one that covers the request.
    const proof = await waitFor(async () => {
      try {
        const p = await auditor.getRequestProof(request.id);
        return p.entries.length >= 2 ? p : undefined;
      } catch (e) {
        if (isCode(e, 'not_found')) return undefined; // no checkpoint yet
        throw e;
      }
    }, 'a checkpoint covering the request');
    assert.equal(proof.request_id, request.id);
    assert.deepEqual(proof.entries.map((e) => e.leaf.request_id), proof.entries.map(() => request.id));

    // The note's Ed25519 signature, checked by Node's crypto with the served key only.
    const vkey = await auditor.getAuditKey();
    const note = await auditor.getAuditCheckpoint();
    // <name>+<8 hex digits of key hash>+<base64 of 0x01 and the key>; the base64 may hold '+' too.
    const name = vkey.slice(0, vkey.indexOf('+'));
    const keyB64 = vkey.slice(name.length + 1 + 8 + 1);
    const pub = Buffer.from(keyB64, 'base64');
    assert.equal(pub[0], 1); // Ed25519
    const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: pub.subarray(1).toString('base64url') }, format: 'jwk' });
    const [text, sigs] = note.split('\n\n');
    const line = sigs.split('\n').find((l) => l.startsWith(`\u2014 ${name} `));
    const sig = Buffer.from(line.split(' ')[2], 'base64').subarray(4);
    assert.ok(cryptoVerify(null, Buffer.from(text + '\n'), key, sig), 'the checkpoint verifies with the key');
    assert.ok(!cryptoVerify(null, Buffer.from(text.replace(/\n\d+\n/, '\n1\n') + '\n'), key, sig), 'another tree size does not');
    const size = Number(text.split('\n')[1]);

    const entries = await auditor.listAuditEntries({ start: 0, limit: size });
    assert.equal(entries.length, size);
    assert.deepEqual(entries.map((e) => e.index), [...Array(size).keys()]);
    assert.equal(JSON.stringify(JSON.parse(entries[0].leaf)), entries[0].leaf); // canonical JSON, byte for byte
    const incl = await auditor.getAuditInclusionProof(0, size);
    assert.deepEqual([incl.index, incl.tree_size], [0, size]);
    const cons = await auditor.getAuditConsistencyProof(1, size);
    assert.deepEqual([cons.from, cons.tree_size], [1, size]);
    await assert.rejects(auditor.getAuditInclusionProof(0, size + 1000),
      (e) => isCode(e, 'invalid_request') && e.status === 400 && e.field === 'tree_size');

    const csv = await auditor.exportAudit({ format: 'csv' });
    assert.ok(csv.startsWith('index,time,type,'));
    assert.ok(!/^[=+\-@]|,[=+\-@]/m.test(csv), 'no CSV cell begins with a formula character');
    const ocsf = (await auditor.exportAudit({ format: 'ocsf', since: '2000-01-01T00:00:00Z' })).trim().split('\n').map((l) => JSON.parse(l));
    assert.ok(ocsf.length >= size && ocsf.every((o) => o.class_uid === 6003));
    await assert.rejects(auditor.listInstances(), (e) => e.code === 'forbidden' && e.status === 403);
    await assert.rejects(as.reviewer.getAuditCheckpoint(), (e) => e.code === 'forbidden');
  } finally {
    await as.stop();
  }
});

test('events: resume with Last-Event-ID after a dropped connection, none missed or repeated', async () => {
  const inst = await srv.agent.registerInstance('events');
  const ids = [];
  for (let i = 0; i < 3; i++) ids.push((await srv.agent.createRequest(inst.id, `k-ev-${i}`, { tool: 'ev', arguments: { i } })).request.id);

  // A fetch whose stream breaks right after its first event, every time;
  // the client reconnects with Last-Event-ID each time.
  const resumes = [];
  const dropping = async (url, init) => {
    resumes.push(init.headers['Last-Event-ID'] ?? '');
    const res = await fetch(url, init);
    const reader = res.body.getReader();
    let seen = Buffer.alloc(0);
    let cut = false;
    const body = new ReadableStream({
      async pull(ctl) {
        if (cut) { reader.cancel(); ctl.error(new TypeError('terminated')); return; }
        const { value, done } = await reader.read();
        if (done) { ctl.close(); return; }
        seen = Buffer.concat([seen, value]);
        const end = seen.indexOf('\n\n', seen.indexOf('data:'));
        if (seen.indexOf('data:') >= 0 && end >= 0) {
          cut = true;
          ctl.enqueue(seen.subarray(0, end + 2));
          return;
        }
        ctl.enqueue(value);
        seen = seen.subarray(seen.length); // nothing before a whole event is re-sent
      },
    });
    return new Response(body, { status: res.status, headers: res.headers });
  };
  const c = new AirlockClient({ baseUrl: srv.url, token: srv.reviewerToken, fetch: dropping, retry: { minBackoffMs: 1, maxBackoffMs: 5 } });
  const ac = new AbortController();
  const seen = [];
  const created = [];
  for await (const ev of c.events(0, { signal: ac.signal })) {
    seen.push(ev.event.id);
    if (ev.event.type === 'request.created' && ev.request?.instance_id === inst.id) created.push(ev.request.id);
    if (created.length === 3) ac.abort();
  }
  assert.deepEqual(created, ids);
  assert.deepEqual(seen, [...new Set(seen)].sort((a, b) => a - b), 'events in order, none repeated');
  assert.deepEqual(seen, Array.from({ length: seen.length }, (_, i) => seen[0] + i), 'no event missed');
  assert.ok(resumes.length > 2 && resumes.slice(1).every((r) => r !== ''), `resumed with Last-Event-ID: ${resumes}`);

  // Starting after an event skips it and those before.
  for await (const ev of srv.reviewer.events(seen[1])) {
    assert.equal(ev.event.id, seen[2]);
    break;
  }
});

test('the core imports nothing but Node built-ins and its own files; frameworks are optional peers', async () => {
  const { readdirSync, readFileSync } = await import('node:fs');
  const dist = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist');
  for (const f of readdirSync(dist).filter((f) => f.endsWith('.js'))) {
    const src = readFileSync(join(dist, f), 'utf8');
    for (const [, spec] of src.matchAll(/\bfrom\s+'([^']+)'/g)) {
      assert.ok(spec.startsWith('node:') || spec.startsWith('./'), `dist/${f} imports ${spec}`);
    }
  }
  const pkg = JSON.parse(readFileSync(join(dist, '..', 'package.json'), 'utf8'));
  assert.equal(pkg.dependencies, undefined, 'no runtime dependencies');
  for (const peer of Object.keys(pkg.peerDependencies)) assert.equal(pkg.peerDependenciesMeta[peer]?.optional, true, peer);
});

/**
 * Verifies a Standard Webhooks delivery as a receiver must: HMAC-SHA256 of
 * "webhook-id.webhook-timestamp.body", keyed by the base64 after "whsec_",
 * matching one of the space-separated "v1,<base64>" signatures.
 */
function verifySignature(secret, headers, body) {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const want = createHmac('sha256', key).update(`${headers['webhook-id']}.${headers['webhook-timestamp']}.`).update(body).digest();
  return (headers['webhook-signature'] ?? '').split(' ').some((sig) => {
    const [v, b64] = sig.split(',');
    const got = Buffer.from(b64 ?? '', 'base64');
    return v === 'v1' && got.length === want.length && timingSafeEqual(got, want);
  });
}

/** A real HTTP receiver on loopback that records each POST and answers 204. */
async function startReceiver() {
  const got = [];
  const waiters = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      got.push({ method: req.method, path: req.url, headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(204).end();
      for (const w of waiters.splice(0)) w();
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}/hooks/airlock`, got,
    /** Resolves with the first delivery, once one arrived (bounded, so a lost delivery fails the test). */
    first: (timeoutMs = 30_000) => new Promise((resolve, reject) => {
      if (got.length) { resolve(got[0]); return; }
      const t = setTimeout(() => reject(new Error('no webhook arrived at the receiver')), timeoutMs);
      waiters.push(() => { clearTimeout(t); resolve(got[0]); });
    }),
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
  };
}

test('push: the VAPID key, a browser subscription without its keys, only its maker deletes it', async () => {
  const { public_key: key } = await srv.reviewer.getVAPIDPublicKey();
  const raw = Buffer.from(key, 'base64url');
  assert.equal(raw.length, 65);
  assert.equal(raw[0], 4);
  assert.equal((await srv.admin.getVAPIDPublicKey()).public_key, key);
  const browser = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const point = Buffer.from(browser.publicKey.export({ format: 'jwk' }).x, 'base64url');
  const p256dh = Buffer.concat([Buffer.from([4]), point, Buffer.from(browser.publicKey.export({ format: 'jwk' }).y, 'base64url')]).toString('base64url');
  const sub = await srv.reviewer.createPushSubscription({ endpoint: 'https://push.example.com/ts', keys: { p256dh, auth: randomBytes(16).toString('base64url') } });
  assert.match(sub.id, /^psh_/);
  assert.deepEqual(Object.keys(sub).sort(), ['created_at', 'endpoint', 'id']);
  await assert.rejects(srv.agent.getVAPIDPublicKey(), (e) => isCode(e, 'forbidden'));
  await assert.rejects(srv.admin.deletePushSubscription(sub.id), (e) => isCode(e, 'not_found'));
  await srv.reviewer.deletePushSubscription(sub.id);
  await assert.rejects(srv.reviewer.createPushSubscription({ endpoint: 'https://push.example.com/ts', keys: { p256dh, auth: 'AAAA' } }),
    (e) => isCode(e, 'invalid_request'));
});

test('webhooks: create (secret once), list, get, a signed test delivery to a real receiver, its attempt, delete', async () => {
  // Without --outbound-allow-private a loopback receiver is refused at creation.
  await assert.rejects(srv.admin.createWebhook({ url: 'http://127.0.0.1:9/hook' }),
    (e) => e.code === 'invalid_request' && e.status === 400 && e.field === 'url');

  const ws = await startServer(['--outbound-allow-private']);
  const rc = await startReceiver();
  try {
    const wh = await ws.admin.createWebhook({ url: rc.url, events: ['approval_request.created'], description: 'sdk test' });
    assert.match(wh.id, /^whk_/);
    assert.match(wh.secret, /^whsec_[A-Za-z0-9+/=]+$/);
    assert.deepEqual([wh.url, wh.events, wh.description, wh.enabled], [rc.url, ['approval_request.created'], 'sdk test', true]);

    // The secret is shown once: neither the list nor a read carries it.
    const listed = await ws.admin.listWebhooks();
    assert.deepEqual(listed.map((w) => w.id), [wh.id]);
    assert.equal(listed[0].secret, undefined);
    const read = await ws.admin.getWebhook(wh.id);
    assert.equal(read.secret, undefined);
    assert.deepEqual({ ...read }, (({ secret, ...rest }) => rest)(wh));
    await assert.rejects(ws.reviewer.listWebhooks(), (e) => e.code === 'forbidden' && e.status === 403);
    // Enabling an enabled endpoint changes nothing (the server's tests disable one first).
    assert.deepEqual({ ...(await ws.admin.enableWebhook(wh.id)) }, { ...read });
    await assert.rejects(ws.reviewer.enableWebhook(wh.id), (e) => e.code === 'forbidden' && e.status === 403);

    const queued = await ws.admin.testWebhook(wh.id);
    assert.match(queued.id, /^dlv_/);
    assert.match(queued.message_id, /^msg_/);
    assert.deepEqual([queued.webhook_id, queued.type], [wh.id, 'webhook.test']);

    const got = await rc.first();
    assert.deepEqual([got.method, got.path], ['POST', '/hooks/airlock']);
    assert.equal(got.headers['webhook-id'], queued.message_id);
    assert.ok(Math.abs(Number(got.headers['webhook-timestamp']) - Date.now() / 1000) < 300, 'timestamp within the 5-minute tolerance');
    assert.ok(verifySignature(wh.secret, got.headers, got.body), `signature verifies: ${got.headers['webhook-signature']}`);
    // The check can fail: a changed body or another secret does not verify.
    assert.ok(!verifySignature(wh.secret, got.headers, Buffer.concat([got.body, Buffer.from(' ')])));
    assert.ok(!verifySignature('whsec_' + Buffer.from('another key').toString('base64'), got.headers, got.body));
    const payload = JSON.parse(got.body.toString('utf8'));
    assert.deepEqual([payload.type, payload.data.webhook_id], ['webhook.test', wh.id]);

    // The delivery is listed with the attempt the receiver answered.
    const delivered = await waitFor(async () => {
      const page = await ws.admin.listWebhookDeliveries(wh.id, { limit: 10 });
      const d = page.items.find((x) => x.id === queued.id);
      return d?.state === 'delivered' ? d : undefined;
    }, 'the test delivery listed as delivered');
    assert.equal(delivered.message_id, queued.message_id);
    assert.ok(delivered.attempts.length >= 1);
    assert.equal(delivered.attempts.at(-1).status, 204);
    assert.ok(delivered.attempts.at(-1).latency_ms >= 0);

    await ws.admin.deleteWebhook(wh.id);
    await assert.rejects(ws.admin.getWebhook(wh.id), (e) => e.code === 'not_found' && e.status === 404);
    await assert.rejects(ws.admin.listWebhookDeliveries(wh.id), (e) => e.code === 'not_found');
    await assert.rejects(ws.admin.deleteWebhook(wh.id), (e) => e.code === 'not_found');
    assert.deepEqual(await ws.admin.listWebhooks(), []);
  } finally {
    await rc.close();
    await ws.stop();
  }
});

test('grants: an approval with a grant approves the next same call; list, read, revoke', async () => {
  const inst = await srv.agent.registerInstance('ts grants');
  const first = (await srv.agent.createRequest(inst.id, 'ts-grant-1', { tool: 'ts_grant_tool', arguments: { n: 1 } })).request;
  const d = await srv.reviewer.decide(first.id, { status: 'approved', grant: { uses: 1, expires_in: '1h' } });
  assert.match(d.grant.id, /^grt_/);
  assert.deepEqual([d.grant.uses_left, d.grant.request_id, d.grant.state], [1, first.id, 'live']);
  const next = (await srv.agent.createRequest(inst.id, 'ts-grant-2', { tool: 'ts_grant_tool', arguments: { n: 1 } })).request;
  assert.deepEqual([next.state, next.decision.decided_by], ['approved', `grant:${d.grant.id}`]);
  assert.equal((await srv.reviewer.getGrant(d.grant.id)).state, 'used_up');
  const made = await srv.reviewer.createGrant({ tool: 'ts_grant_tool', arguments: { n: 2 }, instance_id: inst.id, expires_in: '10m' });
  assert.ok((await srv.reviewer.listGrants({ state: 'live', tool: 'ts_grant_tool' })).some((g) => g.id === made.id));
  assert.equal((await srv.reviewer.revokeGrant(made.id)).state, 'revoked');
  const after = (await srv.agent.createRequest(inst.id, 'ts-grant-3', { tool: 'ts_grant_tool', arguments: { n: 2 } })).request;
  assert.equal(after.state, 'pending');
});

test('instanceNamed: found by name, registered once; two at once settle on one instance', async () => {
  const [a, b] = await Promise.all([srv.agent.instanceNamed('named twice'), srv.agent.instanceNamed('named twice')]);
  assert.equal(a.id, b.id);
  const again = await srv.agent.instanceNamed('named twice');
  assert.equal(again.id, a.id);
  assert.deepEqual((await srv.agent.listInstances()).filter((i) => i.name === 'named twice').map((i) => i.id), [a.id]);
});

test('fromEnv: AIRLOCK_URL and AIRLOCK_AGENT_TOKEN; AIRLOCK_TOKEN still works, with a warning', async () => {
  const c = AirlockClient.fromEnv({}, { AIRLOCK_URL: srv.url, AIRLOCK_AGENT_TOKEN: srv.agentToken, AIRLOCK_TOKEN: 'wrong' });
  assert.equal(c.baseUrl, srv.url);
  assert.ok((await c.listInstances()) instanceof Array);
  const warned = new Promise((r) => process.once('warning', r));
  const old = AirlockClient.fromEnv({}, { AIRLOCK_URL: srv.url, AIRLOCK_TOKEN: srv.agentToken });
  assert.match((await warned).message, /set AIRLOCK_AGENT_TOKEN/);
  assert.ok((await old.listInstances()) instanceof Array);
  assert.equal(AirlockClient.fromEnv({}, { AIRLOCK_AGENT_TOKEN: 'x' }).baseUrl, 'http://127.0.0.1:8080');
  assert.throws(() => AirlockClient.fromEnv({}, {}), /set AIRLOCK_AGENT_TOKEN/);
});
