import OpenAI from 'openai';
import type { ResponseCompactionItem } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { clientOnTailgate } from './server.ts';

/**
 * `item_reference` input items beyond `responses.create`: in `responses.compact` and in the items
 * of `conversations.create` and `conversations.items.create`, a reference stands for the stored
 * item it names, and one that names no stored item is a 404 naming its place.
 */
const world = clientOnTailgate();
const refused = (promise: Promise<unknown>) => promise.catch((error: unknown) => error);

describe('item_reference in responses.compact and conversation items', () => {
  it('compacts an input holding a reference as the input holding the item', async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'remember the blue door' });
    const compacted = await world.client.responses.compact({
      model: 'echo',
      input: [
        { role: 'user', content: 'remember the blue door' },
        { type: 'item_reference', id: first.output[0]!.id! },
      ],
    });
    const item = compacted.output.find((entry) => entry.type === 'compaction') as ResponseCompactionItem;
    // The echo summary is the transcript of what it summarized: the referenced answer is in it.
    expect(item.encrypted_content).toContain('echo: remember the blue door');
    const unknown = first.output[0]!.id!.replace(/_\d+$/, '_99');
    const missing = await refused(
      world.client.responses.compact({ model: 'echo', input: [{ type: 'item_reference', id: unknown }] }),
    );
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect(missing).toMatchObject({ param: 'input[0].id' });
  });

  it('adds a referenced item to a conversation as the item itself', async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'the green key' });
    const reference = { type: 'item_reference' as const, id: first.output[0]!.id! };
    const created = await world.client.conversations.create({
      items: [{ type: 'message', role: 'user', content: 'the green key' }, reference],
    });
    const added = await world.client.conversations.items.create(created.id, { items: [reference] });
    expect(added.data).toMatchObject([{ type: 'message', role: 'assistant' }]);
    const listed = await world.client.conversations.items.list(created.id, { order: 'asc' });
    expect(listed.data.map((item) => JSON.stringify((item as { content: unknown }).content))).toEqual([
      expect.stringContaining('the green key'),
      expect.stringContaining('echo: the green key'),
      expect.stringContaining('echo: the green key'),
    ]);
    const unknown = first.output[0]!.id!.replace(/_\d+$/, '_99');
    const missing = await refused(
      world.client.conversations.items.create(created.id, {
        items: [
          { type: 'message', role: 'user', content: 'x' },
          { type: 'item_reference', id: unknown },
        ],
      }),
    );
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect(missing).toMatchObject({ param: 'items[1].id' });
  });
});
