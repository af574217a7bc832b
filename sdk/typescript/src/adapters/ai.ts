// The Vercel AI SDK adapter (`@airlockhq/sdk/ai`): a tool whose execute
// waits for a person's approval in Airlock, and runs through the Gate, so
// it runs at most once and only with a valid approval (docs/sdks.md).
import type { Tool, ToolExecutionOptions } from 'ai';
import { GateError, ToolError } from '../errors.js';
import type { Gate } from '../gate.js';
import { describeOutcome, type Verdict } from '../outcome.js';
import type { ApprovalRequest, JsonObject } from '../types.js';

export interface AirlockToolOptions<INPUT> {
  /** The decision window asked (default: the gate's). */
  timeout?: string;
  /** The agent's claimed reasoning to show the reviewer, from the input. */
  reasoning?: (input: INPUT) => string | undefined;
  /** What the adapter observed, shown apart from the arguments. */
  context?: JsonObject;
  /** Called while the request waits for a decision. */
  onPending?: (r: ApprovalRequest) => void;
}

/**
 * What the model gets as the tool's output when the call did not run:
 * the outcome by name, the reviewer's note for a denial, and a sentence to
 * act on. A tool that ran and threw throws as usual instead.
 */
export interface AirlockToolRefusal {
  airlock: Verdict;
}

/**
 * Wraps one AI SDK tool so its execute asks Airlock first. `name` is the
 * tool's key in the tools object (the AI SDK does not pass it to execute);
 * it is what the reviewer sees, with the model's input as the arguments.
 * The tool call's ID is the gate's attempt key, so a retried step finds its
 * earlier request instead of asking again.
 */
export function airlockTool<INPUT, OUTPUT>(
  gate: Gate,
  name: string,
  def: Tool<INPUT, OUTPUT>,
  opts: AirlockToolOptions<INPUT> = {},
): Tool<INPUT, OUTPUT | AirlockToolRefusal> {
  const execute = def.execute;
  if (typeof execute !== 'function') {
    throw new TypeError(`airlock: tool ${name} has no execute function; only tools that run on this side can be gated`);
  }
  return {
    ...def,
    execute: async (input: INPUT, options: ToolExecutionOptions): Promise<OUTPUT | AirlockToolRefusal> => {
      try {
        const out = await gate.run({
          tool: name, arguments: input as JsonObject, attemptKey: options.toolCallId, timeout: opts.timeout,
          agentReasoning: opts.reasoning?.(input), context: opts.context, onPending: opts.onPending,
        }, async (signal) => {
          const result = execute(input, { ...options, abortSignal: signal });
          if (result && typeof (result as AsyncIterable<OUTPUT>)[Symbol.asyncIterator] === 'function') {
            let last: OUTPUT | undefined;
            for await (const part of result as AsyncIterable<OUTPUT>) last = part;
            return last as OUTPUT;
          }
          return await (result as OUTPUT | PromiseLike<OUTPUT>);
        }, { signal: options.abortSignal });
        return out.value;
      } catch (err) {
        if (err instanceof ToolError) throw err.cause; // the tool's own error, as the AI SDK reports any
        if (err instanceof GateError) return { airlock: describeOutcome(err)! };
        throw err; // Airlock unreachable: not approved, and the step fails
      }
    },
  } as Tool<INPUT, OUTPUT | AirlockToolRefusal>;
}

/** Wraps every tool of a tool set (those with an execute) with airlockTool. */
export function airlockTools<T extends Record<string, Tool>>(gate: Gate, tools: T, opts: AirlockToolOptions<unknown> = {}): T {
  const out: Record<string, Tool> = {};
  for (const [name, t] of Object.entries(tools)) {
    out[name] = typeof t.execute === 'function' ? airlockTool(gate, name, t, opts) : t;
  }
  return out as T;
}
