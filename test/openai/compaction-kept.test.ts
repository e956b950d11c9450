import OpenAI from 'openai';
import type { ResponseCompactionItem } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { clientOnTailgate, compactedInBackground, long, tailgateGet, tailgatePost } from './server.ts';

// A compaction that keeps the newest items whole (POST /v1/sessions/:id/compact by default, and a
// response's context_management compaction) leaves its conversation listing the compaction item,
// then the items it kept. A client that drops what came before the compaction item, and resends
// the rest with its new items, continues that conversation: the kept items are not stored again.
const world = clientOnTailgate();

/** The conversation's items from its compaction item on, as a client holding its listing resends them. */
async function fromCompaction(sessionId: string): Promise<OpenAI.Responses.ResponseInputItem[]> {
  const listed = await world.client.conversations.items.list(sessionId, { order: 'asc', limit: 100 });
  const at = listed.data.findIndex((item) => item.type === 'compaction');
  expect(at).toBeGreaterThan(0);
  return listed.data.slice(at) as OpenAI.Responses.ResponseInputItem[];
}

/** The texts of a conversation's messages, oldest first, compaction items left out. */
async function texts(sessionId: string): Promise<string[]> {
  const items = await world.client.conversations.items.list(sessionId, { order: 'asc', limit: 100 });
  return items.data.flatMap((item) => (item.type === 'message' ? [(item.content[0] as { text: string }).text] : []));
}

/** The next prompt's items: a summary as such, the others by their text. */
async function nextPrompt(sessionId: string): Promise<string[]> {
  const { items } = await tailgateGet(world.tailgate.baseURL, `/sessions/${sessionId}/prompt?full=true`);
  return items.map((item: { content: string; synthetic?: string }) => item.synthetic ?? item.content);
}

/** A conversation of two responses: `long('alpha')`, then `input` (with `settings` on both). */
async function twoResponses(input: string, settings: Partial<OpenAI.Responses.ResponseCreateParamsNonStreaming> = {}) {
  const first = await world.client.responses.create({ model: 'echo', input: long('alpha'), ...settings });
  const second = await world.client.responses.create({
    model: 'echo',
    previous_response_id: first.id,
    input,
    ...settings,
  });
  return { sessionId: first.conversation!.id, second };
}

/** POST /v1/sessions/:id/compact keeping about 20 tokens: the newest pair stays whole, the first is summarized. */
async function compactKeeping(sessionId: string): Promise<unknown> {
  return (await tailgatePost(world.tailgate.baseURL, `/sessions/${sessionId}/compact`, { keep_tokens: 20 })).json();
}

/**
 * A conversation of two responses, then an item appended after the last one, compacted keeping
 * about `keep_tokens`: its id, and its items from the compaction item on.
 */
async function appendedThenCompacted(keep_tokens: number) {
  const { sessionId } = await twoResponses('short');
  const appended = await tailgatePost(world.tailgate.baseURL, `/sessions/${sessionId}/items`, {
    items: [{ type: 'message', role: 'user', content: long('noted') }],
  });
  expect(appended.status).toBe(201);
  await tailgatePost(world.tailgate.baseURL, `/sessions/${sessionId}/compact`, { keep_tokens });
  return { sessionId, input: await fromCompaction(sessionId) };
}

describe('the official openai client: a compaction item, the items it kept, then new ones', () => {
  it('continue the conversation after a native POST /v1/sessions/:id/compact that kept items', async () => {
    const { sessionId } = await twoResponses('short');
    expect(await compactKeeping(sessionId)).toMatchObject({ compacted: true, context: { start_seq: 3 } });
    const input = await fromCompaction(sessionId);
    expect(input.map((item) => item.type)).toEqual(['compaction', 'message', 'message']);
    expect((input[0] as ResponseCompactionItem).id).toBe(`cmp_${sessionId}_3`);

    input.push({ role: 'user', content: 'go on' });
    const next = await world.client.responses.create({ model: 'echo', input });
    expect(next.conversation!.id).toBe(sessionId);
    expect((next as any).tailgate.resent).toMatchObject({ first_seq: 3, last_seq: 4 });
    // The loop's next step, its output appended, goes on there too; each item is stored once.
    input.push(...(next.output as OpenAI.Responses.ResponseInputItem[]), { role: 'user', content: 'last' });
    const last = await world.client.responses.create({ model: 'echo', input });
    expect(last.conversation!.id).toBe(sessionId);
    const kept = ['short', 'echo: short', 'go on', 'echo: go on', 'last', 'echo: last'];
    expect(await texts(sessionId)).toEqual([long('alpha'), `echo: ${long('alpha')}`, ...kept]);
    expect(await nextPrompt(sessionId)).toEqual(['summary', ...kept]);

    // The conversation has moved on since the compaction: the same resend starts a new one.
    const stale = await world.client.responses.create({ model: 'echo', input: input.slice(0, 4) });
    expect(stale.conversation!.id).not.toBe(sessionId);
  });

  it('continue the conversation after a response that compacted (context_management)', async () => {
    const context_management = [{ type: 'compaction' as const, compact_threshold: 100 }];
    const { sessionId, second } = await twoResponses(long('bravo'), { context_management });
    // The compaction kept the turn's input and output: its item ends the output, and the listing has it before them.
    expect(second.output.at(-1)!.type).toBe('compaction');
    const input = await fromCompaction(sessionId);
    expect((input[0] as ResponseCompactionItem).id).toBe(`cmp_${sessionId}_3`);
    expect(input).toHaveLength(3);

    input.push({ role: 'user', content: 'short' });
    const next = await world.client.responses.create({ model: 'echo', input });
    expect(next.conversation!.id).toBe(sessionId);
    const kept = [long('bravo'), `echo: ${long('bravo')}`, 'short', 'echo: short'];
    expect(await texts(sessionId)).toEqual([long('alpha'), `echo: ${long('alpha')}`, ...kept]);
    expect(await nextPrompt(sessionId)).toEqual(['summary', ...kept]);
  });

  it('continue the conversation after a background response that compacted, as after a foreground one', async () => {
    const kept = [long('bravo'), `echo: ${long('bravo')}`];

    // The compaction item alone, then new items.
    const alone = await compactedInBackground(world.client);
    const next = await world.client.responses.create({
      model: 'echo',
      input: [alone.compaction, { role: 'user', content: 'short' }],
    });
    expect(next.conversation!.id).toBe(alone.sessionId);
    expect(await nextPrompt(alone.sessionId)).toEqual(['summary', ...kept, 'short', 'echo: short']);

    // The compaction item, the items it kept as the listing has them, then new items.
    const withKept = await compactedInBackground(world.client);
    const input = await fromCompaction(withKept.sessionId);
    expect(input).toHaveLength(3);
    input.push({ role: 'user', content: 'short' });
    const after = await world.client.responses.create({ model: 'echo', input });
    expect(after.conversation!.id).toBe(withKept.sessionId);
    expect((after as any).tailgate.resent).toMatchObject({ first_seq: 3, last_seq: 4 });
    expect(await texts(withKept.sessionId)).toEqual([
      long('alpha'),
      `echo: ${long('alpha')}`,
      ...kept,
      'short',
      'echo: short',
    ]);
  });

  it("a budgeted token's background compaction is continued by that token, not by another caller", async () => {
    const minted = await tailgatePost(world.tailgate.baseURL, '/tokens', {
      scopes: ['session:turn', 'session:read'],
      budget: { max_turns: 100 },
    });
    expect(minted.status).toBe(201);
    const { token } = (await minted.json()) as { token: string };
    const budgeted = new OpenAI({ apiKey: token, baseURL: world.tailgate.baseURL, maxRetries: 0 });
    const { sessionId, compaction } = await compactedInBackground(budgeted);
    const input: OpenAI.Responses.ResponseInputItem[] = [compaction, { role: 'user', content: 'go on' }];
    // Another caller's resend of the item starts its own conversation (the index tells callers apart).
    const other = await world.client.responses.create({ model: 'echo', input });
    expect(other.conversation!.id).not.toBe(sessionId);
    const next = await budgeted.responses.create({ model: 'echo', input });
    expect(next.conversation!.id).toBe(sessionId);
  });

  it('kept items ending with an item appended after the last response continue it, none stored again', async () => {
    const { sessionId } = await twoResponses('short');
    const appended = await tailgatePost(world.tailgate.baseURL, `/sessions/${sessionId}/items`, {
      items: [{ type: 'message', role: 'user', content: 'noted' }],
    });
    expect(appended.status).toBe(201);
    await compactKeeping(sessionId);
    const input = await fromCompaction(sessionId);
    expect(input.map((item) => item.type)).toEqual(['compaction', 'message', 'message', 'message']);
    input.push({ role: 'user', content: 'go on' });
    const next = await world.client.responses.create({ model: 'echo', input });
    expect(next.conversation!.id).toBe(sessionId);
    expect((next as any).tailgate.resent).toMatchObject({ first_seq: 3, last_seq: 5 });
    const kept = ['short', 'echo: short', 'noted', 'go on', 'echo: go on'];
    expect(await texts(sessionId)).toEqual([long('alpha'), `echo: ${long('alpha')}`, ...kept]);
    // The kept items edited (the appended one left out): a new conversation, as for any edited history.
    const edited = await world.client.responses.create({
      model: 'echo',
      input: [...input.slice(0, 3), { role: 'user', content: 'go on' }],
    });
    expect(edited.conversation!.id).not.toBe(sessionId);
  });

  it('kept items with no model output continue it too, and the compaction item alone still does', async () => {
    /** A conversation whose compaction kept only the item appended after its last response. */
    const keptAppended = async () => {
      const kept = await appendedThenCompacted(50);
      expect(kept.input.map((item) => item.type)).toEqual(['compaction', 'message']);
      return kept;
    };
    const whole = await keptAppended();
    const next = await world.client.responses.create({
      model: 'echo',
      input: [...whole.input, { role: 'user', content: 'go on' }],
    });
    expect(next.conversation!.id).toBe(whole.sessionId);
    expect((next as any).tailgate.resent).toMatchObject({ first_seq: 5, last_seq: 5 });
    expect((await texts(whole.sessionId)).slice(4)).toEqual([long('noted'), 'go on', 'echo: go on']);

    const alone = await keptAppended();
    const after = await world.client.responses.create({
      model: 'echo',
      input: [alone.input[0]!, { role: 'user', content: 'go on' }],
    });
    expect(after.conversation!.id).toBe(alone.sessionId);
    expect((await texts(alone.sessionId)).slice(4)).toEqual([long('noted'), 'go on', 'echo: go on']);
  });

  it('kept items resent with nothing new start a new conversation, a model output among them or none', async () => {
    // Kept with the response before it, and alone: neither resend adds an item, and none is stored twice.
    for (const [keep, types] of [
      [70, ['compaction', 'message', 'message', 'message']],
      [50, ['compaction', 'message']],
    ] as const) {
      const { sessionId, input } = await appendedThenCompacted(keep);
      expect(input.map((item) => item.type)).toEqual(types);
      const before = await texts(sessionId);
      const resent = await world.client.responses.create({ model: 'echo', input });
      expect(resent.conversation!.id, `keep_tokens ${keep}`).not.toBe(sessionId);
      expect(await texts(sessionId)).toEqual(before);
    }
  });

  it('the kept items as the client sent and got them, a tool call among them, continue it too', async () => {
    const tools = [{ type: 'function' as const, name: 'lookup', strict: false, parameters: { type: 'object' } }];
    const { sessionId, second } = await twoResponses('call lookup {}', { tools });
    const call = second.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call.type).toBe('function_call');
    await compactKeeping(sessionId);
    const [compaction] = await fromCompaction(sessionId);
    expect((compaction as ResponseCompactionItem).id).toBe(`cmp_${sessionId}_3`);
    // The client's own items: its input as it sent it, the call as the response gave it, then the call's output.
    const next = await world.client.responses.create({
      model: 'echo',
      tools,
      input: [
        compaction!,
        { role: 'user', content: 'call lookup {}' },
        call,
        { type: 'function_call_output', call_id: call.call_id, output: 'found' },
      ],
    });
    expect(next.conversation!.id).toBe(sessionId);
    const listed = await world.client.conversations.items.list(sessionId, { order: 'asc', limit: 100 });
    expect(listed.data.map((item) => item.type)).toEqual([
      'message',
      'message',
      'compaction',
      'message',
      'function_call',
      'function_call_output',
      'message',
    ]);
  });

  it('a compaction item then new items alone still continue a compaction that kept items', async () => {
    const { sessionId } = await twoResponses('short');
    await compactKeeping(sessionId);
    const [compaction] = await fromCompaction(sessionId);
    const next = await world.client.responses.create({
      model: 'echo',
      input: [compaction!, { role: 'user', content: 'go on' }],
    });
    expect(next.conversation!.id).toBe(sessionId);
    expect(await nextPrompt(sessionId)).toEqual(['summary', 'short', 'echo: short', 'go on', 'echo: go on']);
  });

  it('kept items with an image as the client sent it (stored as a blob reference) continue it too', async () => {
    // A first message long enough for the compaction to summarize it and keep the image's pair whole.
    const first = await world.client.responses.create({
      model: 'echo',
      input: Array(20).fill(long('alpha')).join(' '),
    });
    const sessionId = first.conversation!.id;
    const look: OpenAI.Responses.ResponseInputItem = {
      role: 'user',
      content: [
        { type: 'input_text', text: 'look' },
        { type: 'input_image', image_url: dataUrl('image/png', pngBytes(8, 8)), detail: 'auto' },
      ],
    };
    const second = await world.client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: [look],
    });
    const compacted = await tailgatePost(world.tailgate.baseURL, `/sessions/${sessionId}/compact`, {
      keep_tokens: 300,
    });
    expect(await compacted.json()).toMatchObject({ compacted: true, context: { start_seq: 3 } });
    const [compaction] = await fromCompaction(sessionId);
    const next = await world.client.responses.create({
      model: 'echo',
      input: [
        compaction!,
        look,
        ...(second.output as OpenAI.Responses.ResponseInputItem[]),
        { role: 'user', content: 'go on' },
      ],
    });
    expect(next.conversation!.id).toBe(sessionId);
    expect((next as any).tailgate.resent).toMatchObject({ first_seq: 3, last_seq: 4 });
  });

  it('a compaction item no stored conversation has (compacted input alone) reads no compaction entry', async () => {
    const compacted = await world.client.responses.compact({ model: 'echo', input: long('alpha') });
    const compaction = compacted.output[0] as ResponseCompactionItem;
    expect(compaction.type).toBe('compaction');
    const { store } = world.tailgate;
    const get = store.get;
    let reads = 0;
    store.get = (key, options) => {
      if (key.startsWith('openai/history/')) reads += 1;
      return get.call(store, key, options);
    };
    try {
      const resent: OpenAI.Responses.ResponseInputItem[] = [
        { role: 'user', content: 'short' },
        { role: 'assistant', content: 'echo: short' },
      ];
      // Nothing sent after it but new items: no entry read; with a history, its loop's entry alone.
      for (const [input, expected] of [
        [[compaction, { role: 'user', content: 'go on' }], 0],
        [[compaction, ...resent, { role: 'user', content: 'go on' }], 1],
      ] as const) {
        reads = 0;
        await world.client.responses.create({ model: 'echo', input: [...input] });
        expect(reads).toBe(expected);
      }
    } finally {
      store.get = get;
    }
  });
});
