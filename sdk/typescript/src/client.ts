import { AirlockError, MalformedAnswerError, NetworkError } from './errors.js';
import type {
  ApprovalRequest, AuditEntry, BatchDecisionInput, BatchDecisionResult, BatchDecisionResults, ConsistencyProof, ExportAuditOptions, InclusionProof, RequestProof, Board, Code, Column, ConsumeInput, CreatedToken, CreatedWebhook, CreateGrantInput, CreateRequestInput, CreateTokenInput,
  CreatePushSubscriptionInput, CreateWebhookInput, DecisionInput, Delivery, DeliveryPage, EventData, Grant, Health, Instance, JsonObject,
  KeySet, ListDeliveriesOptions, ListRequestsOptions, PushSubscription, ReportStatus, RequestPage, Reviewer, ReviewerLinkInput, ReviewerStats, Session,
  SigningKey, State, Suggestion, Token, TokenUse, VAPIDPublicKey,
  Webhook, WorkItem,
  WorkItemUpdate,
} from './types.js';
import { ApprovalKeySet, KeyCache, approvalTokenKeyId, type ApprovalTokenClaims, type VerifyApprovalTokenOptions } from './verify.js';

/**
 * How the client repeats a call that failed on the network, or that the
 * server rate-limited or could not serve. Only calls that are safe to repeat
 * are repeated (reads, creates with an Idempotency-Key, reports, cancels);
 * a rate-limited call always is, since the server did nothing.
 */
export interface RetryOptions {
  /** How many times a call is sent at most, the first included (default 5). 1 turns retries off. */
  attempts?: number;
  /** The pause before the first retry (default 100 ms); it doubles each time, with jitter, up to maxBackoffMs (default 5 s). */
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

export interface ClientOptions {
  /** The server, such as http://127.0.0.1:8080. */
  baseUrl: string;
  /** A bearer token (agent, reviewer or admin). */
  token: string;
  /** The fetch to use (default: Node's global fetch). Tests inject failing ones here. */
  fetch?: typeof fetch;
  retry?: RetryOptions;
  /** Bounds each attempt of an ordinary call (default 30 s). Long polls get their wait on top. */
  timeoutMs?: number;
  /** How long one long-poll of waitRequest asks the server to hold (default 30 s; the server caps it, 60 s by default). */
  pollWaitMs?: number;
  /** The User-Agent header, so server logs tell adapters apart. */
  userAgent?: string;
}

/** Per-call options. */
export interface CallOptions {
  /** Ends the call (and its retries) when aborted. */
  signal?: AbortSignal;
}

export interface RegisterOptions extends CallOptions {
  /** The tool server this instance's approval tokens are for: they carry it as `aud` (docs/tokens.md). */
  tokenAudience?: string;
}

export interface WaitOptions extends CallOptions {
  /** One long-poll's wait (default: the client's pollWaitMs). */
  pollWaitMs?: number;
  /** Called with the request each time a poll answers that it is still pending. */
  onPending?: (r: ApprovalRequest) => void;
}

interface Call {
  method: string;
  path: string;
  query?: Record<string, string | undefined>;
  /** The JSON body, already encoded; undefined for none. */
  body?: string;
  headers?: Record<string, string>;
  /** Safe to send again after a network error (the server may have acted on the first). */
  retry?: boolean;
  /** Lengthens the attempt's deadline, for long polls. */
  extraMs?: number;
  /** Success statuses (default [200]). */
  want?: number[];
  /** How to read a success body (default json: an object, never empty). */
  as?: 'json' | 'text' | 'none';
  /** Checks a JSON body is the resource asked for; returns what is wrong, or undefined. */
  check?: (body: Record<string, unknown>) => string | undefined;
  /** Sent without the bearer token (default true: with it). */
  auth?: boolean;
  signal?: AbortSignal;
}

/**
 * A client for one Airlock server and one bearer token: every endpoint of the
 * REST API (rest/openapi.yaml). Errors the server answers are AirlockError
 * with the stable `code`; calls that got no answer are NetworkError.
 */
export class AirlockClient {
  readonly baseUrl: string;
  readonly pollWaitMs: number;
  readonly retry: Required<RetryOptions>;
  private readonly token: string;
  private readonly fetch: typeof fetch;
  private readonly timeoutMs: number;
  private readonly userAgent: string;
  private readonly approvalKeys = new KeyCache((signal) => this.fetchApprovalKeys(signal));

  constructor(opts: ClientOptions) {
    let u: URL;
    try {
      u = new URL(opts.baseUrl.trim());
    } catch {
      throw new TypeError(`airlock client: base URL ${JSON.stringify(opts.baseUrl)} is not an http(s) URL such as http://127.0.0.1:8080`);
    }
    if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.host === '') {
      throw new TypeError(`airlock client: base URL ${JSON.stringify(opts.baseUrl)} is not an http(s) URL such as http://127.0.0.1:8080`);
    }
    if (u.username || u.password || u.search || u.hash) {
      throw new TypeError(`airlock client: base URL ${JSON.stringify(opts.baseUrl)} must not carry credentials, a query or a fragment; pass the token separately`);
    }
    this.baseUrl = (u.origin + u.pathname).replace(/\/+$/, '');
    this.token = opts.token;
    this.fetch = opts.fetch ?? globalThis.fetch;
    const minB = opts.retry?.minBackoffMs ?? 100;
    this.retry = {
      attempts: Math.max(1, opts.retry?.attempts ?? 5),
      minBackoffMs: minB,
      maxBackoffMs: Math.max(minB, opts.retry?.maxBackoffMs ?? 5000),
    };
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.pollWaitMs = opts.pollWaitMs ?? 30_000;
    this.userAgent = opts.userAgent ?? 'airlock-typescript-sdk';
  }

  /**
   * A client for an agent, configured as Airlock's own adapters are:
   * AIRLOCK_URL (default http://127.0.0.1:8080) and the agent token in
   * AIRLOCK_AGENT_TOKEN. AIRLOCK_TOKEN, its older name, still works, with
   * a deprecation warning: for the CLI it names a reviewer's or admin's
   * token, and one variable with two meanings is how the wrong one gets used.
   */
  static fromEnv(opts: Partial<ClientOptions> = {}, env: Record<string, string | undefined> = process.env): AirlockClient {
    let token = env.AIRLOCK_AGENT_TOKEN;
    if (!token && env.AIRLOCK_TOKEN) {
      token = env.AIRLOCK_TOKEN;
      process.emitWarning('AIRLOCK_TOKEN is deprecated for the agent token: set AIRLOCK_AGENT_TOKEN', 'DeprecationWarning');
    }
    if (!token) throw new TypeError('airlock client: set AIRLOCK_AGENT_TOKEN to an agent token (airlock tokens create --role agent)');
    return new AirlockClient({ ...opts, baseUrl: opts.baseUrl ?? (env.AIRLOCK_URL || 'http://127.0.0.1:8080'), token });
  }

  // Instances.

  /** Registers this adapter as an instance (agent tokens). Not retried: a lost answer could leave a second instance behind. */
  async registerInstance(name: string, metadata?: JsonObject, o?: RegisterOptions): Promise<Instance> {
    const aud = o?.tokenAudience || undefined;
    return this.do<Instance>({
      method: 'POST', path: '/v1/instances', body: JSON.stringify({ name, metadata, token_audience: aud }), want: [201], signal: o?.signal,
      check: (b) => idIs(b) ?? (b.name !== name ? `it names instance ${JSON.stringify(b.name)}, not ${JSON.stringify(name)}`
        : b.token_audience !== aud ? `its token_audience is ${JSON.stringify(b.token_audience)}, not ${JSON.stringify(aud)}` : undefined),
    });
  }

  /**
   * Returns this agent's instance called name, registering it only when
   * there is none, so a restarted agent keeps its instance (and with it the
   * gate's idempotency keys: a call asked before the restart finds its
   * request instead of asking again). Two processes that register at once
   * settle on the oldest instance of that name; the other deletes its own,
   * still empty, one. Hooks find their session's instance the same way.
   */
  async instanceNamed(name: string, metadata?: JsonObject, o?: CallOptions): Promise<Instance> {
    const found = oldestNamed(await this.listInstances(o), name);
    if (found) return found;
    const mine = await this.registerInstance(name, metadata, o);
    const first = oldestNamed(await this.listInstances(o), name);
    if (first && first.id !== mine.id) {
      await this.deleteInstance(mine.id, o);
      return first;
    }
    return mine;
  }

  /** Lists the instances the caller may see, newest first, with their pending counts. */
  async listInstances(o?: CallOptions): Promise<Instance[]> {
    return (await this.do<{ items: Instance[] }>({ method: 'GET', path: '/v1/instances', retry: true, signal: o?.signal, check: itemsAre })).items;
  }

  /** Reads an instance with its count of pending requests. */
  async getInstance(id: string, o?: CallOptions): Promise<Instance> {
    return this.do({ method: 'GET', path: `/v1/instances/${enc(id)}`, retry: true, signal: o?.signal, check: (b) => idIs(b, id) });
  }

  /** Deletes an instance, cancelling all its pending requests in one step; returns how many. */
  async deleteInstance(id: string, o?: CallOptions): Promise<number> {
    return (await this.do<{ cancelled: number }>({ method: 'DELETE', path: `/v1/instances/${enc(id)}`, retry: true, signal: o?.signal })).cancelled;
  }

  // Approval requests.

  /**
   * Asks whether one tool call may run, under an idempotency key (one key
   * per intended call). A network failure is retried with the same key, so
   * the server creates the request at most once; `created` is false when
   * the server answered with the original (a replay), which may be terminal.
   */
  async createRequest(instanceId: string, idempotencyKey: string, input: CreateRequestInput, o?: CallOptions): Promise<{ request: ApprovalRequest; created: boolean }> {
    checkIdempotencyKey(idempotencyKey);
    let status = 0;
    const request = await this.do<ApprovalRequest>({
      method: 'POST', path: `/v1/instances/${enc(instanceId)}/approval-requests`, body: createBody(input),
      headers: { 'Idempotency-Key': idempotencyKey }, retry: true, want: [201, 200], signal: o?.signal,
      check: (b) => requestIs(b) ?? (b.instance_id !== instanceId
        ? `it belongs to instance ${JSON.stringify(b.instance_id)}, not ${JSON.stringify(instanceId)}`
        : b.tool !== input.tool ? `it asks about tool ${JSON.stringify(b.tool)}, not ${JSON.stringify(input.tool)}` : undefined),
    }, (s) => { status = s; });
    return { request, created: status === 201 };
  }

  /** Reads a request as it is now. */
  async getRequest(id: string, o?: CallOptions): Promise<ApprovalRequest> {
    return this.longPollRequest(id, 0, o);
  }

  /** Reads a request, holding the answer until it is terminal or waitMs has passed (0 reads at once). */
  async longPollRequest(id: string, waitMs: number, o?: CallOptions): Promise<ApprovalRequest> {
    const call: Call = { method: 'GET', path: `/v1/approval-requests/${enc(id)}`, retry: true, signal: o?.signal, check: (b) => requestIs(b, id) };
    if (waitMs > 0) {
      call.query = { wait: `${Math.ceil(waitMs)}ms` };
      call.extraMs = waitMs;
    }
    return this.do(call);
  }

  /**
   * Long-polls until the request is terminal and returns it. It rides out
   * network failures and rate limits until the signal aborts; it stops at
   * once on an answer that polling again cannot change (not found, a refused token).
   */
  async waitRequest(id: string, o: WaitOptions = {}): Promise<ApprovalRequest> {
    const wait = o.pollWaitMs ?? this.pollWaitMs;
    let failures = 0;
    for (;;) {
      let r: ApprovalRequest;
      try {
        r = await this.longPollRequest(id, wait, o);
      } catch (err) {
        if (o.signal?.aborted || !transient(err)) throw err;
        await sleep(this.backoff(failures + this.retry.attempts), o.signal);
        failures++;
        continue;
      }
      failures = 0;
      if (r.state !== 'pending') return r;
      o.onPending?.(r);
    }
  }

  /** Lists one page of requests, newest first (reviewers all, agents their own). Follow next_cursor, or use allRequests. */
  async listRequests(opts: ListRequestsOptions = {}, o?: CallOptions): Promise<RequestPage> {
    return this.do({
      method: 'GET', path: '/v1/approval-requests', retry: true, signal: o?.signal,
      check: itemsAre,
      query: {
        state: opts.state, instance_id: opts.instance_id, tool: opts.tool, kind: opts.kind, cursor: opts.cursor,
        limit: opts.limit === undefined ? undefined : String(opts.limit),
      },
    });
  }

  /** Iterates over every request the filter selects, page by page, newest first. */
  async *allRequests(opts: ListRequestsOptions = {}, o?: CallOptions): AsyncGenerator<ApprovalRequest> {
    let cursor = opts.cursor;
    for (;;) {
      const page = await this.listRequests({ ...opts, cursor }, o);
      yield* page.items;
      if (!page.next_cursor) return;
      cursor = page.next_cursor;
    }
  }

  /** Withdraws a pending request of the caller's. A retry whose first attempt landed answers not_pending with state cancelled. */
  async cancelRequest(id: string, o?: CallOptions): Promise<ApprovalRequest> {
    return this.do({ method: 'POST', path: `/v1/approval-requests/${enc(id)}/cancel`, retry: true, signal: o?.signal, check: (b) => requestIs(b, id) });
  }

  /** Records a reviewer's decision. Not retried on network errors (a lost answer may have been a decision): read the request to learn what holds. */
  async decide(id: string, input: DecisionInput, o?: CallOptions): Promise<ApprovalRequest> {
    return this.do({ method: 'POST', path: `/v1/approval-requests/${enc(id)}/decision`, body: JSON.stringify(input), signal: o?.signal, check: (b) => requestIs(b, id) });
  }

  /**
   * Decides several requests at once (docs/protocol.md, "Batch decisions"):
   * a result per id, in the order of `ids`, each the request its decision
   * left or the problem it would have been answered alone. Throws only for
   * the batch as a whole (not a reviewer, no ids or more than 100, an id
   * twice). Not retried, as `decide` is not.
   */
  async decideBatch(input: BatchDecisionInput, o?: CallOptions): Promise<BatchDecisionResult[]> {
    const got = await this.do<BatchDecisionResults>({ method: 'POST', path: '/v1/approval-requests/decisions', body: JSON.stringify(input), signal: o?.signal,
      check: (b) => batchAnswers(b, input.ids) });
    return got.results;
  }

  /**
   * Approves a tool call with changed arguments (docs/protocol.md, "Edits"):
   * the answer is the request, denied with decision.replaced_by, and
   * `replacement`, the request with these arguments approved in its place.
   */
  async edit(id: string, args: JsonObject, note?: string, validFor?: string, o?: CallOptions): Promise<ApprovalRequest> {
    return this.decide(id, { status: 'approved', arguments: args, note, valid_for: validFor }, o);
  }

  async approve(id: string, note?: string, o?: CallOptions): Promise<ApprovalRequest> {
    return this.decide(id, { status: 'approved', note }, o);
  }

  async deny(id: string, note?: string, o?: CallOptions): Promise<ApprovalRequest> {
    return this.decide(id, { status: 'denied', note }, o);
  }

  /**
   * Claims the one execution attempt of an approved request. Refused at or
   * after expires_at (approval_expired), a second time (already_executed)
   * and unless approved (not_approved). Never retried on a network error:
   * only one claim can ever succeed, so a retry could not tell a win from a
   * loss. The Gate handles that case. A success whose body is not this
   * request, approved, with its execution claimed is a MalformedAnswerError:
   * nothing may run on it.
   */
  async claimExecution(id: string, o?: CallOptions): Promise<ApprovalRequest> {
    return this.do({ method: 'POST', path: `/v1/approval-requests/${enc(id)}/execution`, signal: o?.signal, check: (b) => claimedIs(b, id) });
  }

  /** Records the claimed execution's outcome. Reporting the same outcome again is harmless, so it is retried. */
  async reportExecution(id: string, status: ReportStatus, detail?: string, o?: CallOptions): Promise<ApprovalRequest> {
    return this.do({
      method: 'PUT', path: `/v1/approval-requests/${enc(id)}/execution`, retry: true, signal: o?.signal,
      body: JSON.stringify({ status, detail: detail || undefined }),
      check: (b) => requestIs(b, id) ?? (isObject(b.execution) ? undefined : 'it shows no execution'),
    });
  }

  // Events.

  /**
   * Streams the audit events after the event with ID `after` (0: from the
   * first), reviewers and admins. When the connection drops or the server
   * restarts it reconnects with backoff and resumes with Last-Event-ID, so
   * no event is missed or repeated. It ends when the signal aborts, or
   * throws an error that reconnecting cannot fix (a refused token).
   */
  async *events(after = 0, o?: CallOptions): AsyncGenerator<EventData> {
    let failures = 0;
    const last = { id: after };
    while (!o?.signal?.aborted) {
      const local = new AbortController();
      const signal = o?.signal ? AbortSignal.any([o.signal, local.signal]) : local.signal;
      let got = false;
      try {
        for await (const ev of this.stream(last, signal)) {
          got = true;
          yield ev;
        }
      } catch (err) {
        if (o?.signal?.aborted) return;
        if (!(err instanceof NetworkError) && !transient(err)) throw err;
      } finally {
        local.abort(); // the consumer stopped, or the stream ended: close the connection
      }
      if (got) failures = 0;
      try {
        await sleep(this.backoff(failures), o?.signal);
      } catch {
        return;
      }
      failures++;
    }
  }

  /** One connection's events, advancing last.id with each. */
  private async *stream(last: { id: number }, signal: AbortSignal): AsyncGenerator<EventData> {
    const path = '/v1/events';
    const headers: Record<string, string> = { Accept: 'text/event-stream', 'User-Agent': this.userAgent, Authorization: `Bearer ${this.token}` };
    if (last.id > 0) headers['Last-Event-ID'] = String(last.id);
    let res: Response;
    try {
      res = await this.fetch(this.baseUrl + path, { method: 'GET', headers, signal });
    } catch (err) {
      if (signal.aborted) throw err;
      throw new NetworkError('GET', path, err);
    }
    if (res.status !== 200) {
      throw await decodeError('GET', path, res);
    }
    if (!res.body) throw new NetworkError('GET', path, new Error('no body'));
    const decoder = new TextDecoder();
    let buf = '';
    let data: string[] = [];
    let id = '';
    let typ = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buf += decoder.decode(chunk, { stream: true });
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          let line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line.endsWith('\r')) line = line.slice(0, -1);
          if (line !== '') {
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            let value = colon < 0 ? '' : line.slice(colon + 1);
            if (value.startsWith(' ')) value = value.slice(1);
            if (field === 'id') id = value;
            else if (field === 'event') typ = value;
            else if (field === 'data') data.push(value);
            continue; // a "" field is a comment (heartbeat)
          }
          if (data.length === 0) {
            id = typ = '';
            continue;
          }
          let ev: EventData;
          try {
            ev = JSON.parse(data.join('\n')) as EventData;
          } catch (err) {
            throw new Error(`event stream: event ${id} (${typ}) is not valid JSON: ${(err as Error).message}`);
          }
          data = [];
          id = typ = '';
          last.id = ev.event.id;
          yield ev;
        }
      }
    } catch (err) {
      if (signal.aborted || err instanceof SyntaxError || (err instanceof Error && err.message.startsWith('event stream:'))) throw err;
      throw new NetworkError('GET', path, err);
    }
    throw new NetworkError('GET', path, new Error('stream ended'));
  }

  // Board and work items.

  async board(o?: CallOptions): Promise<Board> {
    return this.do({ method: 'GET', path: '/v1/board', retry: true, signal: o?.signal });
  }

  async createColumn(key: string, name: string, o?: CallOptions): Promise<Column> {
    return this.do({ method: 'POST', path: '/v1/board/columns', body: JSON.stringify({ key, name }), want: [201], signal: o?.signal });
  }

  async createWorkItem(title: string, columnKey: string, o?: CallOptions): Promise<WorkItem> {
    return this.do({ method: 'POST', path: '/v1/work-items', body: JSON.stringify({ title, column_key: columnKey }), want: [201], signal: o?.signal });
  }

  async getWorkItem(id: string, o?: CallOptions): Promise<WorkItem> {
    return this.do({ method: 'GET', path: `/v1/work-items/${enc(id)}`, retry: true, signal: o?.signal });
  }

  /** Renames or moves a work item; with if_version it applies only at that version. Not retried. */
  async updateWorkItem(id: string, input: WorkItemUpdate, o?: CallOptions): Promise<WorkItem> {
    return this.do({ method: 'PATCH', path: `/v1/work-items/${enc(id)}`, body: JSON.stringify(input), signal: o?.signal });
  }

  // Sessions and tokens.

  async listSessions(o?: CallOptions): Promise<Session[]> {
    return (await this.do<{ items: Session[] }>({ method: 'GET', path: '/v1/sessions', retry: true, signal: o?.signal, check: itemsAre })).items;
  }

  /** Mints a token (admins); the secret is in this answer only. Not retried: that could mint two. */
  async createToken(input: CreateTokenInput, o?: CallOptions): Promise<CreatedToken> {
    return this.do({ method: 'POST', path: '/v1/tokens', body: JSON.stringify(input), want: [201], signal: o?.signal });
  }

  async listTokens(o?: CallOptions): Promise<Token[]> {
    return (await this.do<{ items: Token[] }>({ method: 'GET', path: '/v1/tokens', retry: true, signal: o?.signal, check: itemsAre })).items;
  }

  /** Revokes a token (admins); it stops working at once. Revoking twice keeps the first time. */
  async revokeToken(id: string, o?: CallOptions): Promise<Token> {
    return this.do({ method: 'DELETE', path: `/v1/tokens/${enc(id)}`, retry: true, signal: o?.signal });
  }

  // Approval tokens' keys (docs/tokens.md).

  /** The public keys approval tokens may be signed with; needs no token. */
  async jwks(o?: CallOptions): Promise<KeySet> {
    return this.do({ method: 'GET', path: '/.well-known/jwks.json', retry: true, signal: o?.signal, check: keysAre });
  }

  /**
   * Checks an approval token for the call a tool server is about to run,
   * and returns its claims; throws an ApprovalTokenError whose `reason`
   * says why not (docs/tokens.md). The token's signature is checked against
   * the server's key set, fetched without a token (the client needs none:
   * `token: ''`), kept for five minutes and fetched again when a token
   * names a key it lacks, at most every ten seconds. A key set that cannot
   * be fetched or read throws as any call does (NetworkError, AirlockError,
   * MalformedAnswerError).
   */
  async verifyApprovalToken(token: string, want: VerifyApprovalTokenOptions, o?: CallOptions): Promise<ApprovalTokenClaims> {
    const kid = approvalTokenKeyId(token); // a malformed token or a foreign alg causes no fetch
    const keys = await this.approvalKeys.get(kid, o?.signal);
    return keys.verify(token, want);
  }

  /** Fetches the key set for verifyApprovalToken, without the bearer token: the endpoint needs none. */
  private async fetchApprovalKeys(signal?: AbortSignal): Promise<ApprovalKeySet> {
    const path = '/.well-known/jwks.json';
    const body = await this.do<KeySet>({ method: 'GET', path, retry: true, auth: false, signal, check: keysAre });
    try {
      return ApprovalKeySet.from(body);
    } catch (err) {
      throw new MalformedAnswerError('GET', path, 200, (err as Error).message);
    }
  }

  /** The published signing keys, the active one first (admins). */
  async listSigningKeys(o?: CallOptions): Promise<SigningKey[]> {
    return (await this.do<{ items: SigningKey[] }>({ method: 'GET', path: '/v1/signing-keys', retry: true, signal: o?.signal, check: itemsAre })).items;
  }

  /** Signs with a new key from now on (admins). Not retried: that could rotate twice. */
  async rotateSigningKey(o?: CallOptions): Promise<SigningKey> {
    return this.do({ method: 'POST', path: '/v1/signing-keys/rotate', signal: o?.signal });
  }

  /**
   * Has the server verify an approval token against its own keys and record its single use
   * (a verifier token, or an admin's; docs/tokens.md, "Single use"). The first consume of a
   * request's token answers its use; every later one, on any replica, is an AirlockError with
   * code `already_used` (409), and a token that does not verify one with `invalid_token` (400).
   * Not retried: a retry after a lost answer would be told `already_used`. An answer that does
   * not name the request and when is a MalformedAnswerError.
   */
  async consumeApprovalToken(input: ConsumeInput, o?: CallOptions): Promise<TokenUse> {
    return this.do({
      method: 'POST', path: '/v1/approval-tokens/consume', body: JSON.stringify(input), signal: o?.signal,
      check: (b) => (typeof b.request_id === 'string' && b.request_id !== '' && typeof b.consumed_at === 'string' && b.consumed_at !== ''
        ? undefined : 'it does not name the request and when its token was consumed'),
    });
  }

  // The audit log (auditors and admins; docs/audit.md).

  /** The latest signed checkpoint, a C2SP tlog-checkpoint note, exactly as stored. */
  async getAuditCheckpoint(o?: CallOptions): Promise<string> {
    return this.do({ method: 'GET', path: '/v1/audit/checkpoint', retry: true, as: 'text', signal: o?.signal });
  }

  /** The note verifier key checkpoints are signed with; keep it apart from the server. */
  async getAuditKey(o?: CallOptions): Promise<string> {
    return (await this.do<string>({ method: 'GET', path: '/v1/audit/key', retry: true, as: 'text', signal: o?.signal })).trim();
  }

  /** Entries of the tree from `start` (default 0), at most `limit` (default 1000, at most 10000). */
  async listAuditEntries(q: { start?: number; limit?: number } = {}, o?: CallOptions): Promise<AuditEntry[]> {
    const text = await this.do<string>({
      method: 'GET', path: '/v1/audit/entries', retry: true, as: 'text', signal: o?.signal,
      query: { start: q.start?.toString(), limit: q.limit?.toString() },
    });
    return auditLines(text);
  }

  /** Proof that the leaf at `index` is in the tree of `treeSize` leaves. */
  async getAuditInclusionProof(index: number, treeSize: number, o?: CallOptions): Promise<InclusionProof> {
    return this.do({
      method: 'GET', path: '/v1/audit/proofs/inclusion', retry: true, signal: o?.signal,
      query: { index: String(index), tree_size: String(treeSize) }, check: hashesAre,
    });
  }

  /** Proof that the tree of `from` leaves is a prefix of the tree of `to`. */
  async getAuditConsistencyProof(from: number, to: number, o?: CallOptions): Promise<ConsistencyProof> {
    return this.do({
      method: 'GET', path: '/v1/audit/proofs/consistency', retry: true, signal: o?.signal,
      query: { from: String(from), to: String(to) }, check: hashesAre,
    });
  }

  /** The proof of a request's events against the latest checkpoint. */
  async getRequestProof(id: string, o?: CallOptions): Promise<RequestProof> {
    return this.do({
      method: 'GET', path: `/v1/approval-requests/${enc(id)}/proof`, retry: true, signal: o?.signal,
      check: (b) => (b.request_id === id && typeof b.checkpoint === 'string' && Array.isArray(b.entries)
        ? undefined : 'it is not the proof of the request asked for'),
    });
  }

  /**
   * The audit log's export as text: JSON lines, CSV or OCSF lines. The whole export is held
   * in memory; for a large log, page through listAuditEntries instead.
   */
  async exportAudit(q: ExportAuditOptions = {}, o?: CallOptions): Promise<string> {
    return this.do({
      method: 'GET', path: '/v1/audit/export', retry: true, as: 'text', signal: o?.signal,
      query: { format: q.format, since: q.since, until: q.until }, extraMs: 60_000,
    });
  }

  // Grants (reviewers and admins; docs/policy.md).

  /** Makes a grant. Not retried on a network error: that could make two. */
  async createGrant(input: CreateGrantInput, o?: CallOptions): Promise<Grant> {
    return this.do({ method: 'POST', path: '/v1/grants', body: JSON.stringify(input), want: [201], signal: o?.signal });
  }

  /** Lists grants, newest first, with their uses left: only the live ones with { state: 'live' }. */
  async listGrants(opts: { state?: 'live' | 'all'; tool?: string } = {}, o?: CallOptions): Promise<Grant[]> {
    return (await this.do<{ items: Grant[] }>({ method: 'GET', path: '/v1/grants', query: { state: opts.state, tool: opts.tool }, retry: true, signal: o?.signal, check: itemsAre })).items;
  }

  /** Reads a grant. */
  async getGrant(id: string, o?: CallOptions): Promise<Grant> {
    return this.do({ method: 'GET', path: `/v1/grants/${enc(id)}`, retry: true, signal: o?.signal });
  }

  /** Revokes a grant; it approves nothing more. Revoking twice keeps the first revocation. */
  async revokeGrant(id: string, o?: CallOptions): Promise<Grant> {
    return this.do({ method: 'DELETE', path: `/v1/grants/${enc(id)}`, retry: true, signal: o?.signal });
  }

  // Webhooks (admins; docs/notifications.md).

  /**
   * Creates a webhook endpoint; its signing secret (`whsec_…`) is in this
   * answer only. Not retried on a network error: that could create two.
   * A loopback or private URL is refused unless the server runs with
   * --outbound-allow-private.
   */
  async createWebhook(input: CreateWebhookInput, o?: CallOptions): Promise<CreatedWebhook> {
    return this.do({ method: 'POST', path: '/v1/webhooks', body: JSON.stringify(input), want: [201], signal: o?.signal });
  }

  /** Lists the webhook endpoints, oldest first, without secrets. */
  async listWebhooks(o?: CallOptions): Promise<Webhook[]> {
    return (await this.do<{ items: Webhook[] }>({ method: 'GET', path: '/v1/webhooks', retry: true, signal: o?.signal, check: itemsAre })).items;
  }

  /** Reads a webhook endpoint, without its secret. */
  async getWebhook(id: string, o?: CallOptions): Promise<Webhook> {
    return this.do({ method: 'GET', path: `/v1/webhooks/${enc(id)}`, retry: true, signal: o?.signal });
  }

  /** Deletes a webhook endpoint and its deliveries. Not retried on a network error: a retry after a lost answer would report not_found. */
  async deleteWebhook(id: string, o?: CallOptions): Promise<void> {
    await this.do({ method: 'DELETE', path: `/v1/webhooks/${enc(id)}`, want: [204], as: 'none', signal: o?.signal });
  }

  /** Lists one page of an endpoint's deliveries, newest first, each with its attempts. Follow next_cursor. */
  async listWebhookDeliveries(id: string, opts: ListDeliveriesOptions = {}, o?: CallOptions): Promise<DeliveryPage> {
    return this.do({
      method: 'GET', path: `/v1/webhooks/${enc(id)}/deliveries`, retry: true, signal: o?.signal,
      query: { cursor: opts.cursor, limit: opts.limit === undefined ? undefined : String(opts.limit) },
    });
  }

  /** Queues a signed `webhook.test` delivery to the endpoint. Not retried on a network error: that could queue two. */
  async testWebhook(id: string, o?: CallOptions): Promise<Delivery> {
    return this.do({ method: 'POST', path: `/v1/webhooks/${enc(id)}/test`, want: [202], signal: o?.signal });
  }

  /** Enables an endpoint disabled for failing; the deliveries its failures failed are attempted again. Retried: enabling twice changes nothing. */
  async enableWebhook(id: string, o?: CallOptions): Promise<Webhook> {
    return this.do({ method: 'POST', path: `/v1/webhooks/${enc(id)}/enable`, retry: true, signal: o?.signal });
  }

  // Web Push (reviewers and admins, for their own browsers; docs/phone.md).

  /** The server's VAPID public key, the applicationServerKey a browser subscribes with. */
  async getVAPIDPublicKey(o?: CallOptions): Promise<VAPIDPublicKey> {
    return this.do({ method: 'GET', path: '/v1/push/vapid-public-key', retry: true, signal: o?.signal });
  }

  /**
   * Subscribes the caller's own browser (`PushSubscription.toJSON()`) to pushes of
   * `{request_id, tool, deadline_at}` for each request the caller may decide. The same
   * endpoint subscribed again replaces the earlier subscription, so it is retried.
   */
  async createPushSubscription(input: CreatePushSubscriptionInput, o?: CallOptions): Promise<PushSubscription> {
    return this.do({ method: 'POST', path: '/v1/push/subscriptions', body: JSON.stringify(input), want: [201], retry: true, signal: o?.signal });
  }

  /** Deletes one of the caller's own push subscriptions. Not retried: a retry after a lost answer would report not_found. */
  async deletePushSubscription(id: string, o?: CallOptions): Promise<void> {
    await this.do({ method: 'DELETE', path: `/v1/push/subscriptions/${enc(id)}`, want: [204], as: 'none', signal: o?.signal });
  }

  // Reviewers (admins).

  /** Lists the reviewer principals with their Slack user and email address. */
  async listReviewers(o?: CallOptions): Promise<Reviewer[]> {
    return (await this.do<{ items: Reviewer[] }>({ method: 'GET', path: '/v1/reviewers', retry: true, signal: o?.signal, check: itemsAre })).items;
  }

  /** Replaces a principal's link (a field left out is cleared; neither removes it). The same link put again changes nothing, so it is retried. */
  async linkReviewer(principal: string, input: ReviewerLinkInput, o?: CallOptions): Promise<Reviewer> {
    return this.do({ method: 'PUT', path: `/v1/reviewers/${enc(principal)}/link`, body: JSON.stringify(input), retry: true, signal: o?.signal });
  }

  /**
   * Ends every inbox session of a principal on every replica: the revocation of a reviewer who
   * signed in with OIDC (docs/teams.md). Ending them again ends nothing more, so it is retried.
   */
  async endReviewerSessions(principal: string, o?: CallOptions): Promise<{ principal: string; ended: number }> {
    return this.do({ method: 'POST', path: '/v1/reviewers/end-sessions', body: JSON.stringify({ principal }), retry: true, signal: o?.signal });
  }

  /**
   * A decider's approvals, denials and times to decision over the window (30d, 12h; default 30
   * days): admins read anyone's, a reviewer their own (docs/policy.md, "Fatigue, measured").
   */
  async reviewerStats(principal: string, opts?: { since?: string } & CallOptions): Promise<ReviewerStats> {
    const q = opts?.since ? `?since=${encodeURIComponent(opts.since)}` : '';
    return this.do({ method: 'GET', path: `/v1/reviewers/${enc(principal)}/stats${q}`, retry: true, signal: opts?.signal });
  }

  /**
   * The tool calls people approved at least `min` times (default 10) in the window (default 30
   * days) with no denial, each with a proposed rule and grant (admins; docs/policy.md, "Suggestions").
   */
  async suggestions(opts?: { min?: number; since?: string } & CallOptions): Promise<Suggestion[]> {
    const p = new URLSearchParams();
    if (opts?.min !== undefined) p.set('min', String(opts.min));
    if (opts?.since) p.set('since', opts.since);
    const q = p.size > 0 ? `?${p}` : '';
    return (await this.do<{ items: Suggestion[] }>({ method: 'GET', path: `/v1/suggestions${q}`, retry: true, signal: opts?.signal, check: itemsAre })).items;
  }

  // Operations.

  /** Liveness: resolves while the process serves. */
  async healthz(o?: CallOptions): Promise<Health> {
    return this.do({ method: 'GET', path: '/healthz', retry: true, signal: o?.signal });
  }

  /** Readiness: resolves when the store can serve; an AirlockError (503) when not. */
  async readyz(o?: CallOptions): Promise<Health> {
    return this.do({ method: 'GET', path: '/readyz', retry: true, signal: o?.signal });
  }

  /** The Prometheus metrics text. */
  async metrics(o?: CallOptions): Promise<string> {
    return this.do({ method: 'GET', path: '/metrics', retry: true, as: 'text', signal: o?.signal });
  }

  /** The OpenAPI document the server serves, as YAML text. */
  async openapi(o?: CallOptions): Promise<string> {
    return this.do({ method: 'GET', path: '/openapi.yaml', retry: true, as: 'text', signal: o?.signal });
  }

  // Plumbing.

  /** The pause before retry n (0-based): exponential with "equal jitter", so clients do not retry in lockstep. */
  backoff(n: number): number {
    let d = this.retry.minBackoffMs * 2 ** Math.min(n, 20);
    if (d > this.retry.maxBackoffMs) d = this.retry.maxBackoffMs;
    return d / 2 + Math.random() * (d / 2);
  }

  private async do<T>(call: Call, onStatus?: (status: number) => void): Promise<T> {
    let lastErr: unknown;
    for (let attempt = 0; attempt < this.retry.attempts; attempt++) {
      if (attempt > 0) {
        let pause = this.backoff(attempt - 1);
        if (lastErr instanceof AirlockError && lastErr.retryAfterMs !== undefined) pause = Math.min(lastErr.retryAfterMs, 30_000);
        await sleep(pause, call.signal);
      }
      try {
        const { status, body } = await this.once(call);
        onStatus?.(status);
        return body as T;
      } catch (err) {
        lastErr = err;
        if (call.signal?.aborted || !retryable(call, err)) throw err;
      }
    }
    throw lastErr;
  }

  private async once(call: Call): Promise<{ status: number; body: unknown }> {
    let url = this.baseUrl + call.path;
    if (call.query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(call.query)) if (v !== undefined && v !== '') q.set(k, v);
      const s = q.toString();
      if (s) url += '?' + s;
    }
    const headers: Record<string, string> = { Accept: 'application/json', 'User-Agent': this.userAgent, ...call.headers };
    if (call.body !== undefined) headers['Content-Type'] = 'application/json';
    if (this.token && call.auth !== false) headers.Authorization = `Bearer ${this.token}`;
    const timeout = AbortSignal.timeout(this.timeoutMs + (call.extraMs ?? 0));
    const signal = call.signal ? AbortSignal.any([call.signal, timeout]) : timeout;
    let res: Response;
    let text: string;
    try {
      res = await this.fetch(url, { method: call.method, headers, body: call.body, signal });
      text = await res.text();
    } catch (err) {
      if (call.signal?.aborted) throw call.signal.reason ?? err;
      throw new NetworkError(call.method, call.path, err);
    }
    const want = call.want ?? [200];
    if (!want.includes(res.status)) {
      // Another success than the operation's is no answer to believe: a 204 to a claim ran nothing.
      if (res.status >= 200 && res.status < 300) {
        throw new MalformedAnswerError(call.method, call.path, res.status, `the status is not ${want.join(' or ')}`);
      }
      throw await decodeError(call.method, call.path, res, text);
    }
    if (call.as === 'text') return { status: res.status, body: text };
    if (call.as === 'none') return { status: res.status, body: undefined };
    const bad = (reason: string) => new MalformedAnswerError(call.method, call.path, res.status, reason);
    if (text.trim() === '') throw bad('the body is empty');
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (err) {
      throw bad(`the body is not JSON (${(err as Error).message}): ${clip(text)}`);
    }
    if (!isObject(body)) throw bad(`the body is not a JSON object: ${clip(text)}`);
    const wrong = call.check?.(body);
    if (wrong !== undefined) throw bad(wrong);
    return { status: res.status, body };
  }
}

/** The entries of a JSON lines answer, each leaf kept as its own bytes' text. */
function auditLines(text: string): AuditEntry[] {
  const out: AuditEntry[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const at = line.indexOf(',"leaf":');
    const index = Number(line.slice('{"index":'.length, at));
    if (!line.startsWith('{"index":') || at < 0 || !line.endsWith('}') || !Number.isSafeInteger(index)) {
      throw new MalformedAnswerError('GET', '/v1/audit/entries', 200, `a line is not an entry: ${clip(line)}`);
    }
    // A passkey-signed decision's record follows its leaf; a leaf has no
    // such member and escapes every quote in its strings, so the first
    // '},"passkey":' ends the leaf.
    const pk = line.indexOf('},"passkey":', at);
    if (pk < 0) {
      out.push({ index, leaf: line.slice(at + ',"leaf":'.length, -1) });
      continue;
    }
    let passkey: JsonObject;
    try {
      passkey = JSON.parse(line.slice(pk + '},"passkey":'.length, -1)) as JsonObject;
    } catch {
      throw new MalformedAnswerError('GET', '/v1/audit/entries', 200, `a line's passkey record is not JSON: ${clip(line)}`);
    }
    out.push({ index, leaf: line.slice(at + ',"leaf":'.length, pk + 1), passkey });
  }
  return out;
}

/** Whether a proof's hashes are a list of standard base64 SHA-256 hashes. */
function hashesAre(b: Record<string, unknown>): string | undefined {
  const h = b.hashes;
  return Array.isArray(h) && h.every((x) => typeof x === 'string' && /^[A-Za-z0-9+/]{43}=$/.test(x)) ? undefined : 'its hashes are not base64 SHA-256 hashes';
}

/**
 * Whether err may be retried for call: a rate limit always (the server did
 * nothing); a network error, an unavailable store or a gateway's 502/503/504
 * only for calls that are safe to repeat.
 */
function retryable(call: Call, err: unknown): boolean {
  if (err instanceof AirlockError) {
    if (err.code === 'rate_limited') return true;
    if (err.code === 'unavailable') return !!call.retry;
    return !!call.retry && err.code === undefined && [502, 503, 504].includes(err.status);
  }
  return !!call.retry && err instanceof NetworkError;
}

/** Whether err may pass by itself: no answer, a rate limit, an unavailable store, a server error. */
export function transient(err: unknown): boolean {
  if (err instanceof NetworkError) return true;
  if (err instanceof AirlockError) {
    return err.code === 'rate_limited' || err.code === 'unavailable' || err.code === 'internal' || err.status >= 500;
  }
  return false;
}

async function decodeError(method: string, path: string, res: Response, text?: string): Promise<AirlockError> {
  if (text === undefined) {
    try {
      text = await res.text();
    } catch {
      text = '';
    }
  }
  let retryAfterMs: number | undefined;
  const ra = res.headers.get('Retry-After');
  if (ra && /^\d+$/.test(ra)) retryAfterMs = Number(ra) * 1000;
  const mt = (res.headers.get('Content-Type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (mt === 'application/problem+json' || mt === 'application/json') {
    try {
      const p = JSON.parse(text) as {
        code?: string; detail?: string; title?: string; field?: string; state?: string; reason?: string; consumed_at?: string;
      };
      if (p && typeof p.code === 'string' && p.code !== '') {
        return new AirlockError({
          code: p.code as Code, status: res.status, state: p.state as State | undefined, field: p.field,
          detail: p.detail || p.title || '', method, path, retryAfterMs,
          reason: typeof p.reason === 'string' ? p.reason : undefined,
          consumedAt: typeof p.consumed_at === 'string' ? p.consumed_at : undefined,
        });
      }
    } catch {
      // not a problem document: described below
    }
  }
  let body = text.trim();
  if (body.length > 200) body = body.slice(0, 200) + '…';
  return new AirlockError({
    status: res.status, method, path, retryAfterMs,
    detail: 'the server answered without a problem document: ' + (body || res.statusText || String(res.status)),
  });
}

const states = new Set<string>(['pending', 'approved', 'denied', 'expired', 'cancelled']);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function clip(text: string): string {
  const t = text.trim();
  return t.length > 120 ? t.slice(0, 120) + '…' : t;
}

/** What is wrong with a resource's id: none, or not the one asked about. */
function idIs(b: Record<string, unknown>, want?: string): string | undefined {
  if (typeof b.id !== 'string' || b.id === '') return 'it has no id';
  if (want !== undefined && b.id !== want) return `it is ${JSON.stringify(b.id)}, not ${JSON.stringify(want)}`;
  return undefined;
}

/** What is wrong with an approval request: no id, another request's id, no known state. */
function requestIs(b: Record<string, unknown>, want?: string): string | undefined {
  return idIs(b, want) ?? (typeof b.state === 'string' && states.has(b.state) ? undefined : `its state ${JSON.stringify(b.state)} is not a request's state`);
}

/**
 * What is wrong with a claim's answer: it must be the same request,
 * approved, with its execution claimed. The Gate runs a call only on such
 * an answer.
 */
export function claimedIs(b: unknown, want: string): string | undefined {
  if (!isObject(b)) return 'it is not a request';
  const wrong = requestIs(b, want);
  if (wrong !== undefined) return wrong;
  if (b.state !== 'approved') return `it is ${b.state}, not approved`;
  const ex = b.execution;
  if (!isObject(ex) || ex.status !== 'claimed') return 'it does not show the execution claimed';
  return undefined;
}

function itemsAre(b: Record<string, unknown>): string | undefined {
  return Array.isArray(b.items) ? undefined : 'it has no items list';
}

function keysAre(b: Record<string, unknown>): string | undefined {
  return Array.isArray(b.keys) ? undefined : 'it has no keys list';
}

/** The oldest of the instances called name (the API lists only live ones). */
function oldestNamed(list: Instance[], name: string): Instance | undefined {
  let best: Instance | undefined;
  for (const i of list) {
    if (i.name !== name) continue;
    const a = Date.parse(i.created_at);
    const b = best ? Date.parse(best.created_at) : NaN;
    if (!best || a < b || (a === b && i.id < best.id)) best = i;
  }
  return best;
}

/** Writes a create body so the arguments and context given as JSON text go out byte for byte. */
function createBody(input: CreateRequestInput): string {
  const raw = (name: string, v: unknown, fallback?: string): string | undefined => {
    if (v === undefined) return fallback;
    if (typeof v === 'string') {
      try {
        JSON.parse(v);
      } catch {
        throw new TypeError(`airlock: ${name} is not valid JSON; pass the intercepted call's ${name} object`);
      }
      return v.trim() === '' ? fallback : v;
    }
    return JSON.stringify(v);
  };
  let b = `{"tool":${JSON.stringify(input.tool)},"arguments":${raw('arguments', input.arguments, '{}')}`;
  if (input.timeout) b += `,"timeout":${JSON.stringify(input.timeout)}`;
  if (input.agent_reasoning) b += `,"agent_reasoning":${JSON.stringify(input.agent_reasoning)}`;
  const ctx = raw('context', input.context);
  if (ctx !== undefined) b += `,"context":${ctx}`;
  if (input.preview) b += `,"preview":${JSON.stringify({ type: input.preview.type, content: input.preview.content })}`;
  if (input.reversibility) b += `,"reversibility":${JSON.stringify(input.reversibility)}`;
  return b + '}';
}

/** Checks an Idempotency-Key as the server does: 1..200 printable ASCII characters without spaces. */
export function checkIdempotencyKey(key: string): void {
  if (!key) throw new TypeError('airlock: an Idempotency-Key is required: send a unique key per intended call and reuse it on retries');
  if (key.length > 200) throw new TypeError('airlock: an Idempotency-Key must be at most 200 characters');
  if (!/^[!-~]+$/.test(key)) throw new TypeError('airlock: an Idempotency-Key must be printable ASCII without spaces');
}

function enc(id: string): string {
  return encodeURIComponent(id);
}

/** Waits ms, or rejects when the signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** What is wrong with a batch decision's answer: it must hold a result per id, in order. */
function batchAnswers(b: Record<string, unknown>, ids: string[]): string | undefined {
  const results = b.results;
  if (!Array.isArray(results) || results.length !== ids.length) return `it does not hold a result for each of the ${ids.length} ids`;
  for (let i = 0; i < ids.length; i++) {
    const r: unknown = results[i];
    if (!isObject(r) || r.id !== ids[i]) return `result ${i} is not for ${ids[i]}`;
  }
  return undefined;
}
