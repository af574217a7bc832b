// The OpenAI Agents SDK adapter (`@airlockhq/sdk/openai-agents`): function
// tools whose human approval comes from Airlock. An airlockTool needs
// approval, so a run stops with an interruption; approveWithAirlock asks
// Airlock for each, waits for the reviewer, and approves or rejects the
// interruption (a rejection carries the reviewer's note to the model). The
// tool's execute runs through the Gate, so an approved call runs at most
// once and only while its approval is valid (docs/sdks.md).
import { tool } from '@openai/agents';
import type { FunctionTool, RunState, RunToolApprovalItem, ToolInputParameters, ToolOptions, UnknownContext } from '@openai/agents';
import type { CallOptions } from '../client.js';
import { GateError, ToolError } from '../errors.js';
import type { Gate, GateCall } from '../gate.js';
import { describeOutcome } from '../outcome.js';

export interface AirlockToolExtras {
  /** The decision window asked (default: the gate's). */
  timeout?: string;
}

type Details = { toolCall?: { callId: string; arguments: string }; signal?: AbortSignal };

/**
 * Defines a function tool (the options are the Agents SDK's tool() options)
 * whose calls need a person's approval in Airlock. needsApproval is always
 * true; the tool's execute runs only through the Gate, and when it does not
 * run the model is told why (denied with the note, expired, lapsed…).
 */
export function airlockTool<TParameters extends ToolInputParameters = undefined, Context = UnknownContext, Result = string>(
  gate: Gate,
  options: ToolOptions<TParameters, Context>,
  extras: AirlockToolExtras = {},
): FunctionTool<Context, TParameters, Result | string> {
  const opts = options as ToolOptions<TParameters, Context> & { name: string; execute: (input: unknown, context?: unknown, details?: Details) => unknown };
  const execute = opts.execute;
  const wrapped = async (input: unknown, context?: unknown, details?: Details) => {
    try {
      const out = await gate.run(gateCall(opts.name, details?.toolCall?.arguments ?? JSON.stringify(input ?? {}), details?.toolCall?.callId, extras),
        async (signal) => execute(input, context, { ...details, signal }), { signal: details?.signal });
      return out.value;
    } catch (err) {
      if (err instanceof ToolError) throw err.cause; // the tool's own error, as the Agents SDK handles any
      if (err instanceof GateError) return describeOutcome(err)!.message; // did not run: the model is told why
      throw err; // Airlock unreachable: not approved
    }
  };
  const gated = tool({ ...opts, execute: wrapped, needsApproval: true } as unknown as Parameters<typeof tool>[0]);
  airlockTools.add(gated as object);
  return gated as unknown as FunctionTool<Context, TParameters, Result | string>;
}

const airlockTools = new WeakSet<object>();

function gateCall(name: string | undefined, args: string, callId: string | undefined, extras: AirlockToolExtras): GateCall {
  if (!name) throw new TypeError('airlock: an airlockTool needs a name');
  return { tool: name, arguments: args || '{}', attemptKey: callId, timeout: extras.timeout };
}

/** How approveWithAirlock settled one interruption. */
export interface AirlockApproval {
  requestId: string;
  tool: string;
  approved: boolean;
  /** The rejection text sent to the model (the outcome and the reviewer's note). */
  message?: string;
}

/**
 * Settles a run's interruptions for airlockTools by asking Airlock: each is
 * approved when a reviewer approves it, and rejected (with the reviewer's
 * note, or why: expired, cancelled) otherwise. Interruptions of other tools
 * are left alone. Then run the agent again with result.state.
 */
export async function approveWithAirlock(
  result: { interruptions?: RunToolApprovalItem[]; state: RunState<any, any> },
  gate: Gate,
  opts: CallOptions & { timeout?: string; onPending?: (requestId: string) => void } = {},
): Promise<AirlockApproval[]> {
  const settled: AirlockApproval[] = [];
  for (const item of result.interruptions ?? []) {
    const t = (item.agent?.tools ?? []).find((x: { name?: string }) => x.name === item.name);
    if (!t || !airlockTools.has(t as object)) continue;
    const raw = item.rawItem as { callId?: string; arguments?: string };
    const call = gateCall(item.name, item.arguments ?? raw.arguments ?? '{}', raw.callId, { timeout: opts.timeout });
    let r = await gate.ask(call, opts);
    if (r.state === 'pending') {
      opts.onPending?.(r.id);
      r = await gate.client.waitRequest(r.id, { signal: opts.signal });
    }
    if (r.state === 'approved') {
      result.state.approve(item);
      settled.push({ requestId: r.id, tool: call.tool, approved: true });
      continue;
    }
    const note = r.decision?.note;
    const message = r.state === 'denied'
      ? `A reviewer denied ${call.tool}; it did not run.${note ? ` Reviewer's note: ${note}` : ''}`
      : r.state === 'expired'
        ? `Nobody decided on ${call.tool} before its deadline; it did not run.`
        : `The approval request for ${call.tool} was withdrawn; it did not run.`;
    result.state.reject(item, { message });
    settled.push({ requestId: r.id, tool: call.tool, approved: false, message });
  }
  return settled;
}
