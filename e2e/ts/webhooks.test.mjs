// T25 in the reference library: Airlock's webhooks verify with the
// Standard Webhooks TypeScript library (npm standardwebhooks, pinned in
// package.json). e2e/ts/ts_test.go starts `airlock serve
// --outbound-allow-private` and passes:
//
//   AIRLOCK_URL          the running server's base URL
//   AIRLOCK_ADMIN_TOKEN  an admin token, to create the webhook
//   AIRLOCK_TOKEN        an agent token, to create a request

import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';

const env = (name) => {
  const v = process.env[name];
  assert.ok(v, `${name} must be set (run this through go test ./e2e/ts/)`);
  return v;
};
const base = env('AIRLOCK_URL');
const admin = env('AIRLOCK_ADMIN_TOKEN');
const agent = env('AIRLOCK_TOKEN');

async function api(method, path, token, body, headers = {}) {
  const res = await fetch(new URL(path, base), {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}), ...headers },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

// receiver is a real HTTP server that keeps each webhook's raw body and
// headers, exactly as they arrived.
async function receiver() {
  const got = [];
  const waiting = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const hook = { headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      res.writeHead(204).end();
      const w = waiting.shift();
      if (w) w(hook); else got.push(hook);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/hook`,
    next: () => new Promise((resolve) => { const h = got.shift(); if (h) resolve(h); else waiting.push(resolve); }),
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

function headersOf(hook) {
  return {
    'webhook-id': hook.headers['webhook-id'],
    'webhook-timestamp': hook.headers['webhook-timestamp'],
    'webhook-signature': hook.headers['webhook-signature'],
  };
}

test('webhooks verify with the standardwebhooks reference library', async () => {
  const rc = await receiver();
  try {
    const created = await api('POST', '/v1/webhooks', admin, { url: rc.url, events: ['approval_request.created'] });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const secret = created.body.secret;
    assert.match(secret, /^whsec_/);
    const wh = new Webhook(secret);

    const inst = await api('POST', '/v1/instances', agent, { name: 'ts webhooks' });
    assert.equal(inst.status, 201);
    const req = await api('POST', `/v1/instances/${inst.body.id}/approval-requests`, agent,
      { tool: 'deploy', arguments: { env: 'prod', note: 'ünïcödé & <tags>' }, timeout: '10m' }, { 'Idempotency-Key': 'ts-webhook-1' });
    assert.equal(req.status, 201);

    const hook = await rc.next();
    assert.match(hook.headers['webhook-id'], /^msg_/);
    assert.equal(hook.headers['content-type'], 'application/json');
    const payload = wh.verify(hook.body, headersOf(hook));
    assert.equal(payload.type, 'approval_request.created');
    assert.equal(payload.data.id, req.body.id);
    assert.deepEqual(payload.data.arguments, { env: 'prod', note: 'ünïcödé & <tags>' });

    // Anything changed fails verification.
    assert.throws(() => wh.verify(hook.body.replace('prod', 'dev'), headersOf(hook)), WebhookVerificationError);
    assert.throws(() => wh.verify(hook.body, { ...headersOf(hook), 'webhook-id': 'msg_other' }), WebhookVerificationError);
    assert.throws(() => new Webhook('whsec_' + Buffer.alloc(32, 7).toString('base64')).verify(hook.body, headersOf(hook)), WebhookVerificationError);
    const stale = String(Number(hook.headers['webhook-timestamp']) - 6 * 60);
    assert.throws(() => wh.verify(hook.body, { ...headersOf(hook), 'webhook-timestamp': stale }), WebhookVerificationError);

    // A test delivery is signed the same way.
    const sent = await api('POST', `/v1/webhooks/${created.body.id}/test`, admin);
    assert.equal(sent.status, 202);
    const testHook = await rc.next();
    assert.equal(testHook.headers['webhook-id'], sent.body.message_id);
    assert.equal(wh.verify(testHook.body, headersOf(testHook)).type, 'webhook.test');
  } finally {
    await rc.close();
  }
});
