// Airlock's TypeScript SDK (docs/sdks.md): a typed client for the REST API
// and a Gate that runs one tool call only with a valid approval, and only
// once, across restarts too (docs/protocol.md).
export { AirlockClient, transient, checkIdempotencyKey } from './client.js';
export type { ClientOptions, RetryOptions, CallOptions, RegisterOptions, WaitOptions } from './client.js';
export {
  AirlockError, NetworkError, MalformedAnswerError, isCode, GateError, DeniedError, ExpiredError, CancelledError, LapsedError,
  AlreadyExecutedError, InterruptedError, ToolError, OutcomeUnknownError,
} from './errors.js';
export type { GateOutcome } from './errors.js';
export { Gate, canonicalJson } from './gate.js';
export type { GateOptions, GateCall, Outcome, Recovered, ToolFn, ToolRun } from './gate.js';
export { describeOutcome } from './outcome.js';
export type { Verdict } from './outcome.js';
export {
  ApprovalKeySet, ApprovalTokenError, ReplayCache, verifyApprovalToken, argsDigest, canonicalize,
  APPROVAL_TOKEN_TYPE, DEFAULT_LEEWAY_MS, MAX_TOKEN_BYTES,
} from './verify.js';
export type { ApprovalTokenClaims, ApprovalTokenReason, VerifyApprovalTokenOptions } from './verify.js';
export * from './types.js';
