import { afterEach, describe, expect, it } from 'vitest';
import type { PromptItem } from '../../lib/items.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { fakeAiBinding } from '../support/fake-providers/fake-ai-binding.ts';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { toolLoopPrompt, weatherTool } from '../support/fake-providers/tool-loop.ts';

/**
 * Rules the providers enforce on a request that the history the API accepts can break: each
 * checker returns what the provider would answer 400 for, from the request body the adapter sent.
 */

let provider: FakeProvider | undefined;
afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

/** The body the adapter of `kind` sends for `prompt` (to a fake server answering a recorded reply). */
async function sentBody(kind: 'anthropic' | 'openai', prompt: PromptItem[]): Promise<any> {
  provider = await startFakeProvider(() => ({
    text: fixture(kind === 'anthropic' ? 'anthropic-message-text.json' : 'openai-chat-text.json'),
  }));
  const model =
    kind === 'anthropic'
      ? resolveModel('anthropic:claude-sonnet-4-5', {
          ANTHROPIC_API_KEY: 'sk-ant-test',
          ANTHROPIC_BASE_URL: provider.baseURL,
          MODEL_MAX_RETRIES: '0',
        })
      : resolveModel('openai:gpt-4.1-mini', {
          OPENAI_API_KEY: 'sk-test',
          OPENAI_BASE_URL: provider.baseURL,
          MODEL_MAX_RETRIES: '0',
        });
  await model.generate({ prompt, tools: [weatherTool] });
  const body = provider.requests[0]!.body;
  await provider.close();
  provider = undefined;
  return body;
}

/** Chat Completions: an assistant message with tool_calls must be followed by a tool message for each id. */
function openaiUnanswered(body: any): string[] {
  const messages: any[] = body.messages;
  const missing: string[] = [];
  messages.forEach((message, index) => {
    if (message.role !== 'assistant' || !message.tool_calls) return;
    const open = new Set<string>(message.tool_calls.map((call: any) => call.id));
    for (let next = index + 1; messages[next]?.role === 'tool'; next++) open.delete(messages[next].tool_call_id);
    missing.push(...open);
  });
  return missing;
}

/**
 * Messages API: the message after an assistant message with tool_use blocks must be a user
 * message that begins with a tool_result block for each ("Did not find 1 tool_result block(s)
 * at the beginning of this message").
 */
function anthropicUnanswered(body: any): string[] {
  const messages: any[] = body.messages;
  const missing: string[] = [];
  messages.forEach((message, index) => {
    if (message.role !== 'assistant' || typeof message.content === 'string') return;
    const uses = message.content.filter((block: any) => block.type === 'tool_use').map((block: any) => block.id);
    if (uses.length === 0) return;
    const next = messages[index + 1];
    const leading: string[] = [];
    if (next?.role === 'user' && Array.isArray(next.content)) {
      for (const block of next.content) {
        if (block.type !== 'tool_result') break;
        leading.push(block.tool_use_id);
      }
    }
    missing.push(...uses.filter((id: string) => !leading.includes(id)));
  });
  return missing;
}

/** Every tool_use id and tool_result tool_use_id of a Messages request body. */
const anthropicIds = (body: any): string[] =>
  body.messages.flatMap((message: any) =>
    typeof message.content === 'string'
      ? []
      : message.content.flatMap((block: any) =>
          block.type === 'tool_use' ? [block.id] : block.type === 'tool_result' ? [block.tool_use_id] : [],
        ),
  );

/** Every tool call id of a Chat Completions request body. */
const openaiIds = (body: any): string[] =>
  body.messages.flatMap((message: any) => [
    ...(message.tool_calls ?? []).map((call: any) => call.id),
    ...(message.tool_call_id ? [message.tool_call_id] : []),
  ]);

/**
 * The Messages API refuses a text block that is empty ("text content blocks must be non-empty"),
 * one of only whitespace ("text content blocks must contain non-whitespace text"), also inside a
 * tool_result (its string content one text block; an empty one is no block), and a message
 * without content ("all messages must have non-empty content except for the optional final
 * assistant message").
 */
function refusedTextBlocks(body: any): string[] {
  const refused: string[] = [];
  body.messages.forEach((message: any, index: number) => {
    const blocks = typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content;
    if (blocks.length === 0) refused.push(`messages.${index}: no content`);
    for (const block of blocks) {
      if (block.type === 'text' && block.text.trim() === '') refused.push(`messages.${index}: blank text`);
      const text = block.type === 'tool_result' && typeof block.content === 'string' ? block.content : '';
      if (text !== '' && text.trim() === '') refused.push(`messages.${index}: blank tool_result text`);
      const inner = block.type === 'tool_result' && Array.isArray(block.content) ? block.content : [];
      for (const part of inner)
        if (part.type === 'text' && part.text.trim() === '') refused.push(`messages.${index}: blank tool_result text`);
    }
  });
  return refused;
}

// The Messages API: "tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'".
const ANTHROPIC_ID = /^[a-zA-Z0-9_-]+$/;
// Chat Completions: "Invalid 'messages[N].tool_calls[0].id': string too long. Expected ... maximum length 40".
const OPENAI_MAX_ID = 40;

const call = (id: string): PromptItem => ({
  type: 'function_call',
  call_id: id,
  name: 'get_weather',
  arguments: '{"location":"Paris"}',
});
const output = (id: string, text: string): PromptItem => ({ type: 'function_call_output', call_id: id, output: text });
const user = (text: string): PromptItem => ({ type: 'message', role: 'user', content: text });
const assistant = (text: string): PromptItem => ({ type: 'message', role: 'assistant', content: text });

describe('a function_call_output that does not directly follow its call', () => {
  // The model made two calls; the client answered call_b a turn later (a call stays open until
  // answered, lib/session/log/open-calls.ts), and every later turn sends this history again.
  const lateAnswer = [
    user('Weather in Paris and Rome?'),
    call('call_a'),
    call('call_b'),
    output('call_a', '18C'),
    assistant('Rome is still loading.'),
    output('call_b', '25C'),
    user('Thanks'),
  ];
  // One turn's input: a user message, then the output of the open call.
  const noteFirst = [user('Weather in Paris?'), call('call_a'), user('(slow tool)'), output('call_a', '18C')];

  it('openai: each tool call answered by the tool messages right after it, a late output as text', async () => {
    for (const prompt of [lateAnswer, noteFirst]) {
      const body = await sentBody('openai', prompt);
      expect(openaiUnanswered(body)).toEqual([]);
      expect(JSON.stringify(body.messages)).toContain(prompt === lateAnswer ? '25C' : '18C');
    }
  });

  it('anthropic: every tool_use is answered by tool_result blocks opening the next message', async () => {
    for (const prompt of [lateAnswer, noteFirst]) {
      const body = await sentBody('anthropic', prompt);
      expect(anthropicUnanswered(body)).toEqual([]);
      expect(JSON.stringify(body.messages)).toContain(prompt === lateAnswer ? '25C' : '18C');
    }
  });

  it('sends the history before the late output as it sent it before the output came (a stable prefix)', async () => {
    // The cache breakpoints move to the prompt's end; the content before them is what the cache matches.
    const unmarked = (messages: unknown[]) =>
      JSON.stringify(messages, (key, value) => (key === 'cache_control' ? undefined : value));
    const before = (await sentBody('anthropic', lateAnswer.slice(0, 5))).messages;
    const after = (await sentBody('anthropic', lateAnswer)).messages;
    expect(unmarked(after.slice(0, before.length))).toEqual(unmarked(before));
  });
});

describe('call ids the providers refuse', () => {
  it('anthropic: a call_id with "." or ":" (Kimi K2 style) is sent as a valid tool_use id', async () => {
    const ids = anthropicIds(await sentBody('anthropic', toolLoopPrompt('functions.get_weather:0')));
    expect(ids).toHaveLength(2);
    for (const id of ids) expect(id).toMatch(ANTHROPIC_ID);
    expect(ids[0]).toBe(ids[1]);
  });

  it('openai: a call_id over 40 characters ("call_" + a UUID) is sent within 40, with its output', async () => {
    const ids = openaiIds(await sentBody('openai', toolLoopPrompt('call_0b9f3c1e-6a0e-4f4e-9d41-2f6f3b8a7c55')));
    expect(ids).toHaveLength(2);
    for (const id of ids) expect(id.length).toBeLessThanOrEqual(OPENAI_MAX_ID);
    expect(ids[0]).toBe(ids[1]);
  });

  it('two ids cleaned alike stay apart, and an id a provider takes is sent as it is', async () => {
    const prompt = [
      user('Weather?'),
      call('a.b'),
      call('a:b'),
      call('plain_id'),
      output('a.b', '1'),
      output('a:b', '2'),
      output('plain_id', '3'),
    ];
    const ids = anthropicIds(await sentBody('anthropic', prompt));
    expect(new Set(ids.slice(0, 3)).size).toBe(3);
    expect(ids[2]).toBe('plain_id');
    expect(ids.slice(3)).toEqual(ids.slice(0, 3));
  });

  it("a workers-ai model's call can be sent to anthropic and openai (a session's model may change)", async () => {
    const binding = fakeAiBinding(() => JSON.parse(fixture('workers-ai-tool-call.json')));
    const workersAi = resolveModel('workers-ai:@cf/meta/llama-3.3-70b-instruct-fp8-fast', {
      AI: binding,
      MODEL_MAX_RETRIES: '0',
    });
    const result = await workersAi.generate({ prompt: [user('Weather in Austin?')], tools: [weatherTool] });
    const made = result.output[0]!;
    if (made.type !== 'function_call') throw new Error('expected a call');
    const prompt: PromptItem[] = [user('Weather in Austin?'), made, output(made.call_id, 'hot'), user('And tomorrow?')];
    for (const id of anthropicIds(await sentBody('anthropic', prompt))) expect(id).toMatch(ANTHROPIC_ID);
    for (const id of openaiIds(await sentBody('openai', prompt))) expect(id.length).toBeLessThanOrEqual(OPENAI_MAX_ID);
  });
});

describe('text blocks the Messages API refuses', () => {
  it('an empty user message (accepted as turn input) is not sent as an empty text block', async () => {
    const body = await sentBody('anthropic', [
      user('Hello'),
      assistant('Hi.'),
      user(''),
      assistant('Anything else?'),
      {
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_text', text: ' ' },
          { type: 'input_text', text: 'No' },
        ],
      },
    ]);
    expect(refusedTextBlocks(body)).toEqual([]);
    expect(JSON.stringify(body.messages)).toContain('No');
  });

  it('a whitespace-only assistant answer stored by an earlier turn is not sent as the only text', async () => {
    const body = await sentBody('anthropic', [user('Hello'), assistant('\n\n'), user('Are you there?')]);
    expect(refusedTextBlocks(body)).toEqual([]);
  });

  it("a tool output's blank text parts (a screenshot tool's empty caption) are not sent as text blocks", async () => {
    const image = { type: 'input_image', image_url: 'https://example.com/screen.png' } as const;
    const outputs: PromptItem[] = [
      { type: 'function_call_output', call_id: 'toolu_a', output: [{ type: 'input_text', text: '' }, image] },
      {
        type: 'function_call_output',
        call_id: 'toolu_b',
        output: [
          { type: 'input_text', text: ' ' },
          { type: 'input_text', text: 'done' },
        ],
      },
      { type: 'function_call_output', call_id: 'toolu_c', output: [{ type: 'input_text', text: '' }] },
      { type: 'function_call_output', call_id: 'toolu_d', output: ' \n' },
      { type: 'function_call_output', call_id: 'toolu_e', output: [{ type: 'input_text', text: ' ' }] },
    ];
    const body = await sentBody('anthropic', [
      user('Look'),
      call('toolu_a'),
      call('toolu_b'),
      call('toolu_c'),
      call('toolu_d'),
      call('toolu_e'),
      ...outputs,
    ]);
    expect(refusedTextBlocks(body)).toEqual([]);
    expect(body.messages.at(-1).content.map((block: any) => block.content)).toEqual([
      [{ type: 'image', source: { type: 'url', url: 'https://example.com/screen.png' } }],
      [{ type: 'text', text: 'done' }],
      '',
      '',
      '',
    ]);
  });
});
