// Verifying approval tokens (docs/tokens.md) with Node's own crypto. The
// checks are those of the Go verifier (package approvaltoken), made in the
// same order and refused with the same reason codes, so a token one
// language refuses every language refuses, for the same reason; the shared
// vectors (approvaltoken/testdata/vectors.json) hold them to it.
import { createHash, createPublicKey, verify as verifySignature, type KeyObject } from 'node:crypto';
import type { KeySet } from './types.js';

/**
 * Why a token is refused: the same words as Go's approvaltoken.Reason and
 * the server's answers.
 */
export type ApprovalTokenReason =
  | 'malformed' | 'algorithm' | 'type' | 'unknown_key' | 'signature' | 'expired' | 'not_yet_valid'
  | 'audience' | 'tool' | 'arguments' | 'replayed';

/** A token that does not approve the call; `reason` says why, in a word that is the same in every language. */
export class ApprovalTokenError extends Error {
  override name = 'ApprovalTokenError';
  constructor(readonly reason: ApprovalTokenReason, detail: string) {
    super(`approval token refused (${reason}): ${detail}`);
  }
}

/** The JWS "typ" of every approval token: a JWT minted for something else never passes as one. */
export const APPROVAL_TOKEN_TYPE = 'airlock-approval+jwt';

/** How far clocks may disagree when exp and iat are checked. */
export const DEFAULT_LEEWAY_MS = 30_000;

/** The longest token read; a real one is well under 4 KiB even with a quorum of deciders. */
export const MAX_TOKEN_BYTES = 64 * 1024;

/** What a token asserts (docs/tokens.md, "What a token is"). Times are Unix seconds. */
export interface ApprovalTokenClaims {
  /** The Airlock server that signed it. */
  iss: string;
  /** The approval request's id. */
  sub: string;
  /** Unique per execution claim. */
  jti: string;
  /** The audience the instance registered, when it did. */
  aud?: string;
  iat: number;
  exp: number;
  tool: string;
  /** "sha256:" and the unpadded base64url SHA-256 of the arguments' RFC 8785 canonical form. */
  args_digest: string;
  instance_id: string;
  /** The approving principals: the reviewer, every approving vote of a quorum, or the rule or grant. */
  decided_by: { principal: string; name?: string }[];
  decision_source: 'human' | 'policy' | 'grant';
}

/** The call a tool server is about to run, which the token must approve. */
export interface VerifyApprovalTokenOptions {
  /** The tool called. */
  tool: string;
  /**
   * The arguments called with: the raw JSON text received (a string or
   * its UTF-8 bytes), in any JSON spelling of the approved value, or a
   * parsed value, which is read as the JSON text JSON.stringify makes of it
   * (what this SDK's client sends).
   */
  args: unknown;
  /**
   * When set, the token's aud must equal it (an instance's token_audience).
   * A token that names an audience is refused without it: it was meant for
   * someone else.
   */
  audience?: string;
  /** The time the token is checked at (default: now), as a Date or milliseconds since the epoch. */
  now?: Date | number;
  /** How far clocks may disagree for exp and iat (default 30 s). */
  leewayMs?: number;
  /** When set, runs each token at most once in this process. Across processes, consume the token at the server instead. */
  replay?: ReplayCache;
}

/**
 * The public keys approval tokens may be signed with, by kid: a JWK Set
 * such as GET /.well-known/jwks.json answers. For verifying offline; the
 * client's verifyApprovalToken fetches and caches the server's set itself.
 */
export class ApprovalKeySet {
  private constructor(private readonly keys: Map<string, KeyObject>) {}

  /**
   * Reads a JWK Set (RFC 7517), as an object or its JSON text. Keys that
   * are not Ed25519 with a kid are skipped; a set with none, or an Ed25519
   * key that is not one, is a TypeError.
   */
  static from(jwks: KeySet | string | Uint8Array): ApprovalKeySet {
    let set: unknown = jwks;
    if (typeof jwks === 'string' || jwks instanceof Uint8Array) {
      try {
        set = JSON.parse(typeof jwks === 'string' ? jwks : utf8.decode(jwks));
      } catch (err) {
        throw new TypeError(`key set: not a JWK Set: ${(err as Error).message}`);
      }
    }
    const list = isObject(set) ? set.keys : undefined;
    if (!Array.isArray(list)) throw new TypeError('key set: not a JWK Set: it has no keys list');
    const keys = new Map<string, KeyObject>();
    for (const k of list) {
      if (!isObject(k) || k.kty !== 'OKP' || k.crv !== 'Ed25519' || typeof k.kid !== 'string' || k.kid === '') continue;
      const x = typeof k.x === 'string' ? decodeBase64url(k.x) : undefined;
      if (x === undefined || x.length !== 32) throw new TypeError(`key set: key ${JSON.stringify(k.kid)} is not an Ed25519 public key (x must be 32 bytes in base64url)`);
      if (k.d !== undefined) throw new TypeError(`key set: key ${JSON.stringify(k.kid)} is a private key; a key set holds public keys`);
      keys.set(k.kid, createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: k.x as string }, format: 'jwk' }));
    }
    if (keys.size === 0) throw new TypeError('key set: no Ed25519 key with a kid');
    return new ApprovalKeySet(keys);
  }

  /** Whether the set holds the key id, so a cached set can be refreshed when a token names a key it lacks. */
  has(kid: string): boolean {
    return this.keys.has(kid);
  }

  /**
   * Checks token against these keys and the call, and returns its claims;
   * throws an ApprovalTokenError saying why not. It refuses any algorithm
   * but EdDSA, any header member but alg, kid and typ, any type but
   * airlock-approval+jwt, a key not in the set, a bad signature, an expired
   * token (or one issued in the future), a wrong audience or tool, and
   * arguments whose canonical form differs from the approved ones; with
   * `replay`, a token already used.
   */
  verify(token: string, want: VerifyApprovalTokenOptions): ApprovalTokenClaims {
    const h = readHeader(token);
    const key = this.keys.get(h.kid);
    if (key === undefined) throw new ApprovalTokenError('unknown_key', `signed by a key not in the key set (kid ${JSON.stringify(h.kid)})`);
    const { signingInput, payload, signature } = parseCompact(token);
    let ok: boolean;
    try {
      ok = verifySignature(null, signingInput, key, signature);
    } catch {
      ok = false; // a signature of the wrong length, say
    }
    if (!ok) throw new ApprovalTokenError('signature', 'signature does not verify');
    const claims = readClaims(payload);
    check(claims, want);
    want.replay?.use(claims, nowMs(want.now));
    return claims;
  }
}

/**
 * Checks an approval token against a key set you hold (offline: a file, a
 * configured JWK Set) for the call, and returns its claims; throws an
 * ApprovalTokenError saying why not. See ApprovalKeySet.verify.
 */
export function verifyApprovalToken(token: string, keys: ApprovalKeySet | KeySet | string, want: VerifyApprovalTokenOptions): ApprovalTokenClaims {
  const set = keys instanceof ApprovalKeySet ? keys : ApprovalKeySet.from(keys);
  return set.verify(token, want);
}

/**
 * Remembers the ids of tokens this process has accepted until they
 * expire, so it runs each approval at most once. Across processes, consume
 * the token at the server instead.
 */
export class ReplayCache {
  private readonly seen = new Map<string, number>(); // jti → exp

  /** Holds at most max unexpired ids; when full, it refuses new tokens rather than forget one still live. */
  constructor(readonly max: number) {
    if (!Number.isSafeInteger(max) || max < 1) throw new TypeError(`replay cache: max must be a positive integer, not ${max}`);
  }

  /**
   * Records the token's id; throws an ApprovalTokenError (replayed) when it
   * was used before, and an Error when the cache is full of live tokens.
   */
  use(claims: Pick<ApprovalTokenClaims, 'jti' | 'exp'>, now: number = Date.now()): void {
    if (this.seen.has(claims.jti)) throw new ApprovalTokenError('replayed', `already used (jti ${claims.jti})`);
    if (this.seen.size >= this.max) {
      const nowSec = Math.floor(now / 1000);
      for (const [id, exp] of this.seen) {
        if (nowSec > exp + DEFAULT_LEEWAY_MS / 1000) this.seen.delete(id);
      }
      if (this.seen.size >= this.max) {
        throw new Error(`replay cache full (${this.max} live tokens): consume tokens at the server instead`);
      }
    }
    this.seen.set(claims.jti, claims.exp);
  }

  /** How many ids it holds. */
  get size(): number {
    return this.seen.size;
  }
}

/**
 * The digest a token binds the arguments with: "sha256:" and the unpadded
 * base64url SHA-256 of their RFC 8785 canonical form. args as in
 * VerifyApprovalTokenOptions; arguments that are not JSON throw.
 */
export function argsDigest(args: unknown): string {
  return 'sha256:' + createHash('sha256').update(canonicalize(args)).digest('base64url');
}

/**
 * The RFC 8785 (JCS) canonical form of a JSON value, given as JSON text
 * (a string or UTF-8 bytes) or as a parsed value (read as JSON.stringify
 * writes it). Text that is not JSON, with a duplicate key, an unpaired
 * surrogate or a number out of range, has none: it throws a SyntaxError.
 */
export function canonicalize(value: unknown): string {
  let text: string;
  if (typeof value === 'string') {
    text = value;
  } else if (value instanceof Uint8Array) {
    try {
      text = utf8.decode(value);
    } catch {
      throw new SyntaxError('not valid UTF-8');
    }
  } else {
    const s = JSON.stringify(value) as string | undefined;
    if (s === undefined) throw new SyntaxError(`${typeof value} is not a JSON value`);
    text = s;
  }
  const r = new JsonReader(text);
  const v = r.value(0);
  r.end();
  return write(v);
}

/** The kid a token names, unverified: for choosing or refreshing a key set, never for trusting. */
export function approvalTokenKeyId(token: string): string {
  return readHeader(token).kid;
}

/** How long a fetched key set is used: the server allows caching it for five minutes. */
export const KEY_CACHE_TTL_MS = 5 * 60_000;

/** How often a token naming an unknown key may cause a fetch: a forged kid in every call must not be a fetch per call. */
export const KEY_REFETCH_EVERY_MS = 10_000;

/**
 * The server's key set as last fetched, for AirlockClient.verifyApprovalToken:
 * used for five minutes, fetched again sooner when a token names a key it
 * lacks (at most every ten seconds), and kept through an outage while it is
 * fresh. One fetch at a time: callers that arrive during one use its result.
 */
export class KeyCache {
  private set: ApprovalKeySet | undefined;
  private fetchedAt = 0;
  private turn: Promise<void> = Promise.resolve();

  constructor(private readonly load: (signal?: AbortSignal) => Promise<ApprovalKeySet>, private readonly clock: () => number = Date.now) {}

  /** The key set to verify a token naming kid with. */
  async get(kid: string, signal?: AbortSignal): Promise<ApprovalKeySet> {
    const prev = this.turn;
    let release!: () => void;
    this.turn = new Promise<void>((r) => { release = r; });
    try {
      await prev;
      const age = this.clock() - this.fetchedAt;
      if (this.set && age < KEY_CACHE_TTL_MS && (this.set.has(kid) || age < KEY_REFETCH_EVERY_MS)) return this.set;
      let got: ApprovalKeySet;
      try {
        got = await this.load(signal);
      } catch (err) {
        if (this.set && age < KEY_CACHE_TTL_MS && !signal?.aborted) return this.set; // the server is away: the keys it last served still hold
        throw err;
      }
      this.set = got;
      this.fetchedAt = this.clock();
      return got;
    } finally {
      release();
    }
  }
}

// The checks, in the Go verifier's order.

interface Header {
  alg: string;
  kid: string;
  typ: string;
}

const headerMembers = ['alg', 'kid', 'typ'] as const;

/** Decodes and checks the protected header before any key is used, as Go's readHeader does. */
function readHeader(token: string): Header {
  if (typeof token !== 'string') throw new ApprovalTokenError('malformed', 'not a compact JWS approval token: not a string');
  if (token.length > MAX_TOKEN_BYTES || (token.length > MAX_TOKEN_BYTES / 3 && Buffer.byteLength(token) > MAX_TOKEN_BYTES)) {
    throw new ApprovalTokenError('malformed', `not a compact JWS approval token: longer than ${MAX_TOKEN_BYTES} bytes`);
  }
  const dot = token.indexOf('.');
  if (dot < 0 || token.split('.').length !== 3) throw new ApprovalTokenError('malformed', 'not a compact JWS approval token: want three dot-separated parts');
  const raw = decodeBase64url(token.slice(0, dot));
  if (raw === undefined) throw new ApprovalTokenError('malformed', 'not a compact JWS approval token: header: not base64url');
  // Read as Go's decoder reads it into {alg, kid, typ} with unknown
  // members disallowed: the first JSON value, member names matched without
  // regard to case, null leaving a member empty.
  const h: Header = { alg: '', kid: '', typ: '' };
  let v: JValue;
  try {
    v = new JsonReader(utf8Lossy.decode(raw)).value(0);
  } catch (err) {
    throw new ApprovalTokenError('malformed', `not a compact JWS approval token: header: ${(err as Error).message}`);
  }
  if (v !== null) {
    if (!(v instanceof JObject)) throw new ApprovalTokenError('malformed', 'not a compact JWS approval token: header: not an object');
    for (const [name, value] of v.members) {
      const m = headerMembers.find((f) => name === f || name.toLowerCase() === f || name.toUpperCase() === f.toUpperCase());
      if (m === undefined) throw new ApprovalTokenError('malformed', `not a compact JWS approval token: header: member ${JSON.stringify(name)} is not allowed`);
      if (value === null) continue;
      if (typeof value !== 'string') throw new ApprovalTokenError('malformed', `not a compact JWS approval token: header: ${m} is not a string`);
      h[m] = value;
    }
  }
  if (h.alg !== 'EdDSA') throw new ApprovalTokenError('algorithm', `algorithm is not EdDSA (alg ${JSON.stringify(h.alg)})`);
  if (h.typ !== APPROVAL_TOKEN_TYPE) throw new ApprovalTokenError('type', `not an approval token (typ ${JSON.stringify(h.typ)})`);
  return h;
}

/**
 * Parses the token as a JWS library does once the key is known: each part
 * base64url, the header a JSON object with no member twice and alg exactly
 * EdDSA. The signing input is
 * the parts as decoded and encoded again, as go-jose computes it.
 */
function parseCompact(token: string): { signingInput: Buffer; payload: Buffer; signature: Buffer } {
  const [h64, p64, s64] = token.split('.') as [string, string, string];
  const [header, payload, signature] = [decodeBase64url(h64), decodeBase64url(p64), decodeBase64url(s64)];
  if (header === undefined || payload === undefined || signature === undefined) {
    throw new ApprovalTokenError('malformed', 'not a compact JWS approval token: a part is not base64url');
  }
  let alg: unknown;
  try {
    const r = new JsonReader(utf8Lossy.decode(header));
    const v = r.value(0);
    r.end();
    if (!(v instanceof JObject)) throw new SyntaxError('not an object');
    const names = new Set(v.members.map(([k]) => k));
    if (names.size !== v.members.length) throw new SyntaxError('a member appears twice');
    alg = v.get('alg');
  } catch (err) {
    throw new ApprovalTokenError('malformed', `not a compact JWS approval token: header: ${(err as Error).message}`);
  }
  if (alg !== 'EdDSA') throw new ApprovalTokenError('malformed', 'not a compact JWS approval token: unexpected signature algorithm');
  const signingInput = Buffer.from(header.toString('base64url') + '.' + payload.toString('base64url'), 'ascii');
  return { signingInput, payload, signature };
}

const stringClaims = ['iss', 'sub', 'jti', 'aud', 'tool', 'args_digest', 'instance_id', 'decision_source'] as const;

/** The verified payload as claims; a payload that is not them is malformed. */
function readClaims(payload: Buffer): ApprovalTokenClaims {
  let v: unknown;
  try {
    v = JSON.parse(utf8Lossy.decode(payload));
  } catch (err) {
    throw new ApprovalTokenError('malformed', `not a compact JWS approval token: claims: ${(err as Error).message}`);
  }
  if (v === null) v = {};
  const bad = (why: string) => new ApprovalTokenError('malformed', `not a compact JWS approval token: claims: ${why}`);
  if (!isObject(v)) throw bad('not an object');
  for (const k of stringClaims) {
    if (v[k] !== undefined && v[k] !== null && typeof v[k] !== 'string') throw bad(`${k} is not a string`);
  }
  for (const k of ['iat', 'exp'] as const) {
    if (v[k] !== undefined && v[k] !== null && !Number.isSafeInteger(v[k])) throw bad(`${k} is not an integer`);
  }
  const deciders = v.decided_by ?? [];
  if (!Array.isArray(deciders) || !deciders.every((d) => d === null || (isObject(d) && ['principal', 'name'].every((f) => d[f] === undefined || d[f] === null || typeof d[f] === 'string')))) {
    throw bad('decided_by is not a list of principals');
  }
  const s = (k: string) => (typeof v[k] === 'string' ? v[k] : '');
  const claims: ApprovalTokenClaims = {
    iss: s('iss'), sub: s('sub'), jti: s('jti'), iat: (v.iat as number | null) ?? 0, exp: (v.exp as number | null) ?? 0,
    tool: s('tool'), args_digest: s('args_digest'), instance_id: s('instance_id'),
    decided_by: deciders.map((d: Record<string, unknown> | null) => {
      const out: { principal: string; name?: string } = { principal: typeof d?.principal === 'string' ? d.principal : '' };
      if (typeof d?.name === 'string' && d.name !== '') out.name = d.name;
      return out;
    }),
    decision_source: s('decision_source') as ApprovalTokenClaims['decision_source'],
  };
  if (s('aud') !== '') claims.aud = s('aud');
  return claims;
}

/** Holds verified claims to the call, as Go's Expect.check does. */
function check(c: ApprovalTokenClaims, want: VerifyApprovalTokenOptions): void {
  const now = nowMs(want.now);
  const leeway = want.leewayMs ?? DEFAULT_LEEWAY_MS;
  if (now > c.exp * 1000 + leeway) {
    throw new ApprovalTokenError('expired', `expired at ${new Date(c.exp * 1000).toISOString().replace('.000Z', 'Z')}`);
  }
  if (now + leeway < c.iat * 1000) throw new ApprovalTokenError('not_yet_valid', `issued in the future (iat ${c.iat})`);
  const aud = c.aud ?? '';
  const wantAud = want.audience ?? '';
  if (aud !== wantAud) throw new ApprovalTokenError('audience', `audience does not match (token ${JSON.stringify(aud)}, expected ${JSON.stringify(wantAud)})`);
  if (c.tool !== want.tool) throw new ApprovalTokenError('tool', `tool does not match (approved ${JSON.stringify(c.tool)}, called ${JSON.stringify(want.tool)})`);
  let digest: string;
  try {
    digest = argsDigest(want.args);
  } catch (err) {
    throw new ApprovalTokenError('arguments', `arguments do not match the approved ones: ${(err as Error).message}`);
  }
  if (digest !== c.args_digest) {
    throw new ApprovalTokenError('arguments', `arguments do not match the approved ones (approved ${c.args_digest}, called ${digest})`);
  }
}

function nowMs(now: Date | number | undefined): number {
  if (now === undefined) return Date.now();
  return typeof now === 'number' ? now : now.getTime();
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
/** Go's decoder reads invalid UTF-8 as U+FFFD, as this does. */
const utf8Lossy = new TextDecoder('utf-8', { ignoreBOM: true });

const base64urlChars = /^[A-Za-z0-9_-]*$/;
const lineBreaks = /[\r\n]/g;

/**
 * Decodes unpadded base64url as Go's base64.RawURLEncoding does: no
 * padding, nothing outside the alphabet (line breaks are skipped), no
 * length that leaves a lone character. undefined when it is not base64url.
 */
function decodeBase64url(s: string): Buffer | undefined {
  const t = s.replace(lineBreaks, '');
  if (!base64urlChars.test(t) || t.length % 4 === 1) return undefined;
  return Buffer.from(t, 'base64url');
}

// RFC 8785: a strict JSON reader (RFC 8259, as Go's json.Valid) that keeps
// each object's members in order, and the canonical writer.

type JValue = null | boolean | number | string | JValue[] | JObject;

class JObject {
  constructor(readonly members: [string, JValue][]) {}
  /** The last member called name, as a JSON parser keeps it. */
  get(name: string): JValue | undefined {
    for (let i = this.members.length - 1; i >= 0; i--) if (this.members[i]![0] === name) return this.members[i]![1];
    return undefined;
  }
}

/** Nesting deeper than this is refused: the server refuses arguments nested a fraction as deep. */
const MAX_DEPTH = 1000;

const numberSyntax = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const unpairedSurrogate = /\p{Cs}/u;

class JsonReader {
  private i = 0;
  constructor(private readonly s: string) {}

  private fail(what: string): never {
    throw new SyntaxError(`${what} at offset ${this.i}`);
  }

  private space(): void {
    const s = this.s;
    while (this.i < s.length) {
      const c = s.charCodeAt(this.i);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
      this.i++;
    }
  }

  /** Fails unless only whitespace is left. */
  end(): void {
    this.space();
    if (this.i !== this.s.length) this.fail('text after the JSON value');
  }

  value(depth: number): JValue {
    if (depth > MAX_DEPTH) this.fail('nested too deep');
    this.space();
    const s = this.s;
    const c = s[this.i];
    switch (c) {
      case '{': {
        this.i++;
        const members: [string, JValue][] = [];
        this.space();
        if (s[this.i] === '}') {
          this.i++;
          return new JObject(members);
        }
        for (;;) {
          this.space();
          if (s[this.i] !== '"') this.fail('expected a member name');
          const name = this.string();
          this.space();
          if (s[this.i] !== ':') this.fail('expected a colon');
          this.i++;
          members.push([name, this.value(depth + 1)]);
          this.space();
          if (s[this.i] === ',') {
            this.i++;
            continue;
          }
          if (s[this.i] === '}') {
            this.i++;
            return new JObject(members);
          }
          this.fail('expected a comma or }');
        }
      }
      case '[': {
        this.i++;
        const items: JValue[] = [];
        this.space();
        if (s[this.i] === ']') {
          this.i++;
          return items;
        }
        for (;;) {
          items.push(this.value(depth + 1));
          this.space();
          if (s[this.i] === ',') {
            this.i++;
            continue;
          }
          if (s[this.i] === ']') {
            this.i++;
            return items;
          }
          this.fail('expected a comma or ]');
        }
      }
      case '"':
        return this.string();
      case 't':
        return this.literal('true', true);
      case 'f':
        return this.literal('false', false);
      case 'n':
        return this.literal('null', null);
      default: {
        numberSyntax.lastIndex = this.i;
        const m = numberSyntax.exec(s);
        if (!m || m[0] === '' || m[0] === '-') this.fail(c === undefined ? 'unexpected end' : 'unexpected character');
        this.i += m[0].length;
        const n = Number(m[0]);
        if (!Number.isFinite(n)) this.fail(`number ${m[0]} out of range`);
        return n;
      }
    }
  }

  private literal<T>(word: string, v: T): T {
    if (!this.s.startsWith(word, this.i)) this.fail('unexpected character');
    this.i += word.length;
    return v;
  }

  private string(): string {
    const s = this.s;
    this.i++; // the opening quote
    let out = '';
    let from = this.i;
    for (;;) {
      if (this.i >= s.length) this.fail('unterminated string');
      const c = s.charCodeAt(this.i);
      if (c === 0x22) break;
      if (c < 0x20) this.fail('control character in a string');
      if (c !== 0x5c) {
        this.i++;
        continue;
      }
      out += s.slice(from, this.i);
      const e = s[this.i + 1];
      this.i += 2;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          const hex = s.slice(this.i, this.i + 4);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail('bad \\u escape');
          out += String.fromCharCode(parseInt(hex, 16));
          this.i += 4;
          break;
        }
        default:
          this.fail('bad escape');
      }
      from = this.i;
    }
    out += s.slice(from, this.i);
    this.i++; // the closing quote
    if (unpairedSurrogate.test(out)) this.fail('unpaired surrogate in a string');
    return out;
  }
}

/**
 * Writes v in its RFC 8785 form: no whitespace, numbers as ECMAScript
 * writes them, strings escaped as JSON.stringify escapes them, object
 * members sorted by the UTF-16 code units of their names, which must be
 * unique.
 */
function write(v: JValue): string {
  if (v === null || typeof v === 'boolean' || typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number') return Object.is(v, -0) ? '0' : String(v);
  if (Array.isArray(v)) return '[' + v.map(write).join(',') + ']';
  const names = v.members.map(([k]) => k).sort(); // the default sort compares UTF-16 code units
  for (let i = 1; i < names.length; i++) {
    if (names[i] === names[i - 1]) throw new SyntaxError(`duplicate member ${JSON.stringify(names[i])}`);
  }
  const byName = new Map(v.members);
  return '{' + names.map((k) => JSON.stringify(k) + ':' + write(byName.get(k)!)).join(',') + '}';
}
