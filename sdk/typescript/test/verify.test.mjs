// Verifying approval tokens (docs/tokens.md): every vector the Go
// verifier is held to (approvaltoken/testdata/vectors.json) with exactly
// its reason, RFC 8785's own examples for the canonical form, the replay
// cache, the key cache, and tokens the real server signs: verified through
// the key set the client fetches, and handed by the gate to the function
// it runs.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync, sign } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  AirlockClient, ApprovalKeySet, ApprovalTokenError, Gate, ReplayCache, argsDigest, canonicalize, verifyApprovalToken,
} from '../dist/index.js';
import { KeyCache, KEY_CACHE_TTL_MS, KEY_REFETCH_EVERY_MS } from '../dist/verify.js';
import { startServer, tempDir } from './support/server.mjs';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const file = JSON.parse(readFileSync(join(repo, 'approvaltoken', 'testdata', 'vectors.json'), 'utf8'));

/** The reason verify refused with, '' when it accepted; any other error fails the test. */
function reasonOf(fn) {
  try {
    fn();
    return '';
  } catch (err) {
    if (!(err instanceof ApprovalTokenError)) throw err;
    return err.reason;
  }
}

describe('the vectors of approvaltoken/testdata/vectors.json', () => {
  const keys = ApprovalKeySet.from(file.jwks);
  test('hold both accepted and refused tokens', () => {
    const accepted = file.vectors.filter((v) => !v.reason).length;
    assert.ok(accepted > 0 && accepted < file.vectors.length, `${accepted} of ${file.vectors.length} accepted`);
    assert.equal(new Set(file.vectors.map((v) => v.name)).size, file.vectors.length, 'vector names are unique');
  });
  for (const v of file.vectors) {
    test(v.name, () => {
      const want = { tool: v.tool, args: v.args, audience: v.audience, now: v.now * 1000 };
      assert.equal(reasonOf(() => keys.verify(v.token, want)), v.reason ?? '');
      // The same from the key set's JSON text, through the function.
      assert.equal(reasonOf(() => verifyApprovalToken(v.token, JSON.stringify(file.jwks), want)), v.reason ?? '');
    });
  }
});

test('an accepted vector returns its claims, and its arguments verify as a parsed value too', () => {
  const v = file.vectors.find((x) => x.name === 'accepted as approved');
  const keys = ApprovalKeySet.from(file.jwks);
  const c = keys.verify(v.token, { tool: v.tool, args: JSON.parse(v.args), now: new Date(v.now * 1000) });
  assert.deepEqual(
    [c.sub, c.jti, c.tool, c.iat, c.exp, c.decision_source, c.decided_by, c.aud],
    ['req_1', 'jti_1', 'delete_database', 1800000000, 1800000300, 'human', [{ principal: 'alice', name: 'Alice' }], undefined],
  );
  assert.equal(c.args_digest, argsDigest(v.args));
  assert.equal(reasonOf(() => keys.verify(v.token, { tool: v.tool, args: Buffer.from(v.args), now: v.now * 1000 })), '');
  assert.equal(reasonOf(() => keys.verify(v.token, { tool: v.tool, args: { ...JSON.parse(v.args), n: 2 }, now: v.now * 1000 })), 'arguments');
  // The leeway is the caller's to narrow: 30 s past exp passes by default, not with 10 s.
  assert.equal(reasonOf(() => keys.verify(v.token, { tool: v.tool, args: v.args, now: (c.exp + 30) * 1000, leewayMs: 10_000 })), 'expired');
});

// Tokens signed here, with Node's crypto, for what the vectors do not hold:
// header members in another case, duplicates, and parts that are not base64url.
describe('tokens the Go verifier reads the same way', () => {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const jwk = publicKey.export({ format: 'jwk' });
  const keys = ApprovalKeySet.from({ keys: [{ ...jwk, kid: 'k1', alg: 'EdDSA' }] });
  const claims = { iss: 'x', sub: 'apr_1', jti: 'j1', iat: 1000, exp: 1300, tool: 't', args_digest: argsDigest('{}'), instance_id: 'ins_1', decided_by: [], decision_source: 'human' };
  const b64 = (s) => Buffer.from(s).toString('base64url');
  const signed = (header, payload = JSON.stringify(claims)) => {
    const input = b64(header) + '.' + b64(payload);
    return input + '.' + sign(null, Buffer.from(input), privateKey).toString('base64url');
  };
  const want = { tool: 't', args: '{}', now: 1000_000 };
  const cases = [
    ['the three members', '{"alg":"EdDSA","kid":"k1","typ":"airlock-approval+jwt"}', ''],
    ['members in another order', '{"typ":"airlock-approval+jwt","kid":"k1","alg":"EdDSA"}', ''],
    ['a crit member', '{"alg":"EdDSA","kid":"k1","typ":"airlock-approval+jwt","crit":["b64"]}', 'malformed'],
    ['b64 false', '{"alg":"EdDSA","kid":"k1","typ":"airlock-approval+jwt","b64":false}', 'malformed'],
    ['a jku', '{"alg":"EdDSA","kid":"k1","typ":"airlock-approval+jwt","jku":"https://evil.example"}', 'malformed'],
    ['ALG in capitals: a member the JWS library lacks', '{"ALG":"EdDSA","kid":"k1","typ":"airlock-approval+jwt"}', 'malformed'],
    ['alg twice, EdDSA last', '{"alg":"HS256","kid":"k1","typ":"airlock-approval+jwt","alg":"EdDSA"}', 'malformed'],
    ['kid twice, the same', '{"alg":"EdDSA","kid":"k1","typ":"airlock-approval+jwt","kid":"k1"}', 'malformed'],
    ['alg twice, none last', '{"alg":"EdDSA","kid":"k1","typ":"airlock-approval+jwt","alg":"none"}', 'algorithm'],
    ['alg not a string', '{"alg":1,"kid":"k1","typ":"airlock-approval+jwt"}', 'malformed'],
    ['alg null', '{"alg":null,"kid":"k1","typ":"airlock-approval+jwt"}', 'algorithm'],
    ['typ JWT', '{"alg":"EdDSA","kid":"k1","typ":"JWT"}', 'type'],
    ['no typ', '{"alg":"EdDSA","kid":"k1"}', 'type'],
    ['no kid', '{"alg":"EdDSA","typ":"airlock-approval+jwt"}', 'unknown_key'],
    ['a header that is not an object', '["EdDSA"]', 'malformed'],
    ['text after the header, known kid', '{"alg":"EdDSA","kid":"k1","typ":"airlock-approval+jwt"} x', 'malformed'],
    ['text after the header, unknown kid', '{"alg":"EdDSA","kid":"k2","typ":"airlock-approval+jwt"} x', 'unknown_key'],
  ];
  for (const [name, header, reason] of cases) {
    test(name, () => assert.equal(reasonOf(() => keys.verify(signed(header), want)), reason));
  }
  const good = signed('{"alg":"EdDSA","kid":"k1","typ":"airlock-approval+jwt"}');
  const [h, p, s] = good.split('.');
  for (const [name, token, reason] of [
    ['padding on the payload', `${h}.${p}=.${s}`, 'malformed'],
    ['base64 instead of base64url in the signature', `${h}.${p}.${s.replace(/-/g, '+').replace(/_/g, '/')}`, s.match(/[-_]/) ? 'malformed' : ''],
    ['a lone character left in the signature', `${h}.${p}.${s}AAA`, 'malformed'],
    ['four parts', `${good}.x`, 'malformed'],
    ['an empty signature', `${h}.${p}.`, 'signature'],
    ['claims that are not JSON', signed('{"alg":"EdDSA","kid":"k1","typ":"airlock-approval+jwt"}', '{"exp":'), 'malformed'],
    ['exp not a number', signed('{"alg":"EdDSA","kid":"k1","typ":"airlock-approval+jwt"}', JSON.stringify({ ...claims, exp: '1300' })), 'malformed'],
    ['no exp', signed('{"alg":"EdDSA","kid":"k1","typ":"airlock-approval+jwt"}', JSON.stringify({ ...claims, exp: undefined })), 'expired'],
    ['an empty aud is no audience', signed('{"alg":"EdDSA","kid":"k1","typ":"airlock-approval+jwt"}', JSON.stringify({ ...claims, aud: '' })), ''],
  ]) {
    test(name, () => assert.equal(reasonOf(() => keys.verify(token, want)), reason));
  }
  test('a token of a key not in the set, and a key set of none', () => {
    assert.equal(reasonOf(() => verifyApprovalToken(good, { keys: [{ ...file.jwks.keys[0] }] }, want)), 'unknown_key');
    assert.throws(() => ApprovalKeySet.from({ keys: [{ kty: 'RSA', kid: 'r', n: 'AQAB', e: 'AQAB' }] }), /no Ed25519 key/);
    assert.throws(() => ApprovalKeySet.from('{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k","x":"AAAA"}]}'), /not an Ed25519 public key/);
    assert.throws(() => ApprovalKeySet.from('not json'), /not a JWK Set/);
  });
});

// RFC 8785's own examples, the values of approvaltoken/canonical_test.go.
describe('RFC 8785 canonical form', () => {
  test('3.2.2 values', () => {
    const input = `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\"\\/",
  "literals": [null, true, false]
}`;
    assert.equal(canonicalize(input), '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}');
  });

  test('3.2.3 sorting by UTF-16 code units', () => {
    const input = `{
  "\\u20ac": "Euro Sign",
  "\\r": "Carriage Return",
  "\\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\\ud83d\\ude00": "Emoji: Grinning Face",
  "\\u0080": "Control",
  "\\u00f6": "Latin Small Letter O With Diaeresis"
}`;
    assert.equal(canonicalize(input),
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\u{1F600}":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}');
  });

  // Appendix B: IEEE 754 double (hex) → its canonical JSON number.
  const samples = [
    ['0000000000000000', '0'], ['8000000000000000', '0'], ['0000000000000001', '5e-324'], ['8000000000000001', '-5e-324'],
    ['7fefffffffffffff', '1.7976931348623157e+308'], ['ffefffffffffffff', '-1.7976931348623157e+308'],
    ['4340000000000000', '9007199254740992'], ['c340000000000000', '-9007199254740992'], ['4430000000000000', '295147905179352830000'],
    ['44b52d02c7e14af5', '9.999999999999997e+22'], ['44b52d02c7e14af6', '1e+23'], ['44b52d02c7e14af7', '1.0000000000000001e+23'],
    ['444b1ae4d6e2ef4e', '999999999999999700000'], ['444b1ae4d6e2ef4f', '999999999999999900000'], ['444b1ae4d6e2ef50', '1e+21'],
    ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'], ['3eb0c6f7a0b5ed8d', '0.000001'],
    ['41b3de4355555553', '333333333.3333332'], ['41b3de4355555554', '333333333.33333325'], ['41b3de4355555555', '333333333.3333333'],
    ['41b3de4355555556', '333333333.3333334'], ['41b3de4355555557', '333333333.33333343'],
    ['becbf647612f3696', '-0.0000033333333333333333'], ['43143ff3c1cb0959', '1424953923781206.2'],
  ];
  test('Appendix B numbers', () => {
    for (const [bits, want] of samples) {
      const f = Buffer.from(bits, 'hex').readDoubleBE(0);
      // 17 significant digits read back as the same double, in another spelling than the canonical one.
      const text = f.toPrecision(17);
      assert.equal(canonicalize(text), want, `${bits} (${text})`);
      assert.equal(canonicalize(f), want, `${bits} as a number`);
    }
  });

  test('one JSON value has one digest; a changed byte of a value another; what is not JSON none', () => {
    const base = '{"path":"/tmp/x","mode":1,"tags":["a","é"]}';
    const want = argsDigest(base);
    assert.match(want, /^sha256:[A-Za-z0-9_-]{43}$/);
    for (const same of [
      '{"tags":["a","é"],"mode":1,"path":"/tmp/x"}',
      '{"path":"/tmp/x","mode":1.0,"tags":["a","é"]}',
      '{"path":"\\/tmp\\/x","mode":1,"tags":["a","\\u00e9"]}',
      '{ "path" : "/tmp/x",\n "mode" : 1e0, "tags" : [ "a" , "é" ] }',
      { mode: 1, tags: ['a', 'é'], path: '/tmp/x' },
      Buffer.from(base),
    ]) assert.equal(argsDigest(same), want, String(same));
    for (const other of [
      '{"path":"/tmp/y","mode":1,"tags":["a","é"]}',
      '{"path":"/tmp/x","mode":2,"tags":["a","é"]}',
      '{"path":"/tmp/x","mode":1,"tags":["é","a"]}',
      '{"path":"/tmp/x","mode":"1","tags":["a","é"]}',
      '{"path":"/tmp/x","mode":1,"tags":["a","é"],"x":null}',
    ]) assert.notEqual(argsDigest(other), want, other);
    for (const bad of ['', '{', '{"a":1,"a":2}', '{"a":1}x', '1e400', '"\\ud800"', '[01]', '{"a":1,}', "{'a':1}", Buffer.from([0x22, 0xff, 0x22]), undefined]) {
      assert.throws(() => argsDigest(bad), SyntaxError, String(bad));
    }
    assert.equal(canonicalize('[-0, 1e-400, 12345678901234567890, "\\u2028\\u007f\\u001f/"]'), '[0,0,12345678901234567000,"\u2028\u007f\\u001f/"]');
  });
});

test('the replay cache runs each token once, forgets expired ones, and refuses when full of live ones', () => {
  const rc = new ReplayCache(2);
  const now = 1_000_000_000;
  rc.use({ jti: 'a', exp: now / 1000 + 60 }, now);
  assert.throws(() => rc.use({ jti: 'a', exp: now / 1000 + 60 }, now), (e) => e instanceof ApprovalTokenError && e.reason === 'replayed');
  rc.use({ jti: 'b', exp: now / 1000 + 600 }, now);
  assert.throws(() => rc.use({ jti: 'c', exp: now / 1000 + 60 }, now), /replay cache full \(2 live tokens\)/);
  // a expires (and its leeway passes): its room is free, b stays remembered.
  const later = now + 91_000;
  rc.use({ jti: 'c', exp: later / 1000 + 60 }, later);
  assert.equal(rc.size, 2);
  assert.throws(() => rc.use({ jti: 'b', exp: now / 1000 + 600 }, later), (e) => e instanceof ApprovalTokenError && e.reason === 'replayed');
  assert.throws(() => new ReplayCache(0), TypeError);
});

test('the key cache: five minutes, a fetch for an unknown kid at most every ten seconds, the old set through an outage', async () => {
  const a = ApprovalKeySet.from(file.jwks);
  const jwk = generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' });
  const b = ApprovalKeySet.from({ keys: [...file.jwks.keys, { ...jwk, kid: 'new' }] });
  const kid = file.jwks.keys[0].kid;
  let now = 0;
  let loads = 0;
  let next = a;
  const cache = new KeyCache(async () => {
    loads++;
    if (next instanceof Error) throw next;
    return next;
  }, () => now);
  assert.equal(await cache.get(kid), a);
  assert.equal(await cache.get(kid), a);
  assert.equal(loads, 1, 'a known kid is served from the cache');
  next = b;
  now += KEY_REFETCH_EVERY_MS - 1;
  assert.equal(await cache.get('new'), a, 'an unknown kid within ten seconds of the last fetch fetches nothing');
  assert.equal(loads, 1);
  now += 1;
  assert.equal(await cache.get('new'), b, 'an unknown kid ten seconds later fetches again');
  assert.equal(loads, 2);
  next = new Error('server away');
  now += KEY_CACHE_TTL_MS - 1;
  assert.equal(await cache.get('other'), b, 'through an outage the fresh set holds');
  assert.equal(loads, 3);
  now += 1;
  await assert.rejects(cache.get(kid), /server away/, 'a set five minutes old is not used');
  // Callers that arrive during a fetch share its result.
  next = a;
  const got = await Promise.all([cache.get(kid), cache.get(kid), cache.get(kid)]);
  assert.deepEqual(got, [a, a, a]);
  assert.equal(loads, 5);
});

describe('tokens of the real server', () => {
  let srv;
  const dirs = [];
  before(async () => { srv = await startServer(); });
  after(async () => {
    await srv?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  /** A tool server's client: no Airlock token of its own (and its fetches counted). */
  function toolServer(token = '') {
    const fetched = [];
    const client = new AirlockClient({
      baseUrl: srv.url, token,
      fetch: (url, init) => { fetched.push({ url: String(url), auth: init?.headers?.Authorization }); return fetch(url, init); },
    });
    return { client, fetched };
  }

  async function approved(tool, args) {
    const inst = await srv.agent.registerInstance('verify test');
    const { request } = await srv.agent.createRequest(inst.id, `verify-${Math.random()}`, { tool, arguments: args });
    await srv.reviewer.approve(request.id, 'ok');
    return request;
  }

  test('a claimed execution\'s token verifies through the fetched key set; another call does not', async () => {
    const r = await approved('issue_refund', '{"amount": 4900.0}');
    const claimed = await srv.agent.claimExecution(r.id);
    const token = claimed.execution.approval_token;
    assert.equal(typeof token, 'string');
    // A client with a token of its own does not send it for the keys.
    const { client, fetched } = toolServer('a-token-the-key-set-needs-not');
    const c = await client.verifyApprovalToken(token, { tool: 'issue_refund', args: { amount: 4900 } });
    assert.deepEqual([c.sub, c.tool, c.instance_id, c.decision_source], [r.id, 'issue_refund', r.instance_id, 'human']);
    assert.deepEqual(fetched, [{ url: `${srv.url}/.well-known/jwks.json`, auth: undefined }]);
    for (const [name, want, reason] of [
      ['another tool', { tool: 'issue_refunds', args: '{"amount":4900}' }, 'tool'],
      ['other arguments', { tool: 'issue_refund', args: '{"amount":4901}' }, 'arguments'],
      ['an audience it does not name', { tool: 'issue_refund', args: '{"amount":4900}', audience: 'tools.example' }, 'audience'],
      ['long after it expired', { tool: 'issue_refund', args: '{"amount":4900}', now: (c.exp + 31) * 1000 }, 'expired'],
    ]) {
      await assert.rejects(client.verifyApprovalToken(token, want), (e) => e instanceof ApprovalTokenError && e.reason === reason, name);
    }
    const replay = new ReplayCache(16);
    await client.verifyApprovalToken(token, { tool: 'issue_refund', args: '{"amount":4900}', replay });
    await assert.rejects(client.verifyApprovalToken(token, { tool: 'issue_refund', args: '{"amount":4900}', replay }),
      (e) => e instanceof ApprovalTokenError && e.reason === 'replayed');
    assert.equal(fetched.length, 1, 'the key set is fetched once');
    // A token another key signed under a kid the server never published is
    // refused, and fetches nothing more within ten seconds.
    const { privateKey } = generateKeyPairSync('ed25519');
    const input = Buffer.from('{"alg":"EdDSA","kid":"forged","typ":"airlock-approval+jwt"}').toString('base64url') + '.' + token.split('.')[1];
    const forged = input + '.' + sign(null, Buffer.from(input), privateKey).toString('base64url');
    await assert.rejects(client.verifyApprovalToken(forged, { tool: 'issue_refund', args: '{"amount":4900}' }),
      (e) => e instanceof ApprovalTokenError && e.reason === 'unknown_key');
    // A malformed token, or one of another algorithm, fetches nothing.
    await assert.rejects(toolServer().client.verifyApprovalToken('x.y', { tool: 't', args: '{}' }), (e) => e.reason === 'malformed');
    assert.equal(fetched.length, 1);
    // Offline, against the key set fetched once.
    assert.equal(verifyApprovalToken(token, await srv.agent.jwks(), { tool: 'issue_refund', args: '{"amount":4900}' }).jti, c.jti);
  });

  test('an instance registered with a token audience gets tokens that name it', async () => {
    const inst = await srv.agent.registerInstance('verify audience', undefined, { tokenAudience: 'https://tools.example' });
    assert.equal(inst.token_audience, 'https://tools.example');
    const { request } = await srv.agent.createRequest(inst.id, `aud-${Math.random()}`, { tool: 'send_mail', arguments: { to: 'ops' } });
    await srv.reviewer.approve(request.id, 'ok');
    const token = (await srv.agent.claimExecution(request.id)).execution.approval_token;
    const { client } = toolServer();
    const c = await client.verifyApprovalToken(token, { tool: 'send_mail', args: '{"to":"ops"}', audience: 'https://tools.example' });
    assert.equal(c.aud, 'https://tools.example');
    await assert.rejects(client.verifyApprovalToken(token, { tool: 'send_mail', args: '{"to":"ops"}' }),
      (e) => e instanceof ApprovalTokenError && e.reason === 'audience');
  });

  test('a key set the server cannot serve is an error, not an accepted token', async () => {
    const client = new AirlockClient({
      baseUrl: srv.url, token: '', retry: { attempts: 1 },
      fetch: async () => new Response('{"keys":[]}', { status: 200, headers: { 'Content-Type': 'application/json' } }),
    });
    const v = file.vectors[0];
    await assert.rejects(client.verifyApprovalToken(v.token, { tool: v.tool, args: v.args, now: v.now * 1000 }), /no Ed25519 key/);
  });

  test('the gate hands the function the claim\'s token, which verifies for exactly its arguments', async () => {
    const inst = await srv.agent.registerInstance('gate verify');
    const dir = tempDir('airlock-verify-');
    dirs.push(dir);
    const gate = new Gate({ client: srv.agent, instanceId: inst.id, journalDir: join(dir, 'journal'), pollWaitMs: 5000 });
    const call = {
      tool: 'send_email', arguments: { to: 'a@example.com', body: 'hi' }, timeout: '5m',
      onPending: (r) => { if (!call.decided) { call.decided = true; srv.reviewer.approve(r.id, 'ok').catch(() => {}); } },
    };
    const { client } = toolServer();
    let seen;
    const out = await gate.run(call, async (signal, run) => {
      assert.ok(signal instanceof AbortSignal);
      seen = run;
      return client.verifyApprovalToken(run.approvalToken, { tool: call.tool, args: call.arguments });
    });
    assert.equal(out.value.sub, out.request.id);
    assert.equal(seen.request.id, out.request.id);
    assert.equal(seen.request.execution.status, 'claimed');
    await assert.rejects(client.verifyApprovalToken(seen.approvalToken, { tool: call.tool, args: { ...call.arguments, to: 'b@example.com' } }),
      (e) => e instanceof ApprovalTokenError && e.reason === 'arguments');
    gate.close();
  });
});
