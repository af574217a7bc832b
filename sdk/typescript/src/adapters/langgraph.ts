// The LangGraph.js adapter (`@airlockhq/sdk/langgraph`): a graph node that
// asks Airlock for approval of one action, pauses the graph with
// interrupt() while a person decides (the graph's checkpointer keeps it;
// no process needs to wait), and, resumed, runs the action through the Gate
// at most once (docs/sdks.md). resumeWhenDecided waits for the decision and
// resumes the graph with a Command.
import { Command, interrupt } from '@langchain/langgraph';
import { GateError, ToolError } from '../errors.js';
import type { AirlockClient, CallOptions } from '../client.js';
import type { Gate, GateCall } from '../gate.js';
import { describeOutcome, type Verdict } from '../outcome.js';

/** The value a paused airlockNode interrupts with. */
export interface AirlockInterrupt {
  airlock: { requestId: string; tool: string; deadlineAt: string };
}

/** The value resumeWhenDecided resumes with: what was decided. It informs only; the gate reads the server before running anything. */
export interface AirlockResume {
  airlock: { requestId: string; state: string; note?: string };
}

export interface AirlockNodeOptions<S, U> {
  gate: Gate;
  /** The call to approve, from the state: tool, arguments, reasoning. */
  call: (state: S) => GateCall;
  /** Runs the approved action and returns the state update. Runs at most once. */
  run: (state: S, signal: AbortSignal) => Promise<U> | U;
  /** The state update when the action did not run (denied with its note, expired, cancelled, lapsed…). */
  refused: (verdict: Verdict, state: S) => Promise<U> | U;
  /**
   * 'interrupt' (default) pauses the graph while the request is pending
   * (needs a checkpointer); 'wait' holds the node until it is decided.
   */
  mode?: 'interrupt' | 'wait';
}

/**
 * A node function for StateGraph.addNode. Re-executed after a resume, it
 * finds its request again (the idempotency key is journaled), so a person's
 * decision is never asked twice nor an approval used twice.
 */
export function airlockNode<S, U>(opts: AirlockNodeOptions<S, U>): (state: S) => Promise<U> {
  return async (state: S): Promise<U> => {
    const call = opts.call(state);
    if ((opts.mode ?? 'interrupt') === 'interrupt') {
      const r = await opts.gate.ask(call);
      if (r.state === 'pending') {
        const value: AirlockInterrupt = { airlock: { requestId: r.id, tool: call.tool, deadlineAt: r.deadline_at } };
        interrupt(value); // pauses here; returns once resumed, and the gate reads the decision itself
      }
    }
    try {
      const out = await opts.gate.run(call, (signal) => opts.run(state, signal));
      return out.value;
    } catch (err) {
      if (err instanceof ToolError) throw err.cause;
      if (err instanceof GateError) return opts.refused(describeOutcome(err)!, state);
      throw err; // Airlock unreachable: not approved; the node fails and can be retried
    }
  };
}

/** The Airlock requests a paused graph waits on, from its state snapshot. */
export function pendingApprovals(snapshot: { tasks: ReadonlyArray<{ interrupts: ReadonlyArray<{ value?: unknown }> }> }): string[] {
  const ids: string[] = [];
  for (const t of snapshot.tasks) {
    for (const i of t.interrupts) {
      const v = i.value as Partial<AirlockInterrupt> | undefined;
      if (v?.airlock?.requestId) ids.push(v.airlock.requestId);
    }
  }
  return ids;
}

/**
 * Waits until the request a graph paused on is decided, then resumes the
 * graph with a Command. Returns undefined when the graph is not paused on
 * Airlock. `graph` is a compiled graph with a checkpointer; `config` names
 * the thread.
 */
export async function resumeWhenDecided<G extends {
  getState(config: any): Promise<{ tasks: ReadonlyArray<{ interrupts: ReadonlyArray<{ value?: unknown }> }> }>;
  invoke(input: any, config?: any): Promise<any>;
}>(graph: G, config: any, client: AirlockClient, o: CallOptions = {}): Promise<Awaited<ReturnType<G['invoke']>> | undefined> {
  const ids = pendingApprovals(await graph.getState(config));
  if (ids.length === 0) return undefined;
  const id = ids[0]!;
  const r = await client.waitRequest(id, { signal: o.signal });
  const resume: AirlockResume = { airlock: { requestId: id, state: r.state, ...(r.decision?.note ? { note: r.decision.note } : {}) } };
  return graph.invoke(new Command({ resume }), config);
}
