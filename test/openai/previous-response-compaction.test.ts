import { createOpenAI } from '@ai-sdk/openai';
import { generateText, type ModelMessage, stepCountIs, streamText, tool } from 'ai';
import OpenAI from 'openai';
import type { ResponseCompactionItem } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { SUMMARY_HEADER } from '../../lib/compaction/summary-transcript.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ListOptions } from '../../lib/store/object-store.ts';
import { clientOnTailgate, long, startTailgate, tailgateGet, TOKEN } from './server.ts';

// A loop across a compaction (context_management): under a fixed previous_response_id (the AI
// SDK's previousResponseId with tools), resending its whole history, and under `conversation`.
// A compaction item the conversation output, sent back, is its own: the stored history is never
// changed, and the prompt after the compaction is its summary, then what followed.
const world = clientOnTailgate({ MODEL_ALIASES: 'gpt-4.1-mini=echo' });
const compactAt100 = [{ type: 'compaction' as const, compact_threshold: 100 }];
const contextManagement = [{ type: 'compaction' as const, compactThreshold: 100 }];
const weather = (answer: string) => ({
  get_weather: tool({ inputSchema: z.object({ city: z.string() }), execute: async () => answer }),
});

const sessionOf = (responseId: string) => /^resp_(conv_[0-9a-f]{24})_/.exec(responseId)![1]!;

/** A conversation's items, oldest first, compaction items with them: [type, text or id]. */
async function shapesOf(sessionId: string): Promise<string[][]> {
  const items = await world.client.conversations.items.list(sessionId, { order: 'asc', limit: 100 });
  return items.data.map((item: any) =>
    item.type === 'compaction'
      ? ['compaction', item.id]
      : [item.type, item.type === 'message' ? item.content[0].text : (item.output ?? item.arguments)],
  );
}

/** The prompt the conversation's next turn would send: a summary as `summary: <text>`, else the item's text. */
async function nextPrompt(sessionId: string): Promise<string[]> {
  const prompt = await tailgateGet(world.tailgate.baseURL, `/sessions/${sessionId}/prompt?full=true`);
  return prompt.items.map((item: any) =>
    item.synthetic === 'summary'
      ? `summary: ${item.content.slice(SUMMARY_HEADER.length)}`
      : (item.content ?? item.output ?? item.arguments),
  );
}

function compactionOf(output: readonly { type: string }[]): ResponseCompactionItem {
  const found = output.find((item): item is ResponseCompactionItem => item.type === 'compaction');
  expect(found).toBeDefined();
  return found!;
}

/** The compaction item among an AI SDK step's content (a `custom` part), as its id and summary. */
function sdkCompaction(content: readonly { type: string }[]): { id: string; encrypted_content: string } {
  const part = content.find((item) => item.type === 'custom') as
    | { providerMetadata?: { openai?: { itemId?: string; encryptedContent?: string } } }
    | undefined;
  const { itemId, encryptedContent } = part?.providerMetadata?.openai ?? {};
  expect(itemId).toBeDefined();
  return { id: itemId!, encrypted_content: encryptedContent! };
}

/**
 * A first response, then one under previous_response_id naming it that compacted: its input (to
 * append to), the response and its compaction item.
 */
async function compactedAfterFirst(client: OpenAI) {
  const first = await client.responses.create({ model: 'echo', input: long('alpha') });
  const input: OpenAI.Responses.ResponseInputItem[] = [{ role: 'user', content: long('bravo') }];
  const compacted = await client.responses.create({
    model: 'echo',
    previous_response_id: first.id,
    input,
    context_management: compactAt100,
  });
  return { first, input, compacted, compaction: compactionOf(compacted.output) };
}

const CALL = 'call get_weather {"city":"Paris"}';

/** The prompt after a loop's step compacted: the summary, then the items the step kept and those after it. */
const afterCompaction = (compaction: { encrypted_content: string }) => [
  `summary: ${compaction.encrypted_content}`,
  CALL,
  '{"city":"Paris"}',
  '18C',
  `echo: ${CALL}`,
];

/**
 * A first response, then the AI SDK's generateText (or, `stream`, streamText) tool loop after it
 * (CALL, the tool answering 18C), compacting at 100 tokens: under `previousResponseId` naming the
 * first response, under its `conversation`, or (`whole`) resending the whole history.
 */
async function sdkLoop(how: 'previousResponseId' | 'conversation' | 'whole', steps = 4, stream = false) {
  const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
  const messages: ModelMessage[] = [{ role: 'user', content: long('alpha') }];
  const first = await generateText({ model: openai('gpt-4.1-mini'), messages });
  const conversation = sessionOf(first.response.id);
  const named = { previousResponseId: { previousResponseId: first.response.id }, conversation: { conversation } };
  const loop = {
    model: openai('gpt-4.1-mini'),
    messages: [
      ...(how === 'whole' ? [...messages, ...first.responseMessages] : []),
      { role: 'user' as const, content: CALL },
    ],
    tools: weather('18C'),
    stopWhen: stepCountIs(steps),
    providerOptions: { openai: { ...(how === 'whole' ? {} : named[how]), contextManagement } },
  };
  if (!stream) return { conversation, result: await generateText(loop) };
  const streamed = streamText(loop);
  return { conversation, result: { text: await streamed.text, steps: await streamed.steps } };
}

describe('a loop under a fixed previous_response_id across a compaction', () => {
  it.each([
    ['generateText', false],
    ['streamText', true],
  ])("the AI SDK's %s: the step after the compaction goes on in the conversation", async (_, stream) => {
    // Every step names the first response; the second resends the call, the compaction item (an
    // item_reference to cmp_...) and the tool output.
    const { conversation, result } = await sdkLoop('previousResponseId', 4, stream);
    expect(result.text).toBe(`echo: ${CALL}`);
    expect(result.steps.map((step) => sessionOf(step.response.id))).toEqual([conversation, conversation]);
    // The first step compacted: its prompt reached 100 tokens.
    const compaction = sdkCompaction(result.steps[0]!.content);
    expect(compaction.id).toBe(`cmp_${conversation}_3`);
    // The history is every item once, the compaction item listed before the first item it kept.
    expect(await shapesOf(conversation)).toEqual([
      ['message', long('alpha')],
      ['message', `echo: ${long('alpha')}`],
      ['compaction', compaction.id],
      ['message', CALL],
      ['function_call', '{"city":"Paris"}'],
      ['function_call_output', '18C'],
      ['message', `echo: ${CALL}`],
    ]);
    // The prompt after the compaction: what it summarized, then what followed.
    expect(await nextPrompt(conversation)).toEqual(afterCompaction(compaction));
  });

  it('the openai client appending each output (compaction items inline) goes on across two compactions', async () => {
    const { client } = world;
    const first = await client.responses.create({ model: 'echo', input: long('alpha') });
    const conversation = first.conversation!.id;
    const input: OpenAI.Responses.ResponseInputItem[] = [];
    const step = async (said: string, compacting = true) => {
      input.push({ role: 'user', content: said });
      const response = await client.responses.create({
        model: 'echo',
        previous_response_id: first.id,
        input,
        ...(compacting ? { context_management: compactAt100 } : {}),
      });
      input.push(...(response.output as OpenAI.Responses.ResponseInputItem[]));
      return response;
    };
    const bravo = await step(long('bravo'));
    const charlie = await step(long('charlie'));
    const last = await step('short', false);
    expect([bravo, charlie, last].map((response) => response.conversation!.id)).toEqual(Array(3).fill(conversation));
    const [older, newer] = [compactionOf(bravo.output), compactionOf(charlie.output)];
    expect(older.id).not.toBe(newer.id);
    // Neither compaction item was stored as a message: the history is each item as sent, once.
    const messages = (await shapesOf(conversation)).filter(([type]) => type === 'message').map(([, text]) => text);
    expect(messages).toEqual(
      [long('alpha'), long('bravo'), long('charlie'), 'short'].flatMap((said) => [said, `echo: ${said}`]),
    );
    expect(last.output_text).toBe('echo: short');
    // Its input_items are its input as sent, each compaction item where it was.
    const listed: OpenAI.Responses.ResponseItem[] = [];
    for await (const item of client.responses.inputItems.list(last.id, { order: 'asc' })) listed.push(item);
    const shape = (item: any) =>
      item.type === 'compaction' ? [item.id, item.encrypted_content] : (item.type ?? 'message');
    expect(listed.map(shape)).toEqual(input.slice(0, -1).map(shape));
    const prompt = await nextPrompt(conversation);
    expect(prompt[0]).toBe(`summary: ${newer.encrypted_content}`);
    expect(prompt.slice(-2)).toEqual(['short', 'echo: short']);
  });

  it('a compaction item whose summary was edited is no resend: the conversation is left as it was', async () => {
    const { client } = world;
    const { first, input, compacted, compaction } = await compactedAfterFirst(client);
    const conversation = first.conversation!.id;
    const before = await shapesOf(conversation);
    input.push(...(compacted.output.slice(0, -1) as OpenAI.Responses.ResponseInputItem[]));
    input.push({ ...compaction, encrypted_content: 'something else' }, { role: 'user', content: 'next' });
    const edited = await client.responses.create({ model: 'echo', previous_response_id: first.id, input });
    // It branches from the first response, starting from the summary it sent.
    expect(edited.conversation!.id).not.toBe(conversation);
    expect(await nextPrompt(edited.conversation!.id)).toContain(`${SUMMARY_HEADER}something else`);
    expect(await shapesOf(conversation)).toEqual(before);
  });
});

describe('the same loop across a compaction without previous_response_id, and under conversation', () => {
  it("the AI SDK's generateText resending its whole history goes on in one conversation", async () => {
    const { conversation, result } = await sdkLoop('whole');
    expect(result.text).toBe(`echo: ${CALL}`);
    expect(result.steps.map((step) => sessionOf(step.response.id))).toEqual([conversation, conversation]);
    const compaction = sdkCompaction(result.steps[0]!.content);
    expect((await shapesOf(conversation)).filter(([type]) => type !== 'compaction')).toHaveLength(6);
    expect(await nextPrompt(conversation)).toEqual(afterCompaction(compaction));
  });

  it("the AI SDK's generateText under conversation goes on after the step that compacted", async () => {
    // The SDK leaves the compaction item out under a conversation (it holds it), and resends the
    // step's user message, which the conversation does not store again (docs/OPENAI.md).
    const { conversation, result } = await sdkLoop('conversation');
    expect(result.text).toBe(`echo: ${CALL}`);
    expect(result.steps.map((step) => sessionOf(step.response.id))).toEqual([conversation, conversation]);
    const compaction = sdkCompaction(result.steps[0]!.content);
    expect(compaction.id).toBe(`cmp_${conversation}_3`);
    expect((await shapesOf(conversation)).filter(([type]) => type !== 'compaction')).toHaveLength(6);
    expect(await nextPrompt(conversation)).toEqual(afterCompaction(compaction));
  });

  it('its own compaction item sent back under conversation, or after its newest response, is not stored', async () => {
    const { client } = world;
    const first = await client.responses.create({ model: 'echo', input: long('alpha') });
    const conversation = first.conversation!.id;
    const compacted = await client.responses.create({
      model: 'echo',
      conversation,
      input: long('bravo'),
      context_management: compactAt100,
    });
    const compaction = compactionOf(compacted.output);
    const under = await client.responses.create({
      model: 'echo',
      conversation,
      input: [compaction, { role: 'user', content: 'next' }],
    });
    expect(under.conversation!.id).toBe(conversation);
    const after = await client.responses.create({
      model: 'echo',
      previous_response_id: under.id,
      input: [{ role: 'user', content: 'then' }, compaction, { role: 'user', content: 'last' }],
    });
    expect(after.conversation!.id).toBe(conversation);
    expect(await nextPrompt(conversation)).toEqual([
      `summary: ${compaction.encrypted_content}`,
      long('bravo'),
      `echo: ${long('bravo')}`,
      'next',
      'echo: next',
      'then',
      'last',
      'echo: last',
    ]);
  });
});

describe('the compaction items a step resends are read once', () => {
  it("a step resending its compaction item many times lists the conversation's compactions once", async () => {
    const lists: string[] = [];
    const store = new (class extends MemoryStore {
      override list(prefix: string, options?: ListOptions) {
        lists.push(prefix);
        return super.list(prefix, options);
      }
    })();
    const tailgate = await startTailgate({}, store);
    try {
      const client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
      const { first, input, compacted, compaction } = await compactedAfterFirst(client);
      input.push(...(compacted.output as OpenAI.Responses.ResponseInputItem[]));
      // Sent 40 times over (an item of its own each time): one listing of the compactions, not one each.
      const sent = [...input, ...Array(40).fill(compaction), { role: 'user' as const, content: 'next' }];
      lists.length = 0;
      const response = await client.responses.create({ model: 'echo', previous_response_id: first.id, input: sent });
      expect(response.conversation!.id).toBe(first.conversation!.id);
      expect(lists.filter((prefix) => prefix.includes('/context/'))).toHaveLength(1);
    } finally {
      await tailgate.close();
    }
  });
});
