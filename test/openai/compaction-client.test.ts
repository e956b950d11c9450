import OpenAI from 'openai';
import type { ResponseCompactionItem } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { SUMMARY_HEADER } from '../../lib/compaction/summary-transcript.ts';
import { fixture, startFakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import {
  clientOnTailgate,
  MESSAGE_EVENTS,
  sessionKeys,
  startTailgate,
  tailgateGet as getJson,
  tailgatePost,
  TOKEN,
} from './server.ts';

// Compaction through the official `openai` client against the real app (echo model: its
// summary is "echo: " + the transcript of the summarized items, so it is readable and exact).
const world = clientOnTailgate({ MODEL_ALIASES: 'gpt-4.1-mini=echo' });

function tailgateGet(path: string): Promise<any> {
  return getJson(world.tailgate.baseURL, path);
}

/** The prompt the session's next turn would send (its first items). */
async function nextPrompt(sessionId: string): Promise<{ role: string; content: string; synthetic?: string }[]> {
  return (await tailgateGet(`/sessions/${sessionId}/prompt?full=true`)).items;
}

function compactionOf(output: readonly { type: string }[]): ResponseCompactionItem | undefined {
  return output.find((item): item is ResponseCompactionItem => item.type === 'compaction');
}

/** The texts of a conversation's messages, oldest first, compaction items left out. */
async function loopTexts(sessionId: string): Promise<string[]> {
  const items = await world.client.conversations.items.list(sessionId, { order: 'asc', limit: 100 });
  return items.data.flatMap((item) => (item.type === 'message' ? [(item.content[0] as { text: string }).text] : []));
}

/** What an input item, or a listed one, says: a message's role and text, a compaction item's id and summary. */
function shapeOf(item: any): string[] {
  if (item.type === 'compaction') return ['compaction', item.id, item.encrypted_content];
  return [item.role, typeof item.content === 'string' ? item.content : item.content[0].text];
}

/** The input items of a response, oldest first, shaped by shapeOf. */
async function inputItemsOf(responseId: string): Promise<string[][]> {
  const items: OpenAI.Responses.ResponseItem[] = [];
  for await (const item of world.client.responses.inputItems.list(responseId, { order: 'asc', limit: 3 }))
    items.push(item);
  return items.map(shapeOf);
}

// 30 words of about 5 characters: about 40 tokens a message with the chars/4 approximation.
const long = (word: string) => Array.from({ length: 30 }, () => word).join(' ');
const threshold = [{ type: 'compaction', compact_threshold: 100 }];
/** What the loops below store: each item once. */
const LOOP_TEXTS = [
  long('alpha'),
  `echo: ${long('alpha')}`,
  long('bravo'),
  `echo: ${long('bravo')}`,
  'short',
  'echo: short',
  'last',
  'echo: last',
];

describe('the official openai client: context_management compaction', () => {
  it(
    'compacts once the prompt reaches compact_threshold: ' + 'a readable compaction item, then prompts open with it',
    async () => {
      const first = await world.client.responses.create({
        model: 'echo',
        input: long('alpha'),
        context_management: threshold,
      });
      // 1 message of ~48 tokens: under the threshold.
      expect(compactionOf(first.output)).toBeUndefined();
      const sessionId = first.conversation!.id;

      const second = await world.client.responses.create({
        model: 'gpt-4.1-mini',
        previous_response_id: first.id,
        input: long('bravo'),
        context_management: threshold,
      });
      expect(second.output_text).toBe(`echo: ${long('bravo')}`);
      const compaction = compactionOf(second.output)!;
      expect(compaction).toMatchObject({ type: 'compaction', id: `cmp_${sessionId}_3`, created_by: 'tailgate' });
      // Readable: the echo summary of turn 1's input and answer, cut by the model at the summary's
      // max_output_tokens, 15% of the threshold (32 tokens at least, 4 characters each).
      expect(compaction.encrypted_content).toMatch(/^echo: #1 user: alpha alpha /);
      expect(compaction.encrypted_content.length).toBeLessThanOrEqual(32 * 4);
      expect(second.output.at(-1)).toEqual(compaction);
      expect((second as any).tailgate.context).toMatchObject({
        compaction: { start_seq: 3, summarized: { first_seq: 1, last_seq: 2 } },
        context_start_seq: 3,
      });

      // The next turn starts from the summary, then the kept items (turn 2's input and answer).
      const prompt = await nextPrompt(sessionId);
      expect(prompt[0]).toMatchObject({
        role: 'user',
        synthetic: 'summary',
        content: SUMMARY_HEADER + compaction.encrypted_content,
      });
      expect(prompt.slice(1).map((item) => item.content)).toEqual([long('bravo'), `echo: ${long('bravo')}`]);

      // The history keeps everything; a turn without context_management does not compact again.
      const third = await world.client.responses.create({
        model: 'echo',
        previous_response_id: second.id,
        input: 'short',
      });
      expect(compactionOf(third.output)).toBeUndefined();
      expect(third.output_text).toBe('echo: short');
      expect((await nextPrompt(sessionId)).map((item) => item.synthetic ?? item.content)).toEqual([
        'summary',
        long('bravo'),
        `echo: ${long('bravo')}`,
        'short',
        'echo: short',
      ]);
      // The conversation's items hold the compaction item before the first item it kept, and page through it.
      const ids = (items: { id?: string }[]) => items.map((item) => item.id!.replace(`${sessionId}_`, ''));
      const expected = ['msg_1', 'msg_2', 'cmp_3', 'msg_3', 'msg_4', 'msg_5', 'msg_6'];
      expect(ids((await world.client.conversations.items.list(sessionId, { order: 'asc' })).data)).toEqual(expected);
      for (const limit of [1, 2, 3]) {
        const ascending: { id?: string }[] = [];
        for await (const item of world.client.conversations.items.list(sessionId, { order: 'asc', limit }))
          ascending.push(item);
        expect(ids(ascending), `limit ${limit}`).toEqual(expected);
        const descending: { id?: string }[] = [];
        for await (const item of world.client.conversations.items.list(sessionId, { limit })) descending.push(item);
        expect(ids(descending), `limit ${limit}`).toEqual([...expected].reverse());
      }
      expect(await world.client.conversations.items.retrieve(compaction.id, { conversation_id: sessionId })).toEqual(
        compaction,
      );
      const stale = await world.client.conversations.items
        .retrieve(`cmp_${sessionId}_2`, { conversation_id: sessionId })
        .catch((error: unknown) => error);
      expect(stale).toBeInstanceOf(OpenAI.NotFoundError);
    },
  );

  it('streams the compaction item as an output item before response.completed', async () => {
    const first = await world.client.responses.create({ model: 'echo', input: long('delta') });
    const stream = await world.client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: long('gamma'),
      context_management: threshold,
      stream: true,
    });
    const events: any[] = [];
    for await (const event of stream) events.push(event);
    expect(events.map((event) => event.type).filter((type) => type !== 'response.output_text.delta')).toEqual([
      'response.created',
      'response.in_progress',
      ...MESSAGE_EVENTS,
      'response.output_item.added',
      'response.output_item.done',
      'response.completed',
    ]);
    const done = events.filter((event) => event.type === 'response.output_item.done').at(-1);
    expect(done).toMatchObject({ output_index: 1, item: { type: 'compaction' } });
    expect(done.item.encrypted_content).toMatch(/^echo: #1 user: delta/);
    expect(events.at(-1).response.output[1]).toEqual(done.item);
  });

  it(
    'without compact_threshold compacts at the window trigger of the model ' + '(none for echo: no compaction)',
    async () => {
      const first = await world.client.responses.create({ model: 'echo', input: long('alpha') });
      const second = await world.client.responses.create({
        model: 'echo',
        previous_response_id: first.id,
        input: long('bravo'),
        context_management: [{ type: 'compaction' }],
      });
      expect(compactionOf(second.output)).toBeUndefined();
      expect((second as any).tailgate.context.prompt_tokens).toBeGreaterThan(100);
    },
  );

  it(
    'responses.compact compacts a stored conversation on demand; ' + 'the conversation goes on from the summary',
    async () => {
      const first = await world.client.responses.create({ model: 'echo', input: 'call me Ishmael' });
      const sessionId = first.conversation!.id;
      const compacted = await world.client.responses.compact({
        model: 'gpt-4.1-mini',
        previous_response_id: first.id,
        input: [{ role: 'user', content: 'remember the whale' }],
      });
      expect(compacted.object).toBe('response.compaction');
      // The summary call's usage (echo counts what it read and wrote).
      expect(compacted.usage.input_tokens).toBeGreaterThan(0);
      expect(compacted.usage.total_tokens).toBe(compacted.usage.input_tokens + compacted.usage.output_tokens);
      expect(compacted.id).toMatch(/^resp_[0-9a-f]{24}$/);
      expect(compacted.output).toEqual([
        {
          type: 'compaction',
          id: `cmp_${sessionId}_4`,
          created_by: 'tailgate',
          encrypted_content:
            'echo: #1 user: call me Ishmael\n#2 assistant: echo: call me Ishmael\n#3 user: remember the whale',
        },
      ]);
      // Everything was summarized: the compaction item comes last in the item list.
      const listed: { id?: string }[] = [];
      for await (const item of world.client.conversations.items.list(sessionId, { limit: 1 })) listed.push(item);
      expect(listed.map((item) => item.id)).toEqual(
        [4, 3, 2, 1].map((n) => `${n === 4 ? 'cmp' : 'msg'}_${sessionId}_${n}`),
      );
      const prompt = await nextPrompt(sessionId);
      expect(prompt).toEqual([
        expect.objectContaining({ synthetic: 'summary', content: expect.stringContaining('whale') }),
      ]);

      // The compaction is no turn: the response it named is still the newest.
      const next = await world.client.responses.create({
        model: 'echo',
        previous_response_id: first.id,
        input: 'go on',
      });
      expect(next.output_text).toBe('echo: go on');
      expect((await nextPrompt(sessionId)).map((item) => item.synthetic ?? item.content)).toEqual([
        'summary',
        'go on',
        'echo: go on',
      ]);

      // Compacting again with nothing new answers the current compaction.
      const again = await world.client.responses.compact({ model: null, previous_response_id: next.id });
      expect(compactionOf(again.output)!.encrypted_content).toMatch(/^echo: Earlier summary: echo: #1 user: call me/);
    },
  );

  it(
    'responses.compact on inline input stores nothing, ' + 'and its output continues a store: false conversation',
    async () => {
      const keys = () => sessionKeys(world.tailgate);
      const before = await keys();
      const compacted = await world.client.responses.compact({
        model: 'echo',
        input: [
          { role: 'user', content: 'the code word is heron' },
          { role: 'assistant', content: 'noted' },
        ],
      });
      const item = compactionOf(compacted.output)!;
      expect(item.id).toMatch(/^cmp_[0-9a-f]{24}$/);
      expect(item.encrypted_content).toBe('echo: #1 user: the code word is heron\n#2 assistant: noted');
      expect(await keys()).toEqual(before);

      // Sent back as input, everything before the compaction item is replaced by its summary.
      const next = await world.client.responses.create({
        model: 'echo',
        store: false,
        input: [
          { role: 'user', content: 'dropped' },
          ...compacted.output,
          { role: 'user', content: 'what was it?' },
        ] as never,
      });
      expect(next.output_text).toBe('echo: what was it?');
      expect((next as any).tailgate.context.items_in_prompt).toBe(2);
    },
  );

  it('a loop resending its history, each output appended (compaction item too), is one conversation', async () => {
    const cm = [{ type: 'compaction' as const, compact_threshold: 100 }];
    const input: OpenAI.Responses.ResponseInputItem[] = [{ role: 'user', content: long('alpha') }];
    const first = await world.client.responses.create({ model: 'echo', input, context_management: cm });
    input.push(...(first.output as OpenAI.Responses.ResponseInputItem[]), { role: 'user', content: long('bravo') });
    const second = await world.client.responses.create({ model: 'echo', input, context_management: cm });
    expect(second.conversation!.id).toBe(first.conversation!.id);
    expect(second.output.at(-1)!.type).toBe('compaction');
    input.push(...(second.output as OpenAI.Responses.ResponseInputItem[]), { role: 'user', content: 'short' });
    const third = await world.client.responses.create({ model: 'echo', input, context_management: cm });
    expect(third.conversation!.id).toBe(first.conversation!.id);
    input.push(...(third.output as OpenAI.Responses.ResponseInputItem[]), { role: 'user', content: 'last' });
    const fourth = await world.client.responses.create({ model: 'echo', input, context_management: cm });
    expect(fourth.conversation!.id).toBe(first.conversation!.id);
    // Each item once: the compaction item sent back is the conversation's own, not a new message.
    expect(await loopTexts(first.conversation!.id)).toEqual(LOOP_TEXTS);
    // The last step's input_items are its input as sent, the compaction items where it had them.
    expect(await inputItemsOf(fourth.id)).toEqual(input.map(shapeOf));
  });

  it('a loop that drops everything before the compaction item goes on in its conversation', async () => {
    const cm = [{ type: 'compaction' as const, compact_threshold: 100 }];
    const first = await world.client.responses.create({ model: 'echo', input: long('alpha'), context_management: cm });
    const sessionId = first.conversation!.id;
    const second = await world.client.responses.create({
      model: 'echo',
      input: [
        { role: 'user', content: long('alpha') },
        ...(first.output as OpenAI.Responses.ResponseInputItem[]),
        { role: 'user', content: long('bravo') },
      ],
      context_management: cm,
    });
    const compaction = compactionOf(second.output)!;
    expect(compaction.id).toBe(`cmp_${sessionId}_3`);
    // OpenAI's advice: keep the compaction item, drop what came before it.
    const input: OpenAI.Responses.ResponseInputItem[] = [compaction, { role: 'user', content: 'short' }];
    const third = await world.client.responses.create({ model: 'echo', input, context_management: cm });
    expect(third.conversation!.id).toBe(sessionId);
    // It compacted again: the next step holds both compaction items, the second after the items it follows.
    expect(third.output.at(-1)!.type).toBe('compaction');
    input.push(...(third.output as OpenAI.Responses.ResponseInputItem[]), { role: 'user', content: 'last' });
    const fourth = await world.client.responses.create({ model: 'echo', input, context_management: cm });
    expect(fourth.conversation!.id).toBe(sessionId);
    // Each item once; the prompt is the conversation's: the summary, the items it kept, then the loop's.
    expect(await loopTexts(sessionId)).toEqual(LOOP_TEXTS);
    expect(await inputItemsOf(fourth.id)).toEqual(input.map(shapeOf));
    expect((await nextPrompt(sessionId)).map((item) => item.synthetic ?? item.content)).toEqual([
      'summary',
      'short',
      'echo: short',
      'last',
      'echo: last',
    ]);

    // The conversation has moved past the compaction: sent again with another step, it starts a new one.
    const stale = await world.client.responses.create({
      model: 'echo',
      input: [compaction, { role: 'user', content: 'again' }],
    });
    expect(stale.conversation!.id).not.toBe(sessionId);
    expect((await nextPrompt(stale.conversation!.id)).map((item) => item.content)).toEqual([
      SUMMARY_HEADER + compaction.encrypted_content,
      'again',
      'echo: again',
    ]);
  });

  it('after responses.compact, its item (or a reference to it) then new input continue the conversation', async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'call me Ishmael' });
    const sessionId = first.conversation!.id;
    const compacted = await world.client.responses.compact({ model: 'echo', previous_response_id: first.id });
    const compaction = compactionOf(compacted.output)!;
    // An edited summary is the client's own: a new conversation starts from it.
    const edited = await world.client.responses.create({
      model: 'echo',
      input: [
        { ...compaction, encrypted_content: 'something else' },
        { role: 'user', content: 'go on' },
      ],
    });
    expect(edited.conversation!.id).not.toBe(sessionId);

    const next = await world.client.responses.create({
      model: 'echo',
      input: [...compacted.output, { role: 'user', content: 'go on' }] as OpenAI.Responses.ResponseInputItem[],
    });
    expect(next.conversation!.id).toBe(sessionId);
    const after = await world.client.responses.create({
      model: 'echo',
      input: [
        { type: 'item_reference', id: compaction.id },
        { role: 'user', content: 'go on' },
        ...(next.output as OpenAI.Responses.ResponseInputItem[]),
        { role: 'user', content: 'and then' },
      ],
    });
    expect(after.conversation!.id).toBe(sessionId);
    expect((await nextPrompt(sessionId)).map((item) => item.synthetic ?? item.content)).toEqual([
      'summary',
      'go on',
      'echo: go on',
      'and then',
      'echo: and then',
    ]);

    // A reference alone, right after a compaction, continues it as well.
    const again = await world.client.responses.compact({ model: 'echo', previous_response_id: after.id });
    const referenced = await world.client.responses.create({
      model: 'echo',
      input: [
        { type: 'item_reference', id: compactionOf(again.output)!.id },
        { role: 'user', content: 'still here?' },
      ],
    });
    expect(referenced.conversation!.id).toBe(sessionId);
  });

  it('after a native POST /v1/sessions/:id/compact, its item (or a reference) continues the conversation', async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'call me Ishmael' });
    const sessionId = first.conversation!.id;
    const compacted = await tailgatePost(world.tailgate.baseURL, `/sessions/${sessionId}/compact`, { keep_tokens: 0 });
    expect(await compacted.json()).toMatchObject({ compacted: true });
    const listed = await world.client.conversations.items.list(sessionId, { order: 'asc' });
    const compaction = compactionOf(listed.data)!;
    expect(compaction.id).toBe(`cmp_${sessionId}_3`);
    // The compaction is indexed as a response's: the item, then new input, go on in its conversation.
    const next = await world.client.responses.create({
      model: 'echo',
      input: [compaction, { role: 'user', content: 'go on' }] as OpenAI.Responses.ResponseInputItem[],
    });
    expect(next.conversation!.id).toBe(sessionId);
    const again = await tailgatePost(world.tailgate.baseURL, `/sessions/${sessionId}/compact`, { keep_tokens: 0 });
    const { context } = (await again.json()) as { context: { start_seq: number } };
    const referenced = await world.client.responses.create({
      model: 'echo',
      input: [
        { type: 'item_reference', id: `cmp_${sessionId}_${context.start_seq}` },
        { role: 'user', content: 'still here?' },
      ],
    });
    expect(referenced.conversation!.id).toBe(sessionId);
    expect((await nextPrompt(sessionId)).map((item) => item.synthetic ?? item.content)).toEqual([
      'summary',
      'still here?',
      'echo: still here?',
    ]);
  });

  it('a reference to a compaction a later one superseded stands for its summary as it was', async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'call me Ishmael' });
    const sessionId = first.conversation!.id;
    const older = compactionOf(
      (await world.client.responses.compact({ model: 'echo', previous_response_id: first.id })).output,
    )!;
    // A response deleted after it: the conversation goes on in a new generation, forked from the one that compacted.
    const dropped = await world.client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: 'oops',
    });
    await world.client.responses.delete(dropped.id);
    const next = await world.client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'go on' });
    const newer = compactionOf(
      (await world.client.responses.compact({ model: 'echo', previous_response_id: next.id })).output,
    )!;
    expect(newer.id).not.toBe(older.id);
    expect(newer.encrypted_content).toContain(older.encrypted_content);

    // Sent with nothing before it: a new conversation from that summary (its own has moved on since).
    const answer = await world.client.responses.create({
      model: 'echo',
      input: [
        { type: 'item_reference', id: older.id },
        { role: 'user', content: 'what was my name?' },
      ],
    });
    expect(answer.conversation!.id).not.toBe(sessionId);
    expect((await nextPrompt(answer.conversation!.id)).map((item) => item.content)).toEqual([
      SUMMARY_HEADER + older.encrypted_content,
      'what was my name?',
      'echo: what was my name?',
    ]);
    // A start seq at which no compaction began still names none.
    // (The newer one, made after the delete, names that generation after its start seq.)
    expect(newer.id).toMatch(/_g\d{13}[0-9a-f]{8}$/);
    const startOf = (id: string) => Number(/_(\d+)(?:_g\d{13}[0-9a-f]{8})?$/.exec(id)![1]);
    const between = `cmp_${sessionId}_${startOf(older.id) + 1}`;
    expect(startOf(between)).toBeLessThan(startOf(newer.id));
    const missing = await world.client.responses
      .create({
        model: 'echo',
        input: [
          { type: 'item_reference', id: between },
          { role: 'user', content: 'hi' },
        ],
      })
      .catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect(missing).toMatchObject({ param: 'input[0].id' });
  });

  it('refuses a bad context_management or compact request with a typed 400 naming the field', async () => {
    const refused = async (body: Record<string, unknown>, compact = false) => {
      const call = compact
        ? world.client.responses.compact(body as never)
        : world.client.responses.create({ model: 'echo', input: 'hi', ...body } as never);
      return call.catch((error: unknown) => error);
    };
    const cases: [Record<string, unknown>, string][] = [
      [{ context_management: [{ type: 'truncation', compact_threshold: 100 }] }, 'context_management[0].type'],
      [
        { context_management: [{ type: 'compaction', compact_threshold: 0 }] },
        'context_management[0].compact_threshold',
      ],
      [
        { context_management: [{ type: 'compaction', compact_threshold: 1.5 }] },
        'context_management[0].compact_threshold',
      ],
      [
        { context_management: [{ type: 'compaction', compact_threshold: '100' }] },
        'context_management[0].compact_threshold',
      ],
      [{ context_management: [{ type: 'compaction', keep: 3 }] }, 'context_management[0].keep'],
      [{ context_management: [{ type: 'compaction' }, { type: 'compaction' }] }, 'context_management'],
      [{ context_management: { type: 'compaction' } }, 'context_management'],
      [{ context_management: [{ type: 'compaction' }], store: false }, 'context_management'],
    ];
    for (const [body, param] of cases) {
      const error = await refused(body);
      expect(error, JSON.stringify(body)).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error, JSON.stringify(body)).toMatchObject({ status: 400, param, type: 'invalid_request_error' });
    }

    const compactCases: [Record<string, unknown>, string][] = [
      [{ model: 'echo' }, 'input'],
      [{ model: 'echo', input: 'hi', reasoning: { effort: 'low' } }, 'reasoning'],
      [{ model: 'echo', input: 'hi', service_tier: 'scale' }, 'service_tier'],
      [{ model: 'echo', input: [{ type: 'compaction' }] }, 'input[0].encrypted_content'],
    ];
    for (const [body, param] of compactCases) {
      const error = await refused(body, true);
      expect(error, JSON.stringify(body)).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error, JSON.stringify(body)).toMatchObject({ status: 400, param });
      expect((error as Error).message.startsWith(`400 ${param}`), (error as Error).message).toBe(true);
    }
    const unknown = await refused({ model: 'echo', previous_response_id: 'resp_nope_1_1_2' }, true);
    expect(unknown).toBeInstanceOf(OpenAI.BadRequestError);
    expect(unknown).toMatchObject({ code: 'previous_response_not_found', param: 'previous_response_id' });
    const model = await refused({ model: 'gpt-unknown', input: 'hi' }, true);
    expect(model).toMatchObject({ status: 404, code: 'model_not_found', param: 'model' });
  });

  it('publishes POST /v1/responses/compact in /openapi.json with the session:turn scope', async () => {
    const document = await tailgateGet('/../openapi.json');
    expect(document.paths['/v1/responses/compact'].post.security).toEqual([{ bearer: ['session:turn'] }]);
  });
});

describe('the official openai client: compaction with a provider model', () => {
  it("writes the summary with the conversation's model, and the provider's next prompt opens with it", async () => {
    const provider = await startFakeProvider(() => ({ json: JSON.parse(fixture('openai-chat-text.json')) }));
    const server = await startTailgate({
      OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
      MODEL_ALIASES: 'gpt-4.1-mini=openai-compatible:fake-model',
      MODEL_MAX_RETRIES: '0',
    });
    try {
      const openai = new OpenAI({ apiKey: TOKEN, baseURL: server.baseURL, maxRetries: 0 });
      const first = await openai.responses.create({ model: 'gpt-4.1-mini', input: long('alpha') });
      const second = await openai.responses.create({
        model: 'gpt-4.1-mini',
        previous_response_id: first.id,
        input: 'next',
        context_management: [{ type: 'compaction', compact_threshold: 40 }],
      });
      const summary = 'Hello! How can I assist you today?';
      expect(compactionOf(second.output)).toMatchObject({ type: 'compaction', encrypted_content: summary });
      // Three provider calls: turn 1, the summary of turn 1, then turn 2 from the summary.
      expect(provider.requests).toHaveLength(3);
      const [, summarize, turn] = provider.requests.map((request) => request.body);
      expect(summarize.messages[1].content).toContain('#1 user: alpha alpha');
      expect(summarize.messages[1].content).toContain(`#2 assistant: ${summary}`);
      expect(turn.messages.map((message: { content: string }) => message.content)).toEqual([
        SUMMARY_HEADER + summary,
        'next',
      ]);
    } finally {
      await server.close();
      await provider.close();
    }
  });
});
