// Type-checked (never run) by `npm test`'s pretest: each adapter's use
// compiles against the package's shipped types through its exports map, as
// a user's code would. The README's and docs' snippets are type-checked and
// run by test/snippets.test.mjs.
import { AirlockClient, Gate, DeniedError, describeOutcome, type ApprovalRequest } from '@airlockhq/sdk';
import { airlockTool as aiTool } from '@airlockhq/sdk/ai';
import { airlockNode, resumeWhenDecided } from '@airlockhq/sdk/langgraph';
import { airlockTool as agentsTool, approveWithAirlock } from '@airlockhq/sdk/openai-agents';
import { tool } from 'ai';
import { Agent, run } from '@openai/agents';
import { Annotation, MemorySaver, StateGraph, START, END } from '@langchain/langgraph';
import { z } from 'zod';

declare function refund(order: string, cents: number): Promise<string>;

export async function coreTypes(): Promise<void> {
  const client = AirlockClient.fromEnv();
  const { id } = await client.instanceNamed('billing-agent');
  const gate = new Gate({ client, instanceId: id, journalDir: '.airlock-journal' });
  try {
    const out = await gate.run({ tool: 'refund', arguments: { order: 'A-17', cents: 500 } }, () => refund('A-17', 500));
    const value: string = out.value;
    console.log('refunded:', value);
  } catch (e) {
    if (e instanceof DeniedError) console.log('denied:', e.note); else throw e;
  }
  const r: ApprovalRequest = await client.getRequest('apr_x');
  console.log(r.decision?.expires_at, describeOutcome(new Error('x'))?.outcome);
}

export function adapters(gate: Gate, client: AirlockClient): void {
  const send = aiTool(gate, 'send_email', tool({
    description: 'Send an email',
    inputSchema: z.object({ to: z.string() }),
    execute: async ({ to }) => ({ sent: to }),
  }));
  void send;

  const State = Annotation.Root({ amount: Annotation<number>(), result: Annotation<string>() });
  const graph = new StateGraph(State)
    .addNode('refund', airlockNode<typeof State.State, Partial<typeof State.State>>({
      gate,
      call: (s) => ({ tool: 'refund', arguments: { amount: s.amount } }),
      run: async (s) => ({ result: `refunded ${s.amount}` }),
      refused: (v) => ({ result: v.message }),
    }))
    .addEdge(START, 'refund').addEdge('refund', END)
    .compile({ checkpointer: new MemorySaver() });
  void resumeWhenDecided(graph, { configurable: { thread_id: 't' } }, client);

  const transfer = agentsTool(gate, {
    name: 'transfer', description: 'Move money', parameters: z.object({ cents: z.number() }),
    execute: async ({ cents }) => `moved ${cents.toFixed(0)}`,
  });
  const agent = new Agent({ name: 'treasurer', instructions: 'move money', tools: [transfer] });
  void (async () => {
    const result = await run(agent, 'pay');
    await approveWithAirlock(result, gate);
  })();
}
