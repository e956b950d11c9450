import { Agent, OpenAIConversationsSession, run, setDefaultOpenAIClient, tool } from '@openai/agents';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentsTracingOff } from './agents-tracing.ts';
import { clientOnTailgate, tailgateGet } from './server.ts';

// @openai/agents' OpenAIConversationsSession stores a run's items with one conversations.items.create
// at the run's end: a run of ten tool calls adds more than 20 items at once, as does a conversation
// started with a longer history. The Conversations routes take as many items as a response's input.
const world = clientOnTailgate();
agentsTracingOff();

function history(count: number) {
  return Array.from({ length: count }, (_, index) => ({
    type: 'message' as const,
    role: index % 2 === 0 ? ('user' as const) : ('assistant' as const),
    content: `message ${index + 1}`,
  }));
}

describe('Conversations items past 20 at once', () => {
  it('creates a conversation with 30 items and appends 25 more in one request', async () => {
    const conversation = await world.client.conversations.create({ items: history(30) });
    const added = await world.client.conversations.items.create(conversation.id, { items: history(25) });
    expect(added.data).toHaveLength(25);
    const session = await tailgateGet(world.tailgate.baseURL, `/sessions/${conversation.id}`);
    expect(session.counts).toMatchObject({ items: 55, turns: 0 });
  });

  it('keeps an @openai/agents OpenAIConversationsSession run whose items pass 20, and its next run', async () => {
    setDefaultOpenAIClient(world.client);
    const lookup = tool({
      name: 'lookup',
      description: 'Look a word up',
      parameters: z.object({ word: z.string() }),
      execute: async ({ word }) => `${word}: found`,
    });
    const agent = new Agent({ name: 'memory', instructions: 'Be brief.', model: 'echo', tools: [lookup] });
    const session = new OpenAIConversationsSession({ client: world.client });
    const notes = Array.from({ length: 22 }, (_, index) => ({ role: 'user' as const, content: `note ${index + 1}` }));
    const input = [...notes, { role: 'user' as const, content: 'call lookup {"word":"x"}' }];
    const first = await run(agent, input, { session });
    expect(first.finalOutput).toBe('echo: call lookup {"word":"x"}');
    const second = await run(agent, 'and now?', { session });
    expect(second.finalOutput).toBe('echo: and now?');
    const id = await session.getSessionId();
    const stored = await tailgateGet(world.tailgate.baseURL, `/sessions/${id}/items?limit=100`);
    // 23 user messages, the call, its output and the answer; then the next run's message and answer.
    expect(stored.items).toHaveLength(28);
    expect(stored.items[0]).toMatchObject({ role: 'assistant', content: 'echo: and now?' });
  });
});
