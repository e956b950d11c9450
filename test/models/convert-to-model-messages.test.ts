import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { PromptItem } from '../../lib/items.ts';
import { makesBlock } from '../../lib/models/cache-breakpoints.ts';
import {
  convertToModelMessages,
  MISSING_OUTPUT_TEXT,
  parseArguments,
} from '../../lib/models/convert-to-model-messages.ts';

const user = (content: string): PromptItem => ({ type: 'message', role: 'user', content });
const assistant = (content: string): PromptItem => ({ type: 'message', role: 'assistant', content });
const system = (content: string): PromptItem => ({ type: 'message', role: 'system', content });
const call = (call_id: string, name = 'ls', args = '{}'): PromptItem => ({
  type: 'function_call',
  call_id,
  name,
  arguments: args,
});
const output = (call_id: string, text = 'ok'): PromptItem => ({ type: 'function_call_output', call_id, output: text });

const text = (value: string) => ({ type: 'text', text: value });
const toolCall = (id: string, name = 'ls', input: unknown = {}) => ({
  type: 'tool-call',
  toolCallId: id,
  toolName: name,
  input,
});
const toolResult = (id: string, name = 'ls', value = 'ok') => ({
  type: 'tool-result',
  toolCallId: id,
  toolName: name,
  output: { type: 'text', value },
});

describe('convertToModelMessages', () => {
  it.each([
    {
      name: 'system, user and assistant messages',
      items: [system('rules'), user('hi'), assistant('hello')],
      messages: [
        { role: 'system', content: 'rules' },
        { role: 'user', content: [text('hi')] },
        { role: 'assistant', content: [text('hello')] },
      ],
    },
    {
      name: 'assistant text and calls grouped, outputs grouped after them',
      items: [
        user('go'),
        assistant('on it'),
        call('a', 'ls', '{"path":"."}'),
        call('b', 'cat', '{"file":"x"}'),
        output('a', '1'),
        output('b', '2'),
      ],
      messages: [
        { role: 'user', content: [text('go')] },
        {
          role: 'assistant',
          content: [text('on it'), toolCall('a', 'ls', { path: '.' }), toolCall('b', 'cat', { file: 'x' })],
        },
        { role: 'tool', content: [toolResult('a', 'ls', '1'), toolResult('b', 'cat', '2')] },
      ],
    },
    {
      name: 'interleaved call/output pairs',
      items: [call('a'), output('a'), call('b'), output('b')],
      messages: [
        { role: 'assistant', content: [toolCall('a')] },
        { role: 'tool', content: [toolResult('a')] },
        { role: 'assistant', content: [toolCall('b')] },
        { role: 'tool', content: [toolResult('b')] },
      ],
    },
    {
      name: 'a call with no output gets a synthetic result',
      items: [user('go'), call('a'), user('never mind')],
      messages: [
        { role: 'user', content: [text('go')] },
        { role: 'assistant', content: [toolCall('a')] },
        { role: 'tool', content: [toolResult('a', 'ls', MISSING_OUTPUT_TEXT)] },
        { role: 'user', content: [text('never mind')] },
      ],
    },
    {
      name: 'an output whose call is not in the prompt becomes a user message',
      items: [output('gone', 'late result'), user('next')],
      messages: [
        { role: 'user', content: [text('Output of tool call gone:\nlate result')] },
        { role: 'user', content: [text('next')] },
      ],
    },
    {
      name: 'an empty assistant message is dropped',
      items: [user('a'), assistant(''), user('b')],
      messages: [
        { role: 'user', content: [text('a')] },
        { role: 'user', content: [text('b')] },
      ],
    },
  ] satisfies { name: string; items: PromptItem[]; messages: unknown[] }[])('converts $name', ({ items, messages }) => {
    expect(convertToModelMessages(items)).toEqual(messages);
  });

  it.each([
    { text: '{"a":1}', input: { a: 1 } },
    { text: '', input: {} },
    { text: '  ', input: {} },
    { text: '{"a":', input: { _raw: '{"a":' } },
    { text: '[1,2]', input: { _raw: '[1,2]' } },
    { text: '42', input: { _raw: '42' } },
    { text: 'null', input: { _raw: 'null' } },
  ])('parses arguments $text as $input', ({ text: argumentsText, input }) => {
    expect(parseArguments(argumentsText)).toEqual(input);
    expect(convertToModelMessages([call('a', 'ls', argumentsText), output('a')])[0]).toEqual({
      role: 'assistant',
      content: [toolCall('a', 'ls', input)],
    });
  });

  const options = { anthropic: { cacheControl: { type: 'ephemeral' } } };
  it.each([
    { index: 0, expected: { role: 'system', content: 'rules', providerOptions: options } },
    { index: 1, expected: { role: 'user', content: [{ ...text('hi'), providerOptions: options }] } },
    {
      index: 2,
      expected: { role: 'assistant', content: [{ ...text('ok'), providerOptions: options }, toolCall('a')] },
    },
    {
      index: 3,
      expected: { role: 'assistant', content: [text('ok'), { ...toolCall('a'), providerOptions: options }] },
    },
    { index: 4, expected: { role: 'tool', content: [{ ...toolResult('a'), providerOptions: options }] } },
  ])('puts the breakpoint options on the part made from item $index', ({ index, expected }) => {
    const items = [system('rules'), user('hi'), assistant('ok'), call('a'), output('a')];
    const messages = convertToModelMessages(items, { breakpoints: [{ index, providerOptions: options }] });
    expect(messages).toContainEqual(expected);
    expect(JSON.stringify(messages).split('cacheControl').length - 1).toBe(1);
  });

  it("sends the reasoning of the items after the last user's message, before each item's own part", () => {
    const thought = (text: string) => ({
      type: 'reasoning' as const,
      summary: [{ type: 'summary_text' as const, text }],
      encrypted_content: JSON.stringify({ anthropic: { signature: `sig-${text}` } }),
    });
    const notice: PromptItem = { type: 'message', role: 'user', content: 'A notice.', synthetic: 'inbox' };
    const prompt: PromptItem[] = [
      user('hi'),
      { type: 'message', role: 'assistant', content: 'Hello.', reasoning: [thought('old')] },
      user('list files'),
      { type: 'function_call', call_id: 'c1', name: 'ls', arguments: '{}', reasoning: [thought('a'), thought('b')] },
      output('c1'),
      // A notice the service delivers is no message of the user's: the loop goes on through it.
      notice,
    ];
    const messages = convertToModelMessages(prompt);
    const reasoning = (text: string) => ({
      type: 'reasoning',
      text,
      providerOptions: { anthropic: { signature: `sig-${text}` } },
    });
    expect(messages[1]).toEqual({ role: 'assistant', content: [{ type: 'text', text: 'Hello.' }] });
    expect(messages[3]).toEqual({
      role: 'assistant',
      content: [reasoning('a'), reasoning('b'), { type: 'tool-call', toolCallId: 'c1', toolName: 'ls', input: {} }],
    });
  });

  it('sends the reasoning of a blank assistant message before the call of its answer that follows it', () => {
    const thought = {
      type: 'reasoning' as const,
      summary: [{ type: 'summary_text' as const, text: 'a' }],
      encrypted_content: JSON.stringify({ anthropic: { signature: 'sig-a' } }),
    };
    const blank: PromptItem = { type: 'message', role: 'assistant', content: '\n\n', reasoning: [thought] };
    const messages = convertToModelMessages([user('hi'), blank, call('a'), output('a')]);
    expect(messages[1]).toEqual({
      role: 'assistant',
      content: [
        { type: 'reasoning', text: 'a', providerOptions: { anthropic: { signature: 'sig-a' } } },
        toolCall('a'),
      ],
    });
    // With no call after it, it makes no message.
    expect(convertToModelMessages([user('hi'), blank])).toEqual([{ role: 'user', content: [text('hi')] }]);
  });

  it('sends the reasoning of a blank assistant message before the text of its answer that follows it', () => {
    const thought = (text: string) => ({
      type: 'reasoning' as const,
      summary: [{ type: 'summary_text' as const, text }],
      encrypted_content: JSON.stringify({ anthropic: { signature: `sig-${text}` } }),
    });
    const sent = (text: string) => ({
      type: 'reasoning',
      text,
      providerOptions: { anthropic: { signature: `sig-${text}` } },
    });
    const blank = (reasoning: string): PromptItem => ({
      type: 'message',
      role: 'assistant',
      content: '\n\n',
      reasoning: [thought(reasoning)],
    });
    // Thinking, blank text, thinking, text, a call: every block goes back, in the answer's order.
    const said: PromptItem = { type: 'message', role: 'assistant', content: 'Checking.', reasoning: [thought('b')] };
    expect(convertToModelMessages([user('hi'), blank('a'), said, call('c'), output('c')])[1]).toEqual({
      role: 'assistant',
      content: [sent('a'), sent('b'), text('Checking.'), toolCall('c')],
    });
    // Two blank messages before a call: both blocks.
    expect(convertToModelMessages([user('hi'), blank('a'), blank('b'), call('c'), output('c')])[1]).toEqual({
      role: 'assistant',
      content: [sent('a'), sent('b'), toolCall('c')],
    });
    // Blank messages with nothing that makes a block after them in their answer make no message.
    expect(convertToModelMessages([user('hi'), call('c'), output('c'), blank('a'), blank('b')])).toEqual([
      { role: 'user', content: [text('hi')] },
      { role: 'assistant', content: [toolCall('c')] },
      { role: 'tool', content: [toolResult('c')] },
    ]);
  });

  it('moves a breakpoint on a dropped empty assistant message back to the item before it', () => {
    const messages = convertToModelMessages([user('hi'), assistant(''), user('next')], {
      breakpoints: [{ index: 1, providerOptions: options }],
    });
    expect(messages).toEqual([
      { role: 'user', content: [{ ...text('hi'), providerOptions: options }] },
      { role: 'user', content: [text('next')] },
    ]);
  });

  it('puts options on every breakpoint, one mark per part', () => {
    const items = [system('rules'), user('hi'), assistant('ok'), call('a'), output('a')];
    const messages = convertToModelMessages(items, {
      breakpoints: [0, 3, 4, 4].map((index) => ({ index, providerOptions: options })),
    });
    expect(messages).toEqual([
      { role: 'system', content: 'rules', providerOptions: options },
      { role: 'user', content: [text('hi')] },
      { role: 'assistant', content: [text('ok'), { ...toolCall('a'), providerOptions: options }] },
      { role: 'tool', content: [{ ...toolResult('a'), providerOptions: options }] },
    ]);
  });

  const itemArbitrary: fc.Arbitrary<PromptItem> = fc.oneof(
    fc.record({
      type: fc.constant('message' as const),
      role: fc.constantFrom('system' as const, 'user' as const, 'assistant' as const),
      content: fc.string({ maxLength: 8 }),
    }),
    fc.record({
      type: fc.constant('function_call' as const),
      call_id: fc.constantFrom('a', 'b', 'c', 'd'),
      name: fc.constantFrom('ls', 'cat'),
      arguments: fc.constantFrom('{}', '{"x":1}', 'oops', ''),
    }),
    fc.record({
      type: fc.constant('function_call_output' as const),
      call_id: fc.constantFrom('a', 'b', 'c', 'd', 'e'),
      output: fc.string({ maxLength: 8 }),
    }),
  );

  it('places exactly one breakpoint whenever an item at or before its index makes a part (property)', () => {
    fc.assert(
      fc.property(fc.array(itemArbitrary, { maxLength: 14 }), fc.nat({ max: 16 }), (items, index) => {
        const messages = convertToModelMessages(items, { breakpoints: [{ index, providerOptions: options }] });
        const marks = JSON.stringify(messages).split('cacheControl').length - 1;
        const carrier = items.slice(0, index + 1).some((item) => makesBlock(item));
        expect(marks).toBe(carrier ? 1 : 0);
      }),
      { numRuns: 200 },
    );
  });

  it('sends a call_id that comes again under an id of its own, with the output that answers it', () => {
    const items = [
      user('go'),
      call('c'),
      output('c', 'first'),
      call('c_2', 'cat'),
      output('c_2', 'second'),
      call('c', 'ls', '{"x":1}'),
      output('c', 'third'),
    ];
    expect(convertToModelMessages(items).slice(1)).toEqual([
      { role: 'assistant', content: [toolCall('c')] },
      { role: 'tool', content: [toolResult('c', 'ls', 'first')] },
      { role: 'assistant', content: [toolCall('c_2', 'cat')] },
      { role: 'tool', content: [toolResult('c_2', 'cat', 'second')] },
      { role: 'assistant', content: [toolCall('c_3', 'ls', { x: 1 })] },
      { role: 'tool', content: [toolResult('c_3', 'ls', 'third')] },
    ]);
  });

  it("sends a prompt's calls under the same ids whatever comes after them", () => {
    const prefix = [call('c'), output('c', 'first'), call('c'), output('c', 'second')];
    const sent = convertToModelMessages(prefix);
    expect(sent.map((message) => (message.content[0] as { toolCallId: string }).toolCallId)).toEqual([
      'c',
      'c',
      'c_2',
      'c_2',
    ]);
    // A later call whose own id is one the prefix was sent under takes another.
    const longer = convertToModelMessages([...prefix, call('c_2', 'cat'), output('c_2', 'third')]);
    expect(longer.slice(0, sent.length)).toEqual(sent);
    expect(longer.slice(sent.length)).toEqual([
      { role: 'assistant', content: [toolCall('c_2_2', 'cat')] },
      { role: 'tool', content: [toolResult('c_2_2', 'cat', 'third')] },
    ]);
  });

  it('sends every call_id within 40 characters of [A-Za-z0-9_-], the ids OpenAI and Anthropic take', () => {
    const forty = `call_${'a'.repeat(35)}`;
    const longer = `call_${'b'.repeat(45)}`;
    const ids = (items: PromptItem[]) =>
      convertToModelMessages(items).flatMap((message) =>
        message.role === 'assistant' ? [(message.content[0] as { toolCallId: string }).toolCallId] : [],
      );
    const twice = (id: string) => [call(id), output(id), user('again'), call(id), output(id)];
    expect(ids(twice(forty))).toEqual([forty, `${forty.slice(0, 38)}_2`]);
    const [first, second] = ids(twice(longer));
    expect(first).toMatch(/^call_b{26}_[0-9a-f]{8}$/);
    expect(second).toBe(`${first!.slice(0, 38)}_2`);
    expect(ids(twice('c'))).toEqual(['c', 'c_2']);
    expect(ids([call('functions.read:0'), output('functions.read:0')])[0]).toMatch(/^functions_read_0_[0-9a-f]{8}$/);
  });

  it('answers a call left without its output even when a later call has its call_id', () => {
    expect(convertToModelMessages([call('c'), user('never mind'), call('c'), output('c', 'done')])).toEqual([
      { role: 'assistant', content: [toolCall('c')] },
      { role: 'tool', content: [toolResult('c', 'ls', MISSING_OUTPUT_TEXT)] },
      { role: 'user', content: [text('never mind')] },
      { role: 'assistant', content: [toolCall('c_2')] },
      { role: 'tool', content: [toolResult('c_2', 'ls', 'done')] },
    ]);
  });

  it('keeps every call, answers every call after it, never mutates its input (property)', () => {
    fc.assert(
      fc.property(fc.array(itemArbitrary, { maxLength: 14 }), (items) => {
        const before = structuredClone(items);
        const messages = convertToModelMessages(items);
        expect(items).toEqual(before);

        const calls = items.filter((item) => item.type === 'function_call');
        const parts = messages.flatMap((message, messageIndex) =>
          typeof message.content === 'string'
            ? []
            : message.content.map((part) => ({ part, messageIndex, role: message.role })),
        );
        const callParts = parts.filter(({ part }) => part.type === 'tool-call');
        // Every call is sent, under its call_id or, when that came before, `<call_id>_<n>`: no two alike.
        const sentIds = callParts.map(({ part }) => (part as { toolCallId: string }).toolCallId);
        expect(sentIds).toHaveLength(calls.length);
        sentIds.forEach((id, index) => {
          const callId = calls[index]!.call_id;
          expect(id === callId || id.startsWith(`${callId}_`)).toBe(true);
        });
        expect(new Set(sentIds).size).toBe(sentIds.length);
        for (const { part, messageIndex } of callParts) {
          const id = (part as { toolCallId: string }).toolCallId;
          const answered = parts.some(
            ({ part: other, messageIndex: otherIndex, role }) =>
              role === 'tool' &&
              otherIndex > messageIndex &&
              // In the run of tool messages right after the call's (the providers take its result nowhere else).
              messages.slice(messageIndex + 1, otherIndex + 1).every((message) => message.role === 'tool') &&
              (other as { toolCallId?: string }).toolCallId === id,
          );
          expect(answered).toBe(true);
        }
        // Tool results only ever follow an assistant message that made a call with their id.
        for (const { part, messageIndex, role } of parts) {
          if (role !== 'tool') continue;
          const id = (part as { toolCallId: string }).toolCallId;
          expect(
            callParts.some(
              (other) => other.messageIndex < messageIndex && (other.part as { toolCallId: string }).toolCallId === id,
            ),
          ).toBe(true);
        }
        // Nothing is lost: every message's text but a blank one appears in some part, every output
        // somewhere but a blank one (sent as an empty result: providers refuse whitespace-only text).
        const texts = parts.flatMap(({ part }) => (part.type === 'text' ? [part.text] : []));
        const systemTexts = messages.flatMap((message) => (message.role === 'system' ? [message.content] : []));
        const sent = JSON.stringify(messages);
        for (const item of items) {
          if (item.type === 'message' && (item.role === 'system' || makesBlock(item))) {
            expect(item.role === 'system' ? systemTexts : texts).toContain(item.content);
          }
          if (item.type === 'function_call_output' && String(item.output).trim() !== '') {
            expect(sent).toContain(JSON.stringify(item.output).slice(1, -1));
          }
        }
      }),
      { numRuns: 200 },
    );
  });
});
