import { GateError, ToolError, type GateOutcome } from './errors.js';

/**
 * What an adapter tells the agent when a gated call did not run, or ran and
 * failed: the outcome by name (a denial is not an expiry, and neither is a
 * cancellation), the reviewer's note for a denial, and a sentence the model
 * can act on.
 */
export interface Verdict {
  outcome: GateOutcome;
  /** Whether the tool ran (only for tool_failed, and for an interrupted run that had started). */
  ran: boolean;
  requestId: string;
  /** The reviewer's note, when there is one. */
  note?: string;
  message: string;
}

/**
 * Turns one of the Gate's outcome errors into a Verdict; undefined for any
 * other error (Airlock unreachable, say), which adapters rethrow: nothing
 * fails open.
 */
export function describeOutcome(err: unknown): Verdict | undefined {
  if (!(err instanceof GateError)) return undefined;
  const r = err.request;
  const note = r.decision?.note || undefined;
  const tool = r.tool ?? 'the call';
  const base = { outcome: err.outcome, requestId: r.id, ...(note ? { note } : {}) };
  switch (err.outcome) {
    case 'denied':
      return { ...base, ran: false, message: `A reviewer denied ${tool}; it did not run.${note ? ` Reviewer's note: ${note}` : ''}` };
    case 'expired':
      return { ...base, ran: false, message: `Nobody decided on ${tool} before its deadline; it did not run.` };
    case 'cancelled':
      return { ...base, ran: false, message: `The approval request for ${tool} was withdrawn; it did not run.` };
    case 'lapsed':
      return { ...base, ran: false, message: `${tool} was approved, but the approval lapsed before it could start; it did not run. Ask again if it is still needed.` };
    case 'already_executed':
      return { ...base, ran: false, message: `This approval of ${tool} was already used; it is not run again.` };
    case 'interrupted':
      return { ...base, ran: (err as { started?: boolean }).started === true, message: `An earlier run of ${tool} was interrupted; whether it took effect is unknown, and it is not run again.` };
    case 'tool_failed': {
      const cause = (err as ToolError).cause;
      return { ...base, ran: true, message: `${tool} ran and failed: ${cause instanceof Error ? cause.message : String(cause)}` };
    }
  }
}
