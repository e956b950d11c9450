import OpenAI from 'openai';
import type { ResponseInputItem, ResponseStreamEvent } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { recordedThinking, recordedTool } from '../support/fake-providers/thinking.ts';
import { clientOnTailgate, clientOnThinkingAnthropic, compactingResponse, settledResponse } from './server.ts';

// DELETE /v1/responses/:id gives the deleted response's seqs to the next response: the item ids
// (msg_, fc_, fco_, rs_) of what was deleted name nothing afterwards, on every route that reads
// one, while the ids of the items before it stay as they were.

const echo = clientOnTailgate();
const thinking = clientOnThinkingAnthropic();

async function failure(work: Promise<unknown>): Promise<unknown> {
  return work.then(
    () => 'succeeded',
    (error: unknown) => error,
  );
}

/** Every way an item id is read: retrieve, a list's `after`, an input_items `after`, an item_reference. */
async function expectNamesNothing(client: OpenAI, conversation: string, id: string, responseId: string) {
  const retrieved = await failure(client.conversations.items.retrieve(id, { conversation_id: conversation }));
  expect(retrieved, id).toBeInstanceOf(OpenAI.NotFoundError);
  for (const order of ['asc', 'desc'] as const) {
    const listed = await failure(client.conversations.items.list(conversation, { order, after: id }));
    expect(listed, `${id} ${order}`).toBeInstanceOf(OpenAI.BadRequestError);
    const input = await failure(client.responses.inputItems.list(responseId, { order, after: id }));
    expect(input, `${id} ${order}`).toBeInstanceOf(OpenAI.BadRequestError);
  }
  const referenced = await failure(
    client.responses.create({ model: 'echo', conversation, input: [{ type: 'item_reference', id }] }),
  );
  expect(referenced, id).toBeInstanceOf(OpenAI.NotFoundError);
}

describe("the item ids of a deleted response's items", () => {
  it('name nothing once another response took their seqs; the new items have ids of their own', async () => {
    const { client } = echo;
    const first = await client.responses.create({ model: 'echo', input: 'first question' });
    const conversation = first.conversation!.id;
    const second = await client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: 'second question',
    });
    const deleted = [...(await client.responses.inputItems.list(second.id)).data, ...second.output].map(
      (item) => item.id!,
    );
    expect(deleted).toEqual([`msg_${conversation}_3`, `msg_${conversation}_4`]);
    await client.responses.delete(second.id);
    const third = await client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: 'third question',
    });
    const listed = await client.conversations.items.list(conversation, { order: 'asc' });
    const ids = listed.data.map((item) => item.id);
    // The items before the delete keep their ids; those after it name the generation holding them.
    expect(ids.slice(0, 2)).toEqual([`msg_${conversation}_1`, first.output[0]!.id]);
    expect(ids[2]).toMatch(new RegExp(`^msg_${conversation}_3_g\\d{13}[0-9a-f]{8}$`));
    expect(ids[3]).toBe(third.output[0]!.id);
    expect((await client.responses.inputItems.list(third.id)).data.map((item) => item.id)).toEqual([ids[2]]);
    expect(await client.responses.retrieve(third.id)).toMatchObject({ output: [{ id: ids[3] }] });
    for (const id of deleted) await expectNamesNothing(client, conversation, id, third.id);

    // The new ids are read as any: retrieve, a cursor, a reference.
    const answer = await client.conversations.items.retrieve(ids[3]!, { conversation_id: conversation });
    expect(JSON.stringify(answer)).toMatch(/third question/);
    const after = await client.conversations.items.list(conversation, { order: 'asc', after: ids[2]! });
    expect(after.data.map((item) => item.id)).toEqual([ids[3]]);
    const referenced = await client.responses.create({
      model: 'echo',
      conversation,
      input: [{ type: 'item_reference', id: ids[3]! }],
    });
    expect(referenced.status).toBe('completed');

    // A background response's items, retrieved and replayed, have the ids the conversation lists.
    const queued = await client.responses.create({ model: 'echo', conversation, input: 'later', background: true });
    const ended = await settledResponse(client, queued.id);
    const replayed: ResponseStreamEvent[] = [];
    for await (const event of await client.responses.retrieve(queued.id, { stream: true })) replayed.push(event);
    const done = replayed.flatMap((event) => (event.type === 'response.output_item.done' ? [event.item.id] : []));
    const newest = (await client.conversations.items.list(conversation, { limit: 1 })).data[0]!.id;
    expect(newest).toMatch(/_g\d{13}[0-9a-f]{8}$/);
    expect(ended.output.map((item) => item.id)).toEqual([newest]);
    expect(done).toEqual([newest]);
  });

  it("a deleted response's reasoning and call ids name nothing; the next response's have their own", async () => {
    const { client } = thinking;
    const request = { model: 'claude-wire', tools: [recordedTool], reasoning: { effort: 'medium' as const } };
    const first = await client.responses.create({ ...request, input: 'Weather in Paris?' });
    const conversation = first.conversation!.id;
    const deleted = first.output.map((item) => item.id!);
    expect(deleted).toEqual([`rs_${conversation}_2_1`, `rs_${conversation}_2_2`, `fc_${conversation}_2`]);
    await client.responses.delete(first.id);
    const again = await client.responses.create({ ...request, conversation, input: 'Weather in Paris?' });
    const ids = again.output.map((item) => item.id!);
    expect(ids).toHaveLength(3);
    for (const id of ids) expect(id).toMatch(/_g\d{13}[0-9a-f]{8}(_\d)?$/);
    const listed = await client.conversations.items.list(conversation, { order: 'asc' });
    expect(listed.data.map((item) => item.id)).toEqual([expect.stringMatching(/^msg_/), ...ids]);
    for (const id of deleted) {
      const retrieved = await failure(client.conversations.items.retrieve(id, { conversation_id: conversation }));
      expect(retrieved, id).toBeInstanceOf(OpenAI.NotFoundError);
      const after = await failure(client.conversations.items.list(conversation, { after: id }));
      expect(after, id).toBeInstanceOf(OpenAI.BadRequestError);
    }
    // A reference to the new reasoning and call goes on with them; one to the deleted ones is a 404.
    const output = { type: 'function_call_output' as const, call_id: recordedThinking.callId, output: '18C, sunny' };
    const referencing = (refs: string[]) =>
      client.responses.create({
        ...request,
        store: false,
        input: [
          { role: 'user', content: 'Weather in Paris?' },
          ...refs.map((id): ResponseInputItem => ({ type: 'item_reference', id })),
          output,
        ],
      });
    expect(await failure(referencing(deleted))).toBeInstanceOf(OpenAI.NotFoundError);
    const fresh = await referencing(ids);
    expect(fresh.status).toBe('completed');
  });

  it("a deleted response's compaction id names nothing; the next one at its start seq has its own", async () => {
    const { client } = echo;
    const first = await compactingResponse(client, 'alpha');
    const conversation = first.conversation!.id;
    const compacted = await compactingResponse(client, 'bravo', { after: first.id });
    const deleted = compacted.output.at(-1)!;
    expect(deleted).toMatchObject({ type: 'compaction', id: `cmp_${conversation}_3` });
    await client.responses.delete(compacted.id);
    const again = await compactingResponse(client, 'charlie', { after: first.id });
    const made = again.output.at(-1)!;
    expect(made.type).toBe('compaction');
    expect(made.id).toMatch(new RegExp(`^cmp_${conversation}_3_g\\d{13}[0-9a-f]{8}$`));
    await expectNamesNothing(client, conversation, deleted.id!, again.id);

    // The new id is read as any: retrieve, the list, a cursor, a reference.
    const retrieved = await client.conversations.items.retrieve(made.id!, { conversation_id: conversation });
    expect(retrieved).toMatchObject({ type: 'compaction', id: made.id });
    const listed = await client.conversations.items.list(conversation, { order: 'asc' });
    expect(listed.data.map((item) => item.id)).toContain(made.id);
    const after = await client.conversations.items.list(conversation, { order: 'asc', after: made.id! });
    expect(after.data.length).toBeGreaterThan(0);
    const referenced = await client.responses.create({
      model: 'echo',
      conversation,
      input: [{ type: 'item_reference', id: made.id! }],
    });
    expect(referenced.status).toBe('completed');
  });
});
