import type OpenAI from 'openai';
import type { ResponseInputItem } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { recordedThinking, recordedTool } from '../support/fake-providers/thinking.ts';
import { clientOnThinkingAnthropic, sessionKeys } from './server.ts';

// A conversation's item list and a response's input_items list the model's reasoning as the
// response's output shows it: its reasoning items before the item they came with, under the
// same ids, on every read and every page.

const world = clientOnThinkingAnthropic();
const request = { model: 'claude-wire', tools: [recordedTool], reasoning: { effort: 'medium' as const } };

/** Every id of a list read `limit` at a time, following `after` as the official client's pages do. */
async function pagedIds(list: (after: string | undefined) => Promise<{ data: { id?: string }[]; has_more: boolean }>) {
  const ids: string[] = [];
  for (let after: string | undefined, pages = 0; pages < 50; pages++) {
    const page = await list(after);
    ids.push(...page.data.map((item) => item.id!));
    if (!page.has_more) return ids;
    after = ids.at(-1);
  }
  throw new Error('the list did not end');
}

describe('reasoning items in the item lists', () => {
  it('lists them in the conversation and in input_items, paged at any limit, as the output has them', async () => {
    const { client } = world;
    const first = await client.responses.create({ ...request, input: 'Weather in Paris?' });
    const session = first.conversation!.id;
    const [thought, redactedThought, call] = first.output;
    expect([thought!.id, redactedThought!.id, call!.id]).toEqual([
      `rs_${session}_2_1`,
      `rs_${session}_2_2`,
      `fc_${session}_2`,
    ]);
    // A client's tool loop resending the whole history, reasoning items among it, goes on in the conversation.
    const second = await client.responses.create({
      ...request,
      input: [
        { role: 'user', content: 'Weather in Paris?' },
        ...(first.output as ResponseInputItem[]),
        { type: 'function_call_output', call_id: recordedThinking.callId, output: '18C, sunny' },
      ],
    });
    expect(second.conversation?.id).toBe(session);
    const answer = second.output.at(-1)!;

    const items = await client.conversations.items.list(session, { order: 'asc', limit: 100 });
    const ids = [`msg_${session}_1`, thought!.id, redactedThought!.id, call!.id, `fco_${session}_3`, answer.id!];
    expect(items.data.map((item) => item.id)).toEqual(ids);
    expect(items.data.slice(1, 3)).toEqual([thought, redactedThought]);
    expect(items.has_more).toBe(false);
    for (const limit of [1, 2, 3, 4]) {
      const asc = (after: string | undefined) =>
        client.conversations.items.list(session, { order: 'asc', limit, ...(after ? { after } : {}) });
      const desc = (after: string | undefined) =>
        client.conversations.items.list(session, { order: 'desc', limit, ...(after ? { after } : {}) });
      expect(await pagedIds(asc), `asc, limit ${limit}`).toEqual(ids);
      expect(await pagedIds(desc), `desc, limit ${limit}`).toEqual([...ids].reverse());
    }
    expect(await client.conversations.items.retrieve(redactedThought!.id!, { conversation_id: session })).toEqual(
      redactedThought,
    );
    await expect(
      client.conversations.items.retrieve(`rs_${session}_2_3`, { conversation_id: session }),
    ).rejects.toMatchObject({ status: 404 });

    // The second response's input: the history it resent, its reasoning among it, then the output it stored.
    const input = ids.slice(0, 5);
    const listed = await client.responses.inputItems.list(second.id, { order: 'asc' });
    expect(listed.data.map((item) => item.id)).toEqual(input);
    expect(listed.data.slice(1, 3)).toEqual([thought, redactedThought]);
    for (const limit of [1, 2, 3]) {
      const page = (order: 'asc' | 'desc') => (after: string | undefined) =>
        client.responses.inputItems.list(second.id, { order, limit, ...(after ? { after } : {}) });
      expect(await pagedIds(page('asc')), `asc, limit ${limit}`).toEqual(input);
      expect(await pagedIds(page('desc')), `desc, limit ${limit}`).toEqual([...input].reverse());
    }
  });

  it('lists the reasoning a client adds with an item, as the add answers it', async () => {
    const { client } = world;
    const conversation = await client.conversations.create({ items: [{ role: 'user', content: 'Weather?' }] });
    const reasoning = { type: 'reasoning' as const, summary: [{ type: 'summary_text' as const, text: 'Look it up.' }] };
    // The id a client sends is not kept: a stored item's reasoning is named after the item.
    const added = await client.conversations.items.create(conversation.id, {
      items: [
        { ...reasoning, id: 'rs_client' },
        { type: 'function_call', call_id: 'c1', name: 'get_weather', arguments: '{}' },
      ],
    });
    const expected: OpenAI.Conversations.ConversationItem[] = [
      { ...reasoning, id: `rs_${conversation.id}_2_1`, status: 'completed' },
      expect.objectContaining({ type: 'function_call', id: `fc_${conversation.id}_2` }),
    ];
    expect(added.data).toEqual(expected);
    const listed = await client.conversations.items.list(conversation.id, { order: 'asc' });
    expect(listed.data.slice(1)).toEqual(added.data);
  });

  it('leaves out reasoning before a user message, a function_call_output or a compaction item, or last', async () => {
    const { client } = world;
    // The id a client sends is not kept.
    const thought = (text: string) => ({
      type: 'reasoning' as const,
      id: 'rs_sent',
      summary: [{ type: 'summary_text' as const, text }],
    });
    // A leading system message becomes the instructions: the reasoning before it goes with the item after it.
    const conversation = await client.conversations.create({
      items: [
        thought('kept, past the instructions'),
        { type: 'message', role: 'system', content: 'Be brief.' },
        { type: 'function_call', call_id: 'c1', name: 'get_weather', arguments: '{}' },
        thought('before an output'),
        { type: 'function_call_output', call_id: 'c1', output: '18C' },
        thought('before a user message'),
        { type: 'message', role: 'user', content: 'Thanks' },
        thought('kept'),
        { type: 'message', role: 'assistant', content: 'You are welcome.' },
        thought('last'),
      ],
    });
    const id = conversation.id;
    const listed = await client.conversations.items.list(id, { order: 'asc' });
    expect(listed.data.map((item) => item.id)).toEqual([
      `rs_${id}_1_1`,
      `fc_${id}_1`,
      `fco_${id}_2`,
      `msg_${id}_3`,
      `rs_${id}_4_1`,
      `msg_${id}_4`,
    ]);
    expect(listed.data.filter((item) => item.type === 'reasoning').map((item) => item.summary[0]?.text)).toEqual([
      'kept, past the instructions',
      'kept',
    ]);
    // Before a compaction item, reasoning is left out with the items the compaction replaces.
    const response = await client.responses.create({
      ...request,
      input: [thought('before a compaction'), { type: 'compaction', encrypted_content: 'Earlier: weather.' }],
    });
    const input = await client.responses.inputItems.list(response.id, { order: 'asc' });
    // Its input stored the compaction's summary alone, as a user message, with no reasoning.
    expect(input.data.map((item) => item.type)).toEqual(['message']);
  });

  it("refuses a reasoning item whose id is not a reasoning item's, naming it; nothing is stored", async () => {
    const { client, tailgate } = world;
    const call = { type: 'function_call' as const, call_id: 'c1', name: 'get_weather', arguments: '{}' };
    const summary = [{ type: 'summary_text' as const, text: 'Look it up.' }];
    const input = (id: string | null) =>
      [{ role: 'user', content: 'Weather?' }, { type: 'reasoning', id, summary }, call] as ResponseInputItem[];
    const conversation = await client.conversations.create({});
    const stored = await sessionKeys(tailgate);
    for (const id of ['msg_1', '', 'rs_a:b', 'rs_']) {
      await expect(client.responses.create({ ...request, input: input(id) }), id).rejects.toMatchObject({
        status: 400,
        error: { type: 'invalid_request_error', param: 'input[1].id' },
      });
      await expect(
        client.conversations.items.create(conversation.id, { items: input(id).slice(1) }),
        id,
      ).rejects.toMatchObject({ status: 400, error: { param: 'items[0].id' } });
    }
    expect(await sessionKeys(tailgate)).toEqual(stored);
    // An id of OpenAI's form is taken, as a null one is.
    for (const id of ['rs_68af3d2a9c5c81a0b0e4d6f1c2a3b4c5', null]) {
      await expect(client.responses.create({ ...request, input: input(id) })).resolves.toMatchObject({
        status: 'completed',
      });
    }
  });
});
