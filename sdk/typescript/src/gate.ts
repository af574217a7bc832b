import { createHash } from 'node:crypto';
import { AirlockClient, checkIdempotencyKey, claimedIs, sleep, type CallOptions } from './client.js';
import {
  AirlockError, AlreadyExecutedError, CancelledError, DeniedError, ExpiredError, InterruptedError, LapsedError, MalformedAnswerError,
  OutcomeUnknownError, ToolError, isCode,
} from './errors.js';
import { Journal, settled, type Entry } from './journal.js';
import type { ApprovalRequest, CreateRequestInput, ExecutionStatus, JsonObject, Preview, ReportStatus, Reversibility } from './types.js';

export interface GateOptions {
  /** Talks to Airlock with an agent token. */
  client: AirlockClient;
  /**
   * The instance (registered by this agent's token) that owns the gate's
   * requests. Keep it across restarts: a call's idempotency key is derived
   * from it, so a restarted gate with a new instance asks anew instead of
   * finding its earlier request.
   */
  instanceId: string;
  /** Where the gate records each step (created if needed, locked while open). Give each gate process its own. */
  journalDir: string;
  /** The decision window asked for calls that name none (Go or ISO 8601 duration; default: the server's, 15m). */
  timeout?: string;
  /** One long-poll's wait while waiting for a decision (default: the client's, 30 s). */
  pollWaitMs?: number;
  /** The local clock checked against expires_at before a call starts (default Date.now). */
  now?: () => number;
  /**
   * fsync every journal line before going on, not only the one written
   * before the claim (fsynced while the claim is in flight, and before the
   * call starts: that is what keeps a call from running twice): after a
   * power loss the report is then as precise as after a crash. About 1 ms
   * per line.
   */
  syncEveryStep?: boolean;
  /**
   * Run a call a reviewer approved with changed arguments (docs/protocol.md,
   * "Edits"): the request is then denied, naming its replacement, and the
   * gate claims and runs the replacement, handing the function its
   * arguments (`run.arguments`, which the function must use). Off (the
   * default), such a call does not run: run() rejects with a DeniedError
   * whose `replacedBy` names the replacement.
   */
  acceptEdits?: boolean;
}

/** One intercepted tool call. */
export interface GateCall {
  /** The tool's name, exactly as intercepted. */
  tool: string;
  /**
   * The call's arguments, exactly as intercepted (an object, or its JSON
   * text). They are what the reviewer sees; the function run must use these
   * and no others.
   */
  arguments?: JsonObject | string;
  /**
   * Tells deliberate attempts of the same call apart (the agent's tool-call
   * ID, say). The same tool, arguments and attempt key on the same instance
   * are the same request: running it again finds the earlier outcome
   * instead of asking again. Use a new one after a denial, an expiry or a lapse.
   */
  attemptKey?: string;
  /** Used instead of the derived key when set. */
  idempotencyKey?: string;
  /** The decision window asked (default: the gate's). */
  timeout?: string;
  /** The agent's claim about why; shown as a claim. */
  agentReasoning?: string;
  /** What the adapter observed. */
  context?: JsonObject;
  /** The adapter's claim of what the call would do, shown to reviewers as such. */
  preview?: Preview;
  /** How far the call's effect can be undone, as the adapter claims. */
  reversibility?: Reversibility;
  /** Called while the request waits for a decision: once when first seen pending, then after each poll. */
  onPending?: (r: ApprovalRequest) => void;
}

/** What became of a call that ran and succeeded. */
export interface Outcome<T> {
  /** The function's result. */
  value: T;
  /** The request as last seen. */
  request: ApprovalRequest;
  status: 'succeeded';
  /** Why the outcome could not be reported; the journal keeps it, and recover() reports it. */
  reportError?: unknown;
}

/** One call that recover() settled. */
export interface Recovered {
  requestId: string;
  /** What was reported: unknown for an interrupted run, else the outcome the journal had. */
  status?: ReportStatus;
  /** Why it could not be reported; it stays in the journal. */
  error?: unknown;
}

/**
 * The tool function a gate runs: it gets a signal that aborts when the
 * caller's does, and the approval it runs under.
 */
export type ToolFn<T> = (signal: AbortSignal, run: ToolRun) => Promise<T> | T;

/** The approval a tool function runs under. */
export interface ToolRun {
  /** The request as its claim answered: approved, its execution claimed. */
  request: ApprovalRequest;
  /**
   * The arguments approved: the call's own, or, with acceptEdits, a
   * reviewer's edit of them (then request.derived_from names the original).
   * The function must run with these.
   */
  arguments?: JsonObject;
  /**
   * The claim's approval token (docs/tokens.md): hand it to the tool
   * server with the call, which verifies it for exactly these arguments
   * (AirlockClient.verifyApprovalToken). Undefined when the server sent none.
   */
  approvalToken?: string;
}

/**
 * Runs tool calls only with a valid approval, and each at most once
 * (docs/protocol.md). For one call it asks Airlock for approval of exactly
 * that tool and those arguments, waits for a reviewer, claims the single
 * execution attempt, checks expires_at against the local clock immediately
 * before starting, runs the function, and reports succeeded, failed or
 * unknown.
 *
 * "At most once" holds when the same approval arrives twice, when several
 * gates race for it, and across restarts: each step is written to an on-disk
 * journal before the gate acts on it, the step before the claim is fsynced
 * before the call starts, and a run a crash interrupted is reported unknown
 * and never run again.
 */
export class Gate {
  readonly client: AirlockClient;
  readonly instanceId: string;
  private readonly journal: Journal;
  private readonly now: () => number;
  private readonly timeout: string | undefined;
  private readonly pollWaitMs: number | undefined;
  private readonly acceptEdits: boolean;
  private readonly locks = new Map<string, Promise<void>>();

  constructor(opts: GateOptions) {
    if (!opts.client) throw new TypeError('airlock gate: options.client is required');
    if (!opts.instanceId) throw new TypeError('airlock gate: options.instanceId is required: register an instance with client.registerInstance');
    this.client = opts.client;
    this.instanceId = opts.instanceId;
    this.journal = Journal.open(opts.journalDir, opts.syncEveryStep ?? false);
    this.now = opts.now ?? Date.now;
    this.timeout = opts.timeout;
    this.pollWaitMs = opts.pollWaitMs;
    this.acceptEdits = opts.acceptEdits ?? false;
  }

  /** Releases the journal. */
  close(): void {
    this.journal.close();
  }

  /**
   * The call's idempotency key: idempotencyKey when set, else a hash of the
   * instance, the tool, the canonical arguments and the attempt key. Changed
   * arguments give a new key, and so a new request.
   */
  key(call: GateCall): string {
    if (call.idempotencyKey) {
      checkIdempotencyKey(call.idempotencyKey);
      return call.idempotencyKey;
    }
    const args = typeof call.arguments === 'string' ? JSON.parse(call.arguments || '{}') : (call.arguments ?? {});
    const h = createHash('sha256');
    for (const part of ['airlock-gate/v1', this.instanceId, call.tool, canonicalJson(args), call.attemptKey ?? '']) {
      h.update(`${Buffer.byteLength(part)}:${part}`);
    }
    return 'gate-' + h.digest('hex').slice(0, 40);
  }

  /**
   * Asks for approval of call and, once approved, runs fn at most once.
   *
   * Resolves with fn's value when it ran and succeeded. Rejects with a
   * ToolError when fn threw (after reporting failed, or unknown for an
   * OutcomeUnknownError); when fn did not run, with DeniedError (with the
   * reviewer's note), ExpiredError, CancelledError (withdrawn, or the signal
   * aborted while asking or waiting: the gate then cancels the request),
   * LapsedError (approved, but permission to start ended first),
   * AlreadyExecutedError, InterruptedError (an earlier run was cut short by
   * a crash; reported unknown, not re-run), or an error reaching Airlock.
   */
  async run<T>(call: GateCall, fn: ToolFn<T>, o: CallOptions = {}): Promise<Outcome<T>> {
    if (typeof fn !== 'function') throw new TypeError('airlock gate: run needs a function to run');
    const key = this.key(call);
    const unlock = await this.lock(key, o.signal);
    try {
      const e = this.journal.read(key);
      let r: ApprovalRequest;
      if (e.requestId) {
        // This call was asked before: the journal says how far it got.
        r = await this.client.getRequest(e.requestId, o);
        r = await this.follow(r, call.onPending, o.signal);
        const done = await this.resume(e, r);
        if (done) throw done;
      } else {
        // The file is created on the thread pool while the request is.
        const opened = this.journal.prepare(key).then(() => undefined, (err: unknown) => err ?? new Error('open failed'));
        const input: CreateRequestInput = {
          tool: call.tool, arguments: call.arguments, timeout: call.timeout ?? this.timeout,
          agent_reasoning: call.agentReasoning, context: call.context,
          preview: call.preview, reversibility: call.reversibility,
        };
        try {
          ({ request: r } = await this.client.createRequest(this.instanceId, key, input, o));
        } catch (err) {
          await opened; // before release() closes it
          // The signal aborted while asking: the request may stand on the
          // server all the same. The same key finds it (or makes it), and
          // it is withdrawn, so nobody approves a call that will not run.
          if (o.signal?.aborted) throw await this.withdrawAsked(key, input);
          throw err;
        }
        const openErr = await opened;
        if (openErr !== undefined) throw openErr;
        this.journal.append(key, 'requested', r.id, key);
      }
      if (r.state === 'pending') r = await this.wait(r, call.onPending, o.signal);
      r = await this.follow(r, call.onPending, o.signal);
      return await this.execute(key, r, fn, o.signal);
    } finally {
      this.journal.release(key);
      unlock();
    }
  }

  /**
   * Asks for approval of call without waiting or running anything, and
   * returns the request as it is now (the same one on every call: the key
   * is journaled). For adapters that pause elsewhere while a person
   * decides (a LangGraph interrupt, say) and call run() once it is decided.
   */
  async ask(call: GateCall, o: CallOptions = {}): Promise<ApprovalRequest> {
    const key = this.key(call);
    const unlock = await this.lock(key, o.signal);
    try {
      const e = this.journal.read(key);
      if (e.requestId) return await this.client.getRequest(e.requestId, o);
      // Unlike run(), an ask whose signal aborts while the create is in
      // flight does not withdraw the request it may have made. ask() never
      // withdraws: the request it makes is meant to outlive it (run(), or
      // the deadline, settles it), and a caller that aborted an ask (its own
      // timeout, say) and asks again must find the same pending request
      // under the same key, not a cancelled one.
      const { request } = await this.client.createRequest(this.instanceId, key, {
        tool: call.tool, arguments: call.arguments, timeout: call.timeout ?? this.timeout,
        agent_reasoning: call.agentReasoning, context: call.context,
      }, o);
      this.journal.append(key, 'requested', request.id, key);
      return request;
    } finally {
      this.journal.release(key);
      unlock();
    }
  }

  /** Waits for a decision. When the signal aborts first, it withdraws the request, so nobody approves a call that will not run. */
  private async wait(r: ApprovalRequest, onPending: ((r: ApprovalRequest) => void) | undefined, signal?: AbortSignal): Promise<ApprovalRequest> {
    onPending?.(r);
    try {
      return await this.client.waitRequest(r.id, { pollWaitMs: this.pollWaitMs, onPending, signal });
    } catch (err) {
      if (!signal?.aborted) throw err;
      throw await this.withdraw(r, AbortSignal.timeout(WITHDRAW_MS));
    }
  }

  /** Cancels r for a caller whose signal aborted, and returns the abandoned call's CancelledError. */
  private async withdraw(r: ApprovalRequest, signal: AbortSignal): Promise<CancelledError> {
    let withdrawn = r;
    let cancelError: unknown;
    try {
      withdrawn = await this.client.cancelRequest(r.id, { signal });
    } catch (cerr) {
      if (!isCode(cerr, 'not_pending', 'deadline_passed')) cancelError = cerr;
    }
    return new CancelledError(withdrawn, true, cancelError);
  }

  /**
   * Withdraws a request whose creation the caller's signal cut short: the
   * server may have made it without the answer arriving. Asking again with
   * the same key, without the caller's signal, returns it, or makes it when
   * the first ask never arrived, and either way it is cancelled at once.
   */
  private async withdrawAsked(key: string, input: CreateRequestInput): Promise<CancelledError> {
    const signal = AbortSignal.timeout(WITHDRAW_MS);
    let r: ApprovalRequest;
    try {
      ({ request: r } = await this.client.createRequest(this.instanceId, key, input, { signal }));
    } catch (err) {
      return new CancelledError(unknownRequest(input.tool), true, err);
    }
    if (r.state !== 'pending') return new CancelledError(r, true);
    return this.withdraw(r, signal);
  }

  /** Handles a call the journal has seen: the error to end with, or undefined when it may go on as if new (its claim never landed). */
  private async resume(e: Entry, r: ApprovalRequest): Promise<Error | undefined> {
    if (e.finished) {
      let req = r;
      if (!e.reported) {
        ({ request: req } = await this.report(e.key, r, e.finished, 'outcome recorded before the gate restarted'));
      }
      return new AlreadyExecutedError(req, e.finished, true);
    }
    if (e.claimed) return (await this.interrupted(e.key, r, true)).error;
    if (e.claiming) {
      if (!r.execution) return undefined; // the claim never landed
      return (await this.interrupted(e.key, r, false)).error;
    }
    return undefined;
  }

  /** Reports unknown for a run a crash cut short (started), or whose claim answer was lost, and never runs it again. */
  private async interrupted(key: string, r: ApprovalRequest, started: boolean): Promise<{ error: InterruptedError; request: ApprovalRequest; reportError?: unknown }> {
    const detail = started
      ? 'the gate stopped while the call was running; it was not run again'
      : 'the gate lost the answer to its claim (crash or network); the call was not started here and is not run again';
    this.journal.append(key, 'finished', r.id, 'unknown');
    const { request, reportError } = await this.report(key, r, 'unknown', detail);
    return { error: new InterruptedError(request, started), request, reportError };
  }

  /**
   * With acceptEdits, the replacement of a request a reviewer approved with
   * changed arguments, once decided; else r. The replacement is believed
   * only when it says it was derived from r, for the same tool on the same
   * instance.
   */
  private async follow(r: ApprovalRequest, onPending: ((r: ApprovalRequest) => void) | undefined, signal?: AbortSignal): Promise<ApprovalRequest> {
    const id = r.decision?.replaced_by;
    if (!this.acceptEdits || r.state !== 'denied' || !id) return r;
    const n = await this.client.getRequest(id, { signal });
    if (n.id !== id || n.derived_from !== r.id || n.tool !== r.tool || n.instance_id !== r.instance_id) {
      throw new Error(`airlock gate: request ${r.id} names ${id} as its edited replacement, but the server's answer is not an edit of it; nothing runs`);
    }
    return n.state === 'pending' ? this.wait(n, onPending, signal) : n;
  }

  /** Claims and runs an approved call, or says why it does not run. */
  private async execute<T>(key: string, r: ApprovalRequest, fn: ToolFn<T>, signal?: AbortSignal): Promise<Outcome<T>> {
    switch (r.state) {
      case 'denied':
        throw new DeniedError(r);
      case 'expired':
        throw new ExpiredError(r);
      case 'cancelled':
        throw new CancelledError(r);
      case 'approved':
        break;
      default:
        throw new Error(`airlock gate: request ${r.id} is ${r.state}, not terminal`);
    }
    if (r.execution) throw new AlreadyExecutedError(r, r.execution.status);
    const expiresAt = r.decision?.expires_at ? Date.parse(r.decision.expires_at) : NaN;
    if (Number.isNaN(expiresAt)) throw new Error(`airlock gate: approved request ${r.id} has no expires_at`);
    if (this.now() >= expiresAt) throw new LapsedError(r);

    const id = r.id;
    r = await this.claim(key, r, signal);
    // The call runs only on what the claim's answer shows: this request,
    // approved, its execution claimed. The client checks it too; this is
    // the last word before anything runs.
    const wrong = claimedIs(r, id);
    if (wrong !== undefined) throw new MalformedAnswerError('POST', `/v1/approval-requests/${id}/execution`, 200, wrong);
    try {
      this.journal.append(key, 'claimed', r.id);
    } catch (err) {
      // Without the record a crash during the run would go unnoticed: do not start.
      await this.report(key, r, 'failed', 'not started: the gate could not write its journal', false);
      throw new Error(`airlock gate: not started: ${(err as Error).message}`, { cause: err });
    }
    // Immediately before starting: permission to start ends at expires_at.
    if (this.now() >= expiresAt) {
      this.journal.append(key, 'finished', r.id, 'failed');
      const { request } = await this.report(key, r, 'failed',
        `not started: permission to start ended at ${r.decision!.expires_at} before the call could start`);
      throw new LapsedError(request, true);
    }

    let value: T;
    try {
      const run: ToolRun = { request: r, arguments: r.arguments };
      if (r.execution?.approval_token) run.approvalToken = r.execution.approval_token;
      value = await fn(signal ?? new AbortController().signal, run);
    } catch (err) {
      const status: 'failed' | 'unknown' = err instanceof OutcomeUnknownError || (err as { cause?: unknown })?.cause instanceof OutcomeUnknownError ? 'unknown' : 'failed';
      this.journal.append(key, 'finished', r.id, status);
      const { request } = await this.report(key, r, status, err instanceof Error ? err.message : String(err));
      throw new ToolError(request, status, err);
    }
    let out: Outcome<T> = { value, request: r, status: 'succeeded' };
    try {
      this.journal.append(key, 'finished', r.id, 'succeeded');
    } catch (err) {
      return { ...out, reportError: err };
    }
    const { request, reportError } = await this.report(key, r, 'succeeded', '');
    out = { ...out, request };
    if (reportError !== undefined) out.reportError = reportError;
    return out;
  }

  /**
   * Claims the execution; resolves once the claim is granted and the
   * "claiming" line is durable, so the call may start. The line is written
   * before the claim is sent (it survives the process being killed) and
   * fsynced while the claim is in flight (it survives a power cut once the
   * call may start); see docs/sdks.md, "The journal", for each crash point.
   */
  private async claim(key: string, r: ApprovalRequest, signal?: AbortSignal): Promise<ApprovalRequest> {
    this.journal.append(key, 'claiming', r.id);
    const synced = this.journal.durable(key).then(() => undefined, (err: unknown) => err ?? new Error('fsync failed'));
    let got: ApprovalRequest;
    try {
      got = await this.sendClaim(key, r, signal);
    } catch (err) {
      await synced; // the fsync is done with the file before the gate releases it
      throw err;
    }
    const syncErr = await synced;
    if (syncErr !== undefined) {
      // Without a durable record a power cut during the run would go unnoticed: do not start.
      await this.report(key, got, 'failed', 'not started: the gate could not write its journal', false);
      throw new Error(`airlock gate: not started: ${(syncErr as Error).message}`, { cause: syncErr });
    }
    return got;
  }

  /**
   * Sends the claim. When its answer is lost, or is a success that cannot
   * be trusted (empty, not JSON, another request's), the request is read to learn
   * whether it landed: if not, the claim is sent again; if so, nobody can
   * tell whether it was this gate's, so the call does not start and is
   * reported unknown.
   */
  private async sendClaim(key: string, r: ApprovalRequest, signal?: AbortSignal): Promise<ApprovalRequest> {
    let lastErr: unknown;
    for (let attempt = 0; attempt < this.client.retry.attempts; attempt++) {
      if (attempt > 0) {
        try {
          await sleep(this.client.backoff(attempt - 1), signal);
        } catch {
          break;
        }
      }
      try {
        return await this.client.claimExecution(r.id, { signal });
      } catch (err) {
        if (err instanceof AirlockError && err.code && !['rate_limited', 'internal', 'unavailable'].includes(err.code)) {
          this.journal.append(key, 'refused', r.id, err.code);
          throw await this.refusal(r, err);
        }
        lastErr = err;
      }
      // No answer, or none to believe: did the claim land?
      const now = await this.client.getRequest(r.id, { signal: AbortSignal.timeout(30_000) }).catch((rerr: unknown) => {
        throw new Error(`airlock gate: claim ${r.id}: ${(lastErr as Error).message}; and reading it back: ${(rerr as Error).message}`, { cause: lastErr });
      });
      if (now.execution) throw (await this.interrupted(key, now, false)).error;
      if (signal?.aborted) break;
    }
    this.journal.append(key, 'refused', r.id, 'unsent');
    if (signal?.aborted) throw new CancelledError(r, true);
    throw new Error(`airlock gate: claim ${r.id}: ${(lastErr as Error)?.message}`, { cause: lastErr });
  }

  /** Turns a refused claim into the gate's outcome error. */
  private async refusal(r: ApprovalRequest, err: AirlockError): Promise<Error> {
    if (err.code === 'already_executed') {
      let status: ExecutionStatus = 'claimed';
      try {
        const now = await this.client.getRequest(r.id);
        if (now.execution) {
          r = now;
          status = now.execution.status;
        }
      } catch {
        // keep what is known
      }
      return new AlreadyExecutedError(r, status);
    }
    if (err.code === 'approval_expired') return new LapsedError(r);
    return new Error(`airlock gate: claim ${r.id}: ${err.message}`, { cause: err });
  }

  /**
   * Sends the outcome (even when the caller's signal has aborted: the call
   * ran) and journals that the server has it. Returns the request as the
   * server answered, or r when it could not, with the reason.
   */
  private async report(key: string, r: ApprovalRequest, status: ReportStatus, detail: string, journal = true): Promise<{ request: ApprovalRequest; reportError?: unknown }> {
    if (detail.length > 4000) detail = detail.slice(0, 3997) + '...';
    try {
      const got = await this.client.reportExecution(r.id, status, detail, { signal: AbortSignal.timeout(60_000) });
      if (journal) this.journal.append(key, 'reported', r.id, status);
      return { request: got };
    } catch (err) {
      // The server has another outcome already (the journal lost a line to
      // a power cut, say): it holds, and nothing is left to report.
      if (isCode(err, 'already_executed')) {
        const now = await this.client.getRequest(r.id).catch(() => undefined);
        if (now?.execution && now.execution.status !== 'claimed') {
          if (journal) this.journal.append(key, 'reported', r.id, now.execution.status);
          return { request: now };
        }
      }
      return { request: r, reportError: err };
    }
  }

  /**
   * Settles what an earlier process left in the journal: a run it started
   * and did not finish is reported unknown (never run again); an outcome it
   * recorded but did not report is reported. Call it at start.
   */
  async recover(): Promise<Recovered[]> {
    const out: Recovered[] = [];
    for (const e0 of this.journal.entries()) {
      if (settled(e0) || !e0.requestId) continue;
      const unlock = await this.lock(e0.key);
      try {
        const e = this.journal.read(e0.key); // again, under the lock
        if (settled(e)) continue;
        let r: ApprovalRequest;
        try {
          r = await this.client.getRequest(e.requestId);
        } catch (err) {
          out.push({ requestId: e.requestId, error: err });
          continue;
        }
        if (e.finished) {
          const { reportError } = e.reported ? {} : await this.report(e.key, r, e.finished, 'outcome recorded before the gate restarted');
          out.push({ requestId: r.id, status: e.finished, error: reportError });
        } else if (e.claimed || (e.claiming && r.execution)) {
          const { reportError } = await this.interrupted(e.key, r, e.claimed);
          out.push({ requestId: r.id, status: 'unknown', error: reportError });
        } else {
          // A claim that never landed: nothing ran, nothing to report.
          this.journal.append(e.key, 'refused', r.id, 'unsent');
        }
      } finally {
        this.journal.release(e0.key);
        unlock();
      }
    }
    return out;
  }

  /** How many of the journal's calls the server does not have the outcome of yet (recover() settles them). */
  outstanding(): number {
    return this.journal.entries().filter((e) => !settled(e)).length;
  }

  /** Serializes runs of one call within a process: a second run waits for the first, then finds its outcome in the journal. */
  private async lock(key: string, signal?: AbortSignal): Promise<() => void> {
    for (;;) {
      const held = this.locks.get(key);
      if (!held) break;
      if (signal) {
        signal.throwIfAborted();
        let onAbort: () => void = () => {};
        try {
          await Promise.race([held, new Promise<never>((_, reject) => {
            onAbort = () => reject(signal.reason);
            signal.addEventListener('abort', onAbort, { once: true });
          })]);
        } finally {
          signal.removeEventListener('abort', onAbort);
        }
      } else {
        await held;
      }
    }
    let release!: () => void;
    this.locks.set(key, new Promise<void>((resolve) => { release = resolve; }));
    return () => {
      this.locks.delete(key);
      release();
    };
  }
}

/** How long a withdrawal may take once the caller's signal has aborted. */
const WITHDRAW_MS = 15_000;

/** Stands for a request the gate asked for but never saw: only its tool is known. */
function unknownRequest(tool: string): ApprovalRequest {
  return { id: '', tool } as ApprovalRequest;
}

/** JSON with object keys sorted, so equal arguments give equal keys whatever their order. */
export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return '[' + v.map((x) => canonicalJson(x === undefined ? null : x)).join(',') + ']';
  const keys = Object.keys(v as object).filter((k) => (v as Record<string, unknown>)[k] !== undefined).sort();
  return '{' + keys.map((k) => JSON.stringify(k) + ':' + canonicalJson((v as Record<string, unknown>)[k])).join(',') + '}';
}
