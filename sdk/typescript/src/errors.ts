import type { ApprovalRequest, Code, ExecutionStatus, State } from './types.js';

/**
 * An answer of the server that is not a success: an RFC 9457 problem with
 * its stable `code`. Switch on `code`; for 409 conflicts `state` names the
 * state that holds (the one that won the race); `field` names the input at
 * fault for `invalid_request`.
 */
export class AirlockError extends Error {
  override name = 'AirlockError';
  /** The stable code, or undefined when the answer was not a problem (a proxy's page, say). */
  readonly code: Code | undefined;
  readonly status: number;
  readonly state: State | undefined;
  readonly field: string | undefined;
  /** The problem's detail: what went wrong and what to do. */
  readonly detail: string;
  readonly method: string;
  readonly path: string;
  /** From a 429's or 503's Retry-After, in milliseconds. */
  readonly retryAfterMs: number | undefined;
  /** For invalid_token: why the approval token was refused (`signature`, `expired`, `arguments`, …; docs/tokens.md). */
  readonly reason: string | undefined;
  /** For already_used: when the approval token's request was consumed. */
  readonly consumedAt: string | undefined;

  constructor(init: {
    code?: Code; status: number; state?: State; field?: string; detail: string;
    method: string; path: string; retryAfterMs?: number; reason?: string; consumedAt?: string;
  }) {
    super(`${init.method} ${init.path}: ${init.detail} (${init.code ?? 'no problem code'}, HTTP ${init.status})`);
    this.code = init.code;
    this.status = init.status;
    this.state = init.state;
    this.field = init.field;
    this.detail = init.detail;
    this.method = init.method;
    this.path = init.path;
    this.retryAfterMs = init.retryAfterMs;
    this.reason = init.reason;
    this.consumedAt = init.consumedAt;
  }
}

/** A call that got no answer: the connection failed, broke or timed out. The server may have acted on it. */
export class NetworkError extends Error {
  override name = 'NetworkError';
  constructor(readonly method: string, readonly path: string, override readonly cause: unknown) {
    super(`${method} ${path}: no answer from the Airlock server: ${describe(cause)}`);
  }
}

/**
 * A success status whose body is not what the call expects: empty, not JSON
 * (a proxy's HTML page), cut short, or another resource than the one asked
 * about (another request's id, a claim that does not show the execution
 * claimed). An adapter believes only what it can check, so it acts on such
 * an answer as on no answer: nothing is run or approved on it.
 */
export class MalformedAnswerError extends Error {
  override name = 'MalformedAnswerError';
  constructor(readonly method: string, readonly path: string, readonly status: number, readonly reason: string) {
    super(`${method} ${path}: the server's ${status} answer cannot be trusted: ${reason}`);
  }
}

/** Reports whether err is an answer of the server with one of codes. */
export function isCode(err: unknown, ...codes: Code[]): boolean {
  return err instanceof AirlockError && err.code !== undefined && codes.includes(err.code);
}

function describe(e: unknown): string {
  if (e instanceof Error) {
    const cause = (e as { cause?: unknown }).cause;
    return cause instanceof Error ? `${e.message}: ${cause.message}` : e.message;
  }
  return String(e);
}

// The Gate's outcomes for a call that did not run (or ran and failed). Each
// is its own class with its own `outcome`, so callers tell the agent what
// happened: a denial is not an expiry, and neither is a cancellation.

export type GateOutcome =
  | 'denied'
  | 'expired'
  | 'cancelled'
  | 'lapsed'
  | 'already_executed'
  | 'interrupted'
  | 'tool_failed';

/** The base of the Gate's outcome errors. */
export abstract class GateError extends Error {
  abstract readonly outcome: GateOutcome;
  constructor(message: string, readonly request: ApprovalRequest) {
    super(message);
  }
}

/** A reviewer denied the call; `note` says why. Pass it on to the agent. */
export class DeniedError extends GateError {
  override name = 'DeniedError';
  readonly outcome = 'denied' as const;
  constructor(request: ApprovalRequest) {
    const note = request.decision?.note;
    const rep = request.decision?.replaced_by;
    const what = rep
      ? `airlock: ${request.tool} was approved with changed arguments as request ${rep}; this call (request ${request.id}) did not run, and the gate runs edited calls only with acceptEdits`
      : `airlock: ${request.tool} was denied (request ${request.id})`;
    super(`${what}${note ? `: reviewer's note: ${note}` : ''}`, request);
  }
  /** The reviewer's note, or "". */
  get note(): string {
    return this.request.decision?.note ?? '';
  }
  /** The request a reviewer approved in this one's place with changed arguments (an edit), or "". */
  get replacedBy(): string {
    return this.request.decision?.replaced_by ?? '';
  }
}

/** Nobody decided before the deadline; the call did not run. Ask again with a new attempt key if still needed. */
export class ExpiredError extends GateError {
  override name = 'ExpiredError';
  readonly outcome = 'expired' as const;
  constructor(request: ApprovalRequest) {
    super(`airlock: nobody decided on ${request.tool} in time (request ${request.id}, deadline ${request.deadline_at}); it did not run`, request);
  }
}

/**
 * The request was withdrawn, so the call did not run: the caller's signal
 * aborted while the gate asked or waited (`abandoned`; the gate then
 * cancelled the request itself), or someone else cancelled it or deleted
 * the instance. When the signal aborted while asking and the gate could not
 * find the request to withdraw it, `request.id` is "" and `cancelError`
 * says why: the request, if it was made, expires at its deadline.
 */
export class CancelledError extends GateError {
  override name = 'CancelledError';
  readonly outcome = 'cancelled' as const;
  constructor(request: ApprovalRequest, readonly abandoned = false, readonly cancelError?: unknown) {
    super(abandoned && !request.id
      ? `airlock: gave up asking for approval of ${request.tool}; withdrawing failed (${describe(cancelError)}): if the request was made, it will expire`
      : abandoned
      ? `airlock: gave up waiting for a decision on ${request.tool} (request ${request.id}); the request was withdrawn` +
        (cancelError ? ` (withdrawing failed: ${describe(cancelError)}; it will expire)` : '')
      : `airlock: the request for ${request.tool} was cancelled (request ${request.id}); it did not run`, request);
  }
}

/**
 * The call was approved, but permission to start it (`expires_at`) ended
 * before it could start; it did not run. A new attempt needs a new request.
 */
export class LapsedError extends GateError {
  override name = 'LapsedError';
  readonly outcome = 'lapsed' as const;
  /** True when the gate had claimed the execution and reported it failed. */
  constructor(request: ApprovalRequest, readonly claimed = false) {
    super(`airlock: the approval of ${request.tool} (request ${request.id}) expired at ${request.decision?.expires_at} before the call could start; it did not run`, request);
  }
}

/** This approval's one execution was already claimed, by this gate earlier (`here`) or elsewhere. Not run again. */
export class AlreadyExecutedError extends GateError {
  override name = 'AlreadyExecutedError';
  readonly outcome = 'already_executed' as const;
  constructor(request: ApprovalRequest, readonly status: ExecutionStatus, readonly here = false) {
    super(`airlock: the approval of ${request.tool} (request ${request.id}) was already used ${here ? 'by this gate' : 'elsewhere'} (execution ${status}); it is not run again`, request);
  }
}

/**
 * An earlier run of this call was cut short (the process died while it ran,
 * or before the gate learned whether its claim succeeded). Whether it took
 * effect is unknown; the gate reported `unknown` and never runs it again.
 */
export class InterruptedError extends GateError {
  override name = 'InterruptedError';
  readonly outcome = 'interrupted' as const;
  /** True when the journal shows the call had started. */
  constructor(request: ApprovalRequest, readonly started: boolean) {
    super(started
      ? `airlock: an earlier run of ${request.tool} (request ${request.id}) was interrupted; its outcome is unknown and it is not run again`
      : `airlock: the claim of ${request.tool} (request ${request.id}) was interrupted before the call started here; reported unknown, not run again`, request);
  }
}

/** The call ran and threw; `status` is what was reported (failed, or unknown for an OutcomeUnknownError). */
export class ToolError extends GateError {
  override name = 'ToolError';
  readonly outcome = 'tool_failed' as const;
  constructor(request: ApprovalRequest, readonly status: 'failed' | 'unknown', override readonly cause: unknown) {
    super(`airlock: the approved call ran and failed (request ${request.id}): ${describe(cause)}`, request);
  }
}

/**
 * Throw (or wrap) this from a tool when whether the call took effect is
 * unknown (a connection lost mid-call): the gate reports `unknown` instead
 * of `failed`.
 */
export class OutcomeUnknownError extends Error {
  override name = 'OutcomeUnknownError';
}
