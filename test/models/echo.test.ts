import fc from 'fast-check';
import { ModelTimeoutError } from '../../lib/models/errors.ts';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { sha256Hex } from '../../lib/hash.ts';
import type { PromptItem, Tool } from '../../lib/items.ts';
import { createEchoModel, ECHO_MAX_WAIT_MS, echoModel } from '../../lib/models/echo.ts';
import type { ModelRequest } from '../../lib/models/model.ts';
import { collectStream, streamedText } from '../support/fake-providers/collect-stream.ts';

const user = (content: string): PromptItem => ({ type: 'message', role: 'user', content });
const assistant = (content: string): PromptItem => ({ type: 'message', role: 'assistant', content });
const system = (content: string): PromptItem => ({ type: 'message', role: 'system', content });
const lsTool: Tool = {
  type: 'function',
  name: 'ls',
  parameters: { type: 'object', properties: { path: { type: 'string' } } },
};

describe('echo model', () => {
  it.each([
    { name: 'one user message', prompt: [user('hi')], reply: 'echo: hi', input: 1, output: 2 },
    { name: 'no user message', prompt: [system('be nice')], reply: 'echo: ', input: 2, output: 2 },
    { name: 'empty prompt', prompt: [], reply: 'echo: ', input: 0, output: 2 },
    {
      name: 'the last user message, not the last item',
      prompt: [system('sys'), user('first'), assistant('echo: first'), user('second question'), assistant('x')],
      reply: 'echo: second question',
      // 3 + 5 + 11 + 15 + 1 = 35 characters
      input: 9,
      output: 6,
    },
    {
      name: 'tool traffic counts names, arguments and outputs',
      prompt: [
        user('go'),
        { type: 'function_call', call_id: 'c1', name: 'ls', arguments: '{"path":"."}' },
        { type: 'function_call_output', call_id: 'c1', output: 'a.txt b.txt' },
      ],
      reply: 'echo: go',
      // 2 + (2 + 12) + 11 = 27 characters
      input: 7,
      output: 2,
    },
  ] satisfies { name: string; prompt: PromptItem[]; reply: string; input: number; output: number }[])(
    'replies to $name',
    async ({ prompt, reply, input, output }) => {
      expect(await echoModel.generate({ prompt, tools: [] })).toEqual({
        output: [{ type: 'message', role: 'assistant', content: reply }],
        usage: { input_tokens: input, output_tokens: output },
      });
    },
  );

  it('counts the full length of an out-of-line output', async () => {
    const ref = { sha256: '0'.repeat(64), md5: '0'.repeat(32), length: 4000, head: 'x', tail: 'y' };
    const result = await echoModel.generate({
      prompt: [user('hi'), { type: 'function_call_output', call_id: 'c', output: '', output_ref: ref }],
      tools: [],
    });
    expect(result.usage.input_tokens).toBe(Math.ceil(4002 / 4));
  });

  it('streams word deltas, then the message, then done with the same result as generate', async () => {
    const request: ModelRequest = { prompt: [user('tell me three things')], tools: [] };
    const events = await collectStream(echoModel.stream(request));
    const result = await echoModel.generate(request);
    expect(events).toEqual([
      { type: 'text_delta', delta: 'echo: ' },
      { type: 'text_delta', delta: 'tell ' },
      { type: 'text_delta', delta: 'me ' },
      { type: 'text_delta', delta: 'three ' },
      { type: 'text_delta', delta: 'things' },
      { type: 'item_done', item: result.output[0] },
      { type: 'done', result },
    ]);
  });

  it('cuts a reply over maxOutputTokens to it and says it is incomplete, streamed or not', async () => {
    // "echo: tell me three things" is 26 characters, 7 tokens of 4 characters: 3 tokens keep 12.
    const request: ModelRequest = { prompt: [user('tell me three things')], tools: [], maxOutputTokens: 3 };
    const result = await echoModel.generate(request);
    expect(result).toEqual({
      // The message it stopped in says so (lib/models/model.ts, markCut).
      output: [{ type: 'message', role: 'assistant', content: 'echo: tell m', incomplete: true }],
      usage: { input_tokens: 5, output_tokens: 3 },
      incomplete: 'max_output_tokens',
    });
    expect(streamedText(await collectStream(echoModel.stream(request)))).toBe('echo: tell m');
    // A surrogate pair is not split; a reply within the limit is complete.
    const emoji = await echoModel.generate({ prompt: [user('\u{1F600}\u{1F600}')], tools: [], maxOutputTokens: 2 });
    expect(emoji.output[0]).toMatchObject({ content: 'echo: \u{1F600}' });
    const within = await echoModel.generate({ prompt: [user('hi')], tools: [], maxOutputTokens: 2 });
    expect(within).not.toHaveProperty('incomplete');
    expect(within.output[0]).toMatchObject({ content: 'echo: hi' });
  });

  it('calls an offered tool when the last user message is `call <tool> <json>`', async () => {
    const prompt = [system('s'), user('call ls {"path": "src"}')];
    const result = await echoModel.generate({ prompt, tools: [lsTool] });
    const callId = `call_${sha256Hex(`2:ls:{"path": "src"}`).slice(0, 12)}`;
    expect(result).toEqual({
      output: [{ type: 'function_call', call_id: callId, name: 'ls', arguments: '{"path": "src"}' }],
      usage: { input_tokens: Math.ceil(24 / 4), output_tokens: Math.ceil(17 / 4) },
    });
    const events = await collectStream(echoModel.stream({ prompt, tools: [lsTool] }));
    expect(events).toEqual([
      { type: 'item_done', item: result.output[0] },
      { type: 'done', result },
    ]);
  });

  it('defaults the arguments of `call <tool>` to {}', async () => {
    const result = await echoModel.generate({ prompt: [user('call ls')], tools: [lsTool] });
    expect(result.output[0]).toMatchObject({ type: 'function_call', name: 'ls', arguments: '{}' });
  });

  it.each([
    { name: 'the tool is not offered', content: 'call rm {"path": "/"}' },
    { name: 'the arguments are not JSON', content: 'call ls {path: src}' },
    { name: 'the arguments are not an object', content: 'call ls [1, 2]' },
    { name: 'the form is not exact', content: 'please call ls {}' },
  ])('replies with text when $name', async ({ content }) => {
    const result = await echoModel.generate({ prompt: [user(content)], tools: [lsTool] });
    expect(result.output).toEqual([{ type: 'message', role: 'assistant', content: `echo: ${content}` }]);
  });

  it('replies with text once the call is in the prompt, so a tool loop ends', async () => {
    const first = await echoModel.generate({ prompt: [user('call ls {}')], tools: [lsTool] });
    const call = first.output[0]!;
    expect(call.type).toBe('function_call');
    const second = await echoModel.generate({
      prompt: [
        user('call ls {}'),
        call,
        { type: 'function_call_output', call_id: (call as { call_id: string }).call_id, output: 'a.txt' },
      ],
      tools: [lsTool],
    });
    expect(second.output).toEqual([{ type: 'message', role: 'assistant', content: 'echo: call ls {}' }]);
  });

  it('calls the tool a forced tool choice names, with arguments its schema takes, then replies with text', async () => {
    const catTool: Tool = {
      type: 'function',
      name: 'cat',
      parameters: { type: 'object', properties: { file: { type: 'string', minLength: 1 } }, required: ['file'] },
    };
    const tools = [lsTool, catTool];
    const named = await echoModel.generate({
      prompt: [user('hello')],
      tools,
      settings: { toolChoice: { name: 'cat' } },
    });
    expect(named.output).toEqual([
      expect.objectContaining({ type: 'function_call', name: 'cat', arguments: '{"file":"hello"}' }),
    ]);
    const required = await echoModel.generate({ prompt: [user('hello')], tools, settings: { toolChoice: 'required' } });
    expect(required.output[0]).toMatchObject({ type: 'function_call', name: 'ls' });
    const allowed = await echoModel.generate({
      prompt: [user('hello')],
      tools,
      settings: { toolChoice: 'required', allowedTools: ['cat'] },
    });
    expect(allowed.output[0]).toMatchObject({ type: 'function_call', name: 'cat' });
    // `call <tool>` still picks the tool when the choice allows it.
    const asked = await echoModel.generate({
      prompt: [user('call cat {"file":"a"}')],
      tools,
      settings: { toolChoice: 'required' },
    });
    expect(asked.output[0]).toMatchObject({ type: 'function_call', name: 'cat', arguments: '{"file":"a"}' });
    const other = await echoModel.generate({
      prompt: [user('call ls {}')],
      tools,
      settings: { toolChoice: { name: 'cat' } },
    });
    expect(other.output[0]).toMatchObject({ type: 'function_call', name: 'cat', arguments: '{"file":"call ls {}"}' });
    const streamed = await collectStream(
      echoModel.stream({ prompt: [user('hello')], tools, settings: { toolChoice: { name: 'cat' } } }),
    );
    expect(streamed).toEqual([
      { type: 'item_done', item: named.output[0] },
      { type: 'done', result: named },
    ]);
    const call = named.output[0]!;
    const answered = await echoModel.generate({
      prompt: [
        user('hello'),
        call,
        { type: 'function_call_output', call_id: (call as { call_id: string }).call_id, output: 'x' },
      ],
      tools,
      settings: { toolChoice: { name: 'cat' } },
    });
    expect(answered.output).toEqual([{ type: 'message', role: 'assistant', content: 'echo: hello' }]);
  });

  it('refuses an already aborted call', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(
      echoModel.generate({ prompt: [user('x')], tools: [], signal: controller.signal }),
    ).rejects.toBeInstanceOf(ModelTimeoutError);
  });

  describe('`wait <milliseconds> <text>`', () => {
    afterEach(() => void vi.useRealTimers());

    /** `promise`, and whether it settled yet. */
    const watched = <T>(promise: Promise<T>) => {
      const state = { settled: false, promise };
      const settle = () => {
        state.settled = true;
      };
      promise.then(settle, settle);
      return state;
    };

    it('answers as for <text> once that many milliseconds passed, streamed or not', async () => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const plain = await echoModel.generate({ prompt: [user('hi there')], tools: [] });
      const request: ModelRequest = { prompt: [user('wait 300 hi there')], tools: [] };
      const generated = watched(echoModel.generate(request));
      const streamed = watched(collectStream(echoModel.stream(request)));
      await vi.advanceTimersByTimeAsync(299);
      expect([generated.settled, streamed.settled]).toEqual([false, false]);
      await vi.advanceTimersByTimeAsync(1);
      const result = await generated.promise;
      expect(result.output).toEqual(plain.output);
      expect(result.usage).toEqual({ input_tokens: Math.ceil('wait 300 hi there'.length / 4), output_tokens: 4 });
      const events = await streamed.promise;
      expect(streamedText(events)).toBe('echo: hi there');
      expect(events.at(-1)).toEqual({ type: 'done', result });
    });

    it('waits at most ECHO_MAX_WAIT_MS', async () => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const generated = watched(echoModel.generate({ prompt: [user('wait 999999999999 late')], tools: [] }));
      await vi.advanceTimersByTimeAsync(ECHO_MAX_WAIT_MS - 1);
      expect(generated.settled).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      expect((await generated.promise).output).toEqual([{ type: 'message', role: 'assistant', content: 'echo: late' }]);
    });

    it('makes the call <text> asks for after the wait', async () => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const generated = echoModel.generate({ prompt: [user('wait 50 call ls {"path":"."}')], tools: [lsTool] });
      await vi.advanceTimersByTimeAsync(50);
      expect((await generated).output).toMatchObject([
        { type: 'function_call', name: 'ls', arguments: '{"path":"."}' },
      ]);
    });

    it.each(['wait', 'wait 5x', 'waiting 5 x', ' wait 5 x', 'Wait 5 x', 'wait -5 x', 'wait\n5 x'])(
      'answers %j at once, as any other message',
      async (text) => {
        vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
        const result = await echoModel.generate({ prompt: [user(text)], tools: [] });
        expect(result.output).toEqual([{ type: 'message', role: 'assistant', content: `echo: ${text}` }]);
      },
    );

    it('ends at once with ModelTimeoutError when the call is aborted during the wait', async () => {
      const controller = new AbortController();
      const request: ModelRequest = {
        prompt: [user(`wait ${ECHO_MAX_WAIT_MS} hi`)],
        tools: [],
        signal: controller.signal,
      };
      const generated = echoModel.generate(request);
      const firstEvent = echoModel.stream(request)[Symbol.asyncIterator]().next();
      controller.abort();
      await expect(generated).rejects.toBeInstanceOf(ModelTimeoutError);
      await expect(firstEvent).rejects.toBeInstanceOf(ModelTimeoutError);
    });
  });

  const itemArbitrary: fc.Arbitrary<PromptItem> = fc.oneof(
    fc.record({
      type: fc.constant('message' as const),
      role: fc.constantFrom('system' as const, 'user' as const, 'assistant' as const),
      content: fc.string({ maxLength: 40 }),
    }),
    fc.record({
      type: fc.constant('function_call' as const),
      call_id: fc.constantFrom('a', 'b'),
      name: fc.constantFrom('ls', 'cat'),
      arguments: fc.string({ maxLength: 20 }),
    }),
    fc.record({
      type: fc.constant('function_call_output' as const),
      call_id: fc.constantFrom('a', 'b'),
      output: fc.string({ maxLength: 40 }),
    }),
  );

  it('is deterministic, streams what it generates, and reports characters / 4 (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(itemArbitrary, { maxLength: 12 }), async (prompt) => {
        const request: ModelRequest = { prompt, tools: [lsTool] };
        const result = await createEchoModel().generate(request);
        expect(await echoModel.generate(request)).toEqual(result);
        const events = await collectStream(echoModel.stream(request));
        expect(events.at(-1)).toEqual({ type: 'done', result });
        expect(
          events.filter((event) => event.type === 'item_done').map((event) => event.type === 'item_done' && event.item),
        ).toEqual(result.output);
        const characters = prompt.reduce(
          (total, item) =>
            total +
            (item.type === 'message'
              ? item.content.length
              : item.type === 'function_call'
                ? item.name.length + item.arguments.length
                : item.output.length),
          0,
        );
        expect(result.usage.input_tokens).toBe(Math.ceil(characters / 4));
        const [item] = result.output;
        if (item?.type === 'message') {
          expect(streamedText(events)).toBe(item.content);
          expect(result.usage.output_tokens).toBe(Math.ceil(item.content.length / 4));
        }
      }),
      { numRuns: 150 },
    );
  });
});
