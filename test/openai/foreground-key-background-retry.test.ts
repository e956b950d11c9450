import type OpenAI from 'openai';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { clientOnTailgate } from './server.ts';

// A foreground response's Idempotency-Key sent again with `background: true` (the key keeps one
// input, whatever `background` and `stream` say: docs/OPENAI.md, "Retries"): the retry replays
// the response, streamed as a streamed retry of it without `background` is, never a stream
// that opens with the completed response and has no output events.
const world = clientOnTailgate();

async function streamed(client: OpenAI, body: Record<string, unknown>, key: string) {
  const events: ResponseStreamEvent[] = [];
  const stream = await client.responses.create({ model: 'echo', input: 'hello', stream: true, ...body } as never, {
    headers: { 'Idempotency-Key': key },
  });
  for await (const event of stream as unknown as AsyncIterable<ResponseStreamEvent>) events.push(event);
  return events;
}

describe("a foreground response's key sent again with background and stream", () => {
  it.each([false, true])('replays the events a streamed retry replays (first streamed: %s)', async (first) => {
    const key = `fg-key-${first}`;
    const created = first
      ? (await streamed(world.client, {}, key)).at(-1)
      : await world.client.responses.create({ model: 'echo', input: 'hello' }, { headers: { 'Idempotency-Key': key } });
    const id = created && 'response' in created ? created.response.id : (created as { id: string }).id;
    const plain = await streamed(world.client, {}, key);
    const background = await streamed(world.client, { background: true }, key);
    const shape = (events: ResponseStreamEvent[]) =>
      events.map((event) => ('response' in event ? `${event.type} ${event.response.status}` : event.type));
    expect(shape(background)).toEqual(shape(plain));
    expect(shape(background)[0]).toBe('response.created in_progress');
    expect(shape(background)).toContain('response.output_text.delta');
    const last = background.at(-1)!;
    expect(last.type).toBe('response.completed');
    if (last.type !== 'response.completed') return;
    expect(last.response.id).toBe(id);
    expect(last.response.output_text).toBe('echo: hello');
    // Not streamed, it answers the response as it is.
    const again = await world.client.responses.create(
      { model: 'echo', input: 'hello', background: true },
      { headers: { 'Idempotency-Key': key } },
    );
    expect(again).toMatchObject({ id, status: 'completed', output_text: 'echo: hello' });
  });
});
