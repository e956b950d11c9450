import { describe, expect, it } from 'vitest';
import { fixture } from '../support/fake-providers/fake-provider-server.ts';
import { clientOnFakeOpenAI } from './server.ts';

// An OpenAI model on a loopback fake provider that streams its answer over about 2.4 s (its
// 7 events 400 ms apart), so a response ends in a later second than it began.
const world = clientOnFakeOpenAI(() => ({ sse: fixture('openai-chat-text.sse'), gapMs: 400 }));

describe("a response's created_at is when its request came", () => {
  it.each([true, false])(
    'one created_at from response.created to response.completed and retrieve (store %s)',
    async (store) => {
      const asked = Math.floor(Date.now() / 1000);
      const stream = world.client.responses.stream({ model: 'gpt-4o-mini', input: 'slow answer', store });
      const events: any[] = [];
      /** The second in which response.created came: the request had come by then. */
      let createdSeen = 0;
      for await (const event of stream) {
        events.push(event);
        if (event.type === 'response.created') createdSeen = Math.floor(Date.now() / 1000);
      }
      const created = events.find((event) => event.type === 'response.created').response;
      const completed = events.find((event) => event.type === 'response.completed').response;
      // The stream ended in a later second than the request came in.
      expect(Math.floor(Date.now() / 1000)).toBeGreaterThan(created.created_at);
      expect(created.created_at).toBeGreaterThanOrEqual(asked);
      expect(created.created_at).toBeLessThanOrEqual(createdSeen);
      expect(completed.created_at).toBe(created.created_at);
      if (store) expect((await world.client.responses.retrieve(completed.id)).created_at).toBe(created.created_at);
    },
  );
});
