import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { clientOnTailgate, TOKEN } from './server.ts';

// truncation on the Responses API against the real app, with the echo model given a small
// window (CONTEXT_LIMIT 120, RESPONSE_RESERVE 20: prompts of at most 100 tokens).
const world = clientOnTailgate({ CONTEXT_LIMIT: '120', RESPONSE_RESERVE: '20' });

const long = (letter: string) => letter.repeat(160);
const history = [
  { type: 'message' as const, role: 'user' as const, content: long('a') },
  { type: 'function_call' as const, call_id: 'call_old', name: 'lookup', arguments: '{}' },
  { type: 'function_call_output' as const, call_id: 'call_old', output: long('b') },
  { type: 'message' as const, role: 'assistant' as const, content: long('c') },
];

type Truncated = {
  tailgate: {
    context: {
      truncation?: {
        tool_pairs: number;
        messages: number;
        dropped_seqs: number[];
        prompt_tokens: number;
        prompt_tokens_before: number;
      };
    };
  };
};

describe('truncation', () => {
  it(
    '"disabled" (the default) refuses a prompt over the window with 400 context_length_exceeded; "auto" drops ' +
      'the oldest tool pair, then the oldest messages, and says so',
    async () => {
      // A longer answer: once the pair is gone, the oldest message must go too.
      const answer = { ...history[3]!, content: long('c').repeat(2) };
      const { id } = await world.client.conversations.create({ items: [...history.slice(0, 3), answer] });
      const refused = await world.client.responses
        .create({ model: 'echo', conversation: id, input: 'short question' })
        .catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
      expect(refused).toMatchObject({ code: 'context_length_exceeded', param: 'input' });

      const response = await world.client.responses.create({
        model: 'echo',
        conversation: id,
        input: 'short question',
        truncation: 'auto',
      });
      expect(response.output_text).toBe('echo: short question');
      expect(response.truncation).toBe('auto');
      const truncation = (response as unknown as Truncated).tailgate.context.truncation!;
      expect(truncation.tool_pairs).toBe(1);
      expect(truncation.messages).toBeGreaterThanOrEqual(1);
      // The pair goes first (seqs 2 and 3), then the oldest message; the newest user turn (seq 5:
      // the refused response left nothing in the conversation) never.
      expect(truncation.dropped_seqs.slice(0, 3)).toEqual([1, 2, 3]);
      expect(truncation.dropped_seqs).not.toContain(5);
      expect(truncation.prompt_tokens).toBeLessThanOrEqual(100);
      expect(truncation.prompt_tokens_before).toBeGreaterThan(100);
      // The history keeps everything: truncation only shapes the prompt.
      expect((await world.client.conversations.items.list(id, { limit: 100 })).data).toHaveLength(6);
    },
  );

  it('"auto" drops the oldest pairs of a tool loop, whose last user message is older than them', async () => {
    // A computer-use loop: one user message, then calls only; the newest turn is the output sent.
    const pairs = ['p', 'q', 'r'].flatMap((letter) => [
      { type: 'function_call' as const, call_id: `call_${letter}`, name: 'lookup', arguments: '{}' },
      { type: 'function_call_output' as const, call_id: `call_${letter}`, output: long(letter) },
    ]);
    const open = { type: 'function_call' as const, call_id: 'call_open', name: 'lookup', arguments: '{}' };
    const { id } = await world.client.conversations.create({
      items: [{ type: 'message', role: 'user', content: 'go' }, ...pairs, open],
    });
    const response = await world.client.responses.create({
      model: 'echo',
      conversation: id,
      input: [{ type: 'function_call_output', call_id: 'call_open', output: 'done' }],
      truncation: 'auto',
    });
    const truncation = (response as unknown as Truncated).tailgate.context.truncation!;
    expect(truncation.tool_pairs).toBeGreaterThanOrEqual(1);
    expect(truncation.dropped_seqs.slice(0, 2)).toEqual([2, 3]);
    expect(truncation.dropped_seqs).not.toContain(9);
    expect(truncation.prompt_tokens).toBeLessThanOrEqual(100);
  });

  it('"auto" keeps a call whose output the newest turn sends before its user message, and that output', async () => {
    // The input answers the open call, then asks more: the whole input is the newest turn.
    const open = { type: 'function_call' as const, call_id: 'call_open', name: 'lookup', arguments: '{}' };
    const { id } = await world.client.conversations.create({
      items: [{ type: 'message', role: 'user', content: long('a').repeat(3) }, open],
    });
    const response = await world.client.responses.create({
      model: 'echo',
      conversation: id,
      input: [
        { type: 'function_call_output', call_id: 'call_open', output: 'done' },
        { type: 'message', role: 'user', content: 'and then?' },
      ],
      truncation: 'auto',
    });
    const truncation = (response as unknown as Truncated).tailgate.context.truncation!;
    expect(truncation.dropped_seqs).toEqual([1]);
    expect(truncation.prompt_tokens).toBeLessThanOrEqual(100);
  });

  it('"auto" keeps the output a store: false input sends after its last call, before its user message', async () => {
    const input = [
      { type: 'message' as const, role: 'user' as const, content: long('a').repeat(3) },
      { type: 'function_call' as const, call_id: 'call_open', name: 'lookup', arguments: '{}' },
      { type: 'function_call_output' as const, call_id: 'call_open', output: 'done' },
      { type: 'message' as const, role: 'user' as const, content: 'and then?' },
    ];
    const response = await world.client.responses.create({ model: 'echo', store: false, input, truncation: 'auto' });
    const truncation = (response as unknown as Truncated).tailgate.context.truncation!;
    expect(truncation.dropped_seqs).toEqual([1]);
  });

  it('leaves a prompt that fits alone, and still refuses one whose newest turn alone is too large', async () => {
    const fits = await world.client.responses.create({ model: 'echo', input: 'hello', truncation: 'auto' });
    expect((fits as unknown as Truncated).tailgate.context.truncation).toBeUndefined();
    const huge = await world.client.responses
      .create({ model: 'echo', input: long('z').repeat(5), truncation: 'auto' })
      .catch((error: unknown) => error);
    expect(huge).toMatchObject({ status: 400, code: 'context_length_exceeded' });
  });

  it("fails a background response over the window with OpenAI's code, as a foreground one is refused", async () => {
    const { id } = await world.client.conversations.create({ items: history });
    const queued = await world.client.responses.create({
      model: 'echo',
      conversation: id,
      input: 'short question',
      background: true,
    });
    // Its run is the server's work after the response.
    await world.tailgate.settled();
    const failed = await world.client.responses.retrieve(queued.id);
    expect(failed).toMatchObject({ status: 'failed', error: { code: 'context_length_exceeded' } });
    // Its stream ends the same way.
    const events = [];
    for await (const event of await world.client.responses.retrieve(queued.id, { stream: true })) events.push(event);
    expect(events.at(-1)).toMatchObject({
      type: 'response.failed',
      response: { status: 'failed', error: { code: 'context_length_exceeded' } },
    });
  });

  it('applies to store: false responses, where dropped_seqs are positions in the input', async () => {
    const input = [...history, { type: 'message' as const, role: 'user' as const, content: 'short question' }];
    const refused = await world.client.responses
      .create({ model: 'echo', store: false, input })
      .catch((error: unknown) => error);
    expect(refused).toMatchObject({ status: 400, code: 'context_length_exceeded' });
    const response = await world.client.responses.create({ model: 'echo', store: false, input, truncation: 'auto' });
    expect(response.output_text).toBe('echo: short question');
    const truncation = (response as unknown as Truncated).tailgate.context.truncation!;
    // Dropping the tool pair (input positions 2 and 3) is enough here.
    expect(truncation).toMatchObject({ tool_pairs: 1, messages: 0, dropped_seqs: [2, 3] });
    expect(truncation.prompt_tokens).toBeLessThanOrEqual(100);
  });

  it('applies to a store: false tool loop, its newest turn the outputs after the last call', async () => {
    // The whole history resent (as @openai/agents does): one user message, then calls only.
    const input = [
      { type: 'message' as const, role: 'user' as const, content: 'go' },
      ...['p', 'q', 'r'].flatMap((letter) => [
        { type: 'function_call' as const, call_id: `call_${letter}`, name: 'lookup', arguments: '{}' },
        { type: 'function_call_output' as const, call_id: `call_${letter}`, output: long(letter) },
      ]),
    ];
    const response = await world.client.responses.create({ model: 'echo', store: false, input, truncation: 'auto' });
    const truncation = (response as unknown as Truncated).tailgate.context.truncation!;
    expect(truncation.dropped_seqs.slice(0, 2)).toEqual([2, 3]);
    expect(truncation.dropped_seqs).not.toContain(7);
    expect(truncation.prompt_tokens).toBeLessThanOrEqual(100);
  });

  it(
    'on the native API the safety net is the default: ' +
      'the oldest items go behind a boundary the next turn keeps; "disabled" refuses with 413',
    async () => {
      const api = (path: string, body: unknown) =>
        fetch(`${world.tailgate.baseURL}${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      expect((await api('/sessions', { id: 'native-overflow', model: 'echo' })).status).toBe(201);
      expect((await api('/sessions/native-overflow/items', { items: history })).status).toBe(201);

      const refused = await api('/sessions/native-overflow/turns', { input: 'short question', truncation: 'disabled' });
      expect(refused.status).toBe(413);
      expect(await refused.json()).toMatchObject({ error: { code: 'context_too_large' } });

      type Dropped = { tool_start_seq: number; message_start_seq: number; moved: boolean; tool_pairs: number };
      const turn = async (input: string) => {
        const response = await api('/sessions/native-overflow/turns', { input });
        expect(response.status).toBe(200);
        return (await response.json()) as { context: { overflow_dropped?: Dropped; truncation?: unknown } };
      };
      const first = await turn('short question');
      expect(first.context.truncation).toBeUndefined();
      expect(first.context.overflow_dropped).toMatchObject({ moved: true, tool_pairs: 1 });
      const second = await turn('and another');
      expect(second.context.overflow_dropped).toMatchObject({
        moved: false,
        tool_start_seq: first.context.overflow_dropped!.tool_start_seq,
        message_start_seq: first.context.overflow_dropped!.message_start_seq,
      });
    },
  );
});
