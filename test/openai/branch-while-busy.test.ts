import { describe, expect, it } from 'vitest';
import { fixture } from '../support/fake-providers/fake-provider-server.ts';
import { clientOnFakeOpenAI } from './server.ts';

// A request naming an older response of a conversation whose newer turn still runs (a background
// response the model holds until its gate opens) branches as it would once that turn ended, when a
// turn ended after the response it names: the branch is a fork at that response, which a running
// turn does not hold up (docs/OPENAI.md). Naming the response right before the running turn is
// still 409 `turn_in_progress`: whether it branches depends on how that turn ends.
let open: () => void = () => {};
let gate: Promise<void> = Promise.resolve();
// Only the call of the turn whose input is `three` waits for the gate.
const world = clientOnFakeOpenAI((request) => {
  const held = JSON.stringify(request.body.messages?.at(-1) ?? null).includes('three') ? { gate } : {};
  return request.body.stream
    ? { sse: fixture('openai-chat-text.sse'), ...held }
    : { json: JSON.parse(fixture('openai-chat-text.json')), ...held };
});

function hold(): () => void {
  gate = new Promise<void>((resolve) => (open = resolve));
  return () => {
    open();
    gate = Promise.resolve();
  };
}

describe('branching off a conversation whose turn runs', () => {
  it('branches off a response a turn ended after; refuses one right before the running turn', async () => {
    const client = world.client.withOptions({ maxRetries: 0 });
    const first = await client.responses.create({ model: 'gpt-4o-mini', input: 'one' });
    const second = await client.responses.create({
      model: 'gpt-4o-mini',
      input: 'two',
      previous_response_id: first.id,
    });
    const release = hold();
    try {
      const running = await client.responses.create({
        model: 'gpt-4o-mini',
        input: 'three',
        previous_response_id: second.id,
        background: true,
      });
      expect(running.status).toBe('queued');
      const branch = await client.responses.create({
        model: 'gpt-4o-mini',
        input: 'another two',
        previous_response_id: first.id,
      });
      expect(branch.status).toBe('completed');
      expect(branch.conversation?.id).not.toBe(first.conversation?.id);
      const items = await client.conversations.items.list(branch.conversation?.id ?? '', { order: 'asc' });
      const texts = items.data.map((item) => (item.type === 'message' ? item.content[0] : null));
      expect(texts.map((part) => (part && 'text' in part ? part.text : null)).slice(0, 3)).toEqual([
        'one',
        first.output_text,
        'another two',
      ]);
      const refused = await client.responses
        .create({ model: 'gpt-4o-mini', input: 'again', previous_response_id: second.id })
        .then(
          () => null,
          (error: { status?: number; code?: string }) => error,
        );
      expect(refused).toMatchObject({ status: 409, code: 'turn_in_progress' });
    } finally {
      release();
    }
  });
});
