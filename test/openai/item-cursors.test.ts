import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { clientOnTailgate } from './server.ts';

// An `after` cursor of the item lists (a conversation's items, a response's input_items) names
// an entry of the list, or the list is a 400 naming `after`, in either order: an id of another
// kind at an item's seq, or one past the last item, is no cursor.

const world = clientOnTailgate();

/** The error a list answers, or its page's ids. */
async function listed(list: Promise<{ data: { id?: string }[] }>): Promise<unknown> {
  return list.then(
    (page) => page.data.map((item) => item.id),
    (error: unknown) => error,
  );
}

describe('an after cursor naming no listed item', () => {
  it('is a 400 naming after in both orders, for conversation items and input_items', async () => {
    const conversation = await world.client.conversations.create({
      items: [
        { type: 'message', role: 'user', content: 'Weather?' },
        { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{}' },
        { type: 'function_call_output', call_id: 'call_1', output: '18C' },
      ],
    });
    const id = conversation.id;
    const response = await world.client.responses.create({ model: 'echo', conversation: id, input: 'Thanks' });
    // The conversation holds msg 1, fc 2, fco 3, msg 4 (the input), msg 5 (the answer).
    const cursors = [`msg_${id}_2`, `fco_${id}_4`, `msg_${id}_6`, `msg_${id}_99`, `rs_${id}_2_1`];
    for (const order of ['asc', 'desc'] as const) {
      for (const after of cursors) {
        const error = await listed(world.client.conversations.items.list(id, { order, after }));
        expect(error, `${order}, after ${after}`).toBeInstanceOf(OpenAI.BadRequestError);
        expect(error).toMatchObject({ param: 'after', message: expect.stringMatching(/^400 after: /) });
      }
      // A cursor naming an item pages on after it.
      expect(
        await listed(world.client.conversations.items.list(id, { order, after: `fco_${id}_3`, limit: 1 })),
      ).toEqual([order === 'asc' ? `msg_${id}_4` : `fc_${id}_2`]);
    }

    // The response's input is msg 4; the conversation's other items are no input of it.
    for (const order of ['asc', 'desc'] as const) {
      for (const after of [`fco_${id}_4`, `msg_${id}_3`, `msg_${id}_5`, `msg_${id}_99`]) {
        const error = await listed(world.client.responses.inputItems.list(response.id, { order, after }));
        expect(error, `${order}, after ${after}`).toBeInstanceOf(OpenAI.BadRequestError);
        expect(error).toMatchObject({ param: 'after', message: expect.stringMatching(/^400 after: /) });
      }
      expect(
        await listed(world.client.responses.inputItems.list(response.id, { order, after: `msg_${id}_4` })),
      ).toEqual([]);
    }
  });
});

describe('an after cursor naming a compaction', () => {
  it('pages after a compaction the list holds or held; one the conversation never made is a 400', async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'call me Ishmael' });
    const id = first.conversation!.id;
    const compact = async (previous_response_id: string) =>
      (await world.client.responses.compact({ model: null, previous_response_id })).output[0]!.id;
    // The conversation holds msg 1, msg 2, then its compaction cmp 3 (before the items to come).
    expect(await compact(first.id)).toBe(`cmp_${id}_3`);
    const second = await world.client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: 'go on',
    });
    expect(await listed(world.client.conversations.items.list(id, { order: 'asc', after: `cmp_${id}_3` }))).toEqual([
      `msg_${id}_3`,
      `msg_${id}_4`,
    ]);
    // A compaction landing while a client pages: the cursor naming the one before it still pages.
    expect(await compact(second.id)).toBe(`cmp_${id}_5`);
    for (const order of ['asc', 'desc'] as const) {
      expect(await listed(world.client.conversations.items.list(id, { order, after: `cmp_${id}_3` }))).toEqual(
        order === 'asc' ? [`msg_${id}_3`, `msg_${id}_4`, `cmp_${id}_5`] : [`msg_${id}_2`, `msg_${id}_1`],
      );
      // No compaction starts at 2, 4 or 99 (msg 99 is no item either): 400s naming after.
      for (const after of [`cmp_${id}_2`, `cmp_${id}_4`, `cmp_${id}_99`, `cmp_${id}_0`]) {
        const error = await listed(world.client.conversations.items.list(id, { order, after }));
        expect(error, `${order}, after ${after}`).toBeInstanceOf(OpenAI.BadRequestError);
        expect(error).toMatchObject({ param: 'after' });
      }
    }
  });
});
