import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { fixture } from '../support/fake-providers/fake-provider-server.ts';
import { specProblems, streamingEventSchema } from '../support/open-responses-spec.ts';
import { MESSAGE_EVENTS, clientOnFakeOpenAI } from './server.ts';

// A model whose stream breaks off after its first words ("Hello"): the response fails once
// its answer has begun, so its stream has opened a message that never finishes.
const firstWords = `${fixture('openai-chat-text.sse').split('\n\n').slice(0, 2).join('\n\n')}\n\n`;
const world = clientOnFakeOpenAI(() => ({ sse: firstWords }));

/** The events the official client's stream helper gives, and what it throws (if anything). */
async function streamed(body: { store?: boolean; background?: boolean }) {
  const stream = world.client.responses.stream({ model: 'gpt-4o-mini', input: 'hi', ...body });
  const events: ResponseStreamEvent[] = [];
  const thrown = await (async () => {
    for await (const event of stream) events.push(event);
  })().catch((error: unknown) => error);
  return { events, thrown };
}

describe('a streamed response whose model call fails after its first deltas', () => {
  it.each([
    ['stored', {}],
    ['store: false', { store: false }],
    ['background', { background: true }],
  ])('closes the message it opened (incomplete) before response.failed (%s)', async (_, body) => {
    const { events, thrown } = await streamed(body);
    expect(thrown).toBeUndefined();
    expect(events.map((event) => event.type).filter((type) => type !== 'response.output_text.delta')).toEqual([
      'response.created',
      'response.in_progress',
      ...MESSAGE_EVENTS,
      'response.failed',
    ]);
    for (const event of events) expect(specProblems(streamingEventSchema, event)).toEqual([]);
    expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, index) => index));
    const added = events.find((event) => event.type === 'response.output_item.added')!;
    const done = events.find((event) => event.type === 'response.output_item.done')!;
    expect(done).toMatchObject({
      output_index: 0,
      item: { id: added.item.id, type: 'message', status: 'incomplete', content: [{ text: 'Hello' }] },
    });
    expect(events.at(-1)).toMatchObject({ type: 'response.failed', response: { status: 'failed', output: [] } });
  });
});
