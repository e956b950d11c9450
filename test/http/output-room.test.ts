import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { FALLBACK_RESPONSE_RESERVE, resolveTokenBudget } from '../../lib/tokens/model-limits.ts';
import { countPromptTokens } from '../../lib/tokens/token-counter.ts';
import { type FakeProvider, fixture, startFakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { createClient, TOKEN } from './http-suite.ts';

/**
 * A backend refuses a request whose prompt and asked output exceed what it takes: vLLM a prompt
 * and `max_tokens` over its `max_model_len` (its tokenizer counting the prompt, here o200k), OpenAI
 * a `max_completion_tokens` over the model's most output (gpt-4o's 16,384, gpt-4.1's 32,768).
 */

const MAX_MODEL_LEN = 32_768;
const OUTPUT_CAPS: Record<string, number> = { 'gpt-4o': 16_384, 'gpt-4.1': 32_768 };

/** The prompt's tokens as the backend counts them: its messages' and tools' text, 4 a message. */
function backendTokens(body: any): number {
  const text = body.messages.map((message: any) =>
    [
      message.role,
      typeof message.content === 'string' ? message.content : (message.content ?? []).map((part: any) => part.text),
      (message.tool_calls ?? []).map((call: any) => call.function.name + call.function.arguments),
    ].join('\n'),
  );
  return countTokens([...text, JSON.stringify(body.tools ?? [])].join('\n')) + 4 * body.messages.length;
}

/** What each request asked: the backend's prompt tokens and the output asked for (none: undefined). */
const seen: { model: string; prompt: number; asked: number | undefined }[] = [];
let provider: FakeProvider;
let calls = 0;
beforeAll(async () => {
  provider = await startFakeProvider(({ body }) => {
    const prompt = backendTokens(body);
    const asked: number | undefined = body.max_completion_tokens ?? body.max_tokens;
    seen.push({ model: body.model, prompt, asked });
    const cap = OUTPUT_CAPS[body.model];
    if (cap !== undefined && asked !== undefined && asked > cap) {
      const message =
        `max_tokens is too large: ${asked}. This model supports at most ${cap} completion tokens, ` +
        `whereas you provided ${asked}.`;
      return {
        status: 400,
        json: { error: { message, type: 'invalid_request_error', param: 'max_tokens', code: null } },
      };
    }
    if (cap === undefined && prompt + (asked ?? 1) > MAX_MODEL_LEN) {
      const completion = asked ?? 1;
      const message =
        `This model's maximum context length is ${MAX_MODEL_LEN} tokens. However, you requested ` +
        `${prompt + completion} tokens (${prompt} in the messages, ${completion} in the completion). ` +
        'Please reduce the length of the messages or completion.';
      return { status: 400, json: { object: 'error', message, type: 'BadRequestError', param: null, code: 400 } };
    }
    if (!body.tools) return { json: JSON.parse(fixture('openai-chat-text.json')) };
    const reply = JSON.parse(fixture('openai-chat-tool-call.json'));
    reply.choices[0].message.tool_calls[0].id = `call_${++calls}`;
    return { json: reply };
  });
});
afterAll(() => provider.close());
beforeEach(() => {
  seen.length = 0;
});

const store = new MemoryStore();
const app = createApp({ store: () => store, readEnvironment: (c) => c.env ?? {}, log: () => undefined });
const environment = () => ({
  API_TOKEN: TOKEN,
  OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
  OPENAI_BASE_URL: provider.baseURL,
  OPENAI_API_KEY: 'sk-test',
  MODEL_MAX_RETRIES: '0',
});
const api = createClient({
  fetch: async (path, init) => app.request(path, init, environment()),
  fetchWithEnv: async (overrides, path, init) => app.request(path, init, { ...environment(), ...overrides }),
  store,
  keyPrefix: '',
  logged: [],
});

/** A tool's output of 30 lines of English: about 2,900 characters. */
const toolOutput = (index: number) =>
  Array.from(
    { length: 30 },
    (_, line) => `Report ${index} says line ${line} of the module reads well and passes.`,
  ).join('\n');

const TOOLS = [
  { type: 'function', name: 'get_current_weather', parameters: { type: 'object', properties: { location: {} } } },
];

describe('openai-compatible: a request fits max_model_len with the output it asks for', () => {
  it('a long tool session asking for max_output_tokens, compacted near the window', async () => {
    const id = await api.session({
      model: 'openai-compatible:qwen',
      strategies: ['shorten_tools_epoch_increment', 'compact', 'inbox'],
      strategy_config: { context_limit: MAX_MODEL_LEN },
      tools: TOOLS,
    });
    let turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'Read the reports', max_output_tokens: 3000 });
    // Until a compaction moved the context start, or a turn failed.
    for (let index = 0; index < 120 && turn.status === 200 && !turn.body.context.context_start_seq; index++) {
      const call = turn.body.output.find((item: { type: string }) => item.type === 'function_call');
      turn = await api.post(`/v1/sessions/${id}/turns`, {
        input: [{ type: 'function_call_output', call_id: call.call_id, output: toolOutput(index) }],
        max_output_tokens: 3000,
      });
    }
    expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    expect(turn.body.context.context_start_seq).toBeGreaterThan(1);
    const turns = seen.filter((request) => request.asked === 3000);
    expect(Math.max(...turns.map((request) => request.prompt + 3000))).toBeGreaterThan(MAX_MODEL_LEN * 0.6);
  });

  it('a stateless compaction of a long conversation asks for no more than the window leaves its summary', async () => {
    // A transcript the window leaves less than a summary's cap (FALLBACK_RESPONSE_RESERVE), its
    // backend count and that cap together over max_model_len.
    const input = Array.from({ length: 523 }, () => ({
      role: 'user',
      content: 'The module reads well and the tests pass again after the change. '.repeat(4),
    }));
    const compacted = await app.request(
      '/v1/responses/compact',
      {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'openai-compatible:qwen', input }),
      },
      { ...environment(), CONTEXT_LIMIT: String(MAX_MODEL_LEN) },
    );
    const [request] = provider.requests.slice(-1).map((each) => each.body);
    const counter = resolveTokenBudget('openai-compatible:qwen', { context_limit: 0, response_reserve: 0 }).counter;
    const sent = request.messages.map((message: { role: 'system' | 'user'; content: string }) => ({
      type: 'message' as const,
      role: message.role,
      content: message.content,
    }));
    const estimate = countPromptTokens(sent, [], counter);
    expect(MAX_MODEL_LEN - estimate).toBeLessThan(FALLBACK_RESPONSE_RESERVE);
    expect(MAX_MODEL_LEN - estimate).toBeGreaterThan(0);
    expect(compacted.status, await compacted.text()).toBe(200);
    expect(request.max_tokens).toBeLessThanOrEqual(MAX_MODEL_LEN - estimate);
  });
});

describe("openai: a summary asks for no more than the model's most output", () => {
  // A turn asks for no output limit unless the client sets one; a summary asks for its cap, 15%
  // of the prompt limit (gpt-4o's 16,742, gpt-4.1's 152,221), held to the model's response reserve.
  it.each(Object.keys(OUTPUT_CAPS))('%s', async (name) => {
    const id = await api.session({ model: `openai:${name}` });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'Plan the trip' })).status).toBe(200);
    const compacted = await api.post(`/v1/sessions/${id}/compact`, { keep_tokens: 0 });
    expect(compacted.status, JSON.stringify(compacted.body)).toBe(200);
    expect(seen.at(0)!.asked).toBeUndefined();
    expect(seen.at(-1)!.asked).toBeLessThanOrEqual(OUTPUT_CAPS[name]!);
  });

  // A session's own `response_reserve` over the model's most output (a larger share of gpt-4.1's
  // window kept free) leaves the summary's call within that most output all the same.
  it('gpt-4.1 with a response_reserve of 40000', async () => {
    const id = await api.session({ model: 'openai:gpt-4.1', strategy_config: { response_reserve: 40_000 } });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'Plan the trip' })).status).toBe(200);
    const compacted = await api.post(`/v1/sessions/${id}/compact`, { keep_tokens: 0 });
    expect(compacted.status, JSON.stringify(compacted.body)).toBe(200);
    expect(seen.at(-1)!.asked).toBeLessThanOrEqual(OUTPUT_CAPS['gpt-4.1']!);
  });

  // A summary model of another family than the conversation's asks for no more than its own most output.
  it('gpt-4o summarizing a gpt-4.1 conversation', async () => {
    const id = await api.session({ model: 'openai:gpt-4.1' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'Plan the trip' })).status).toBe(200);
    const compacted = await app.request(
      `/v1/sessions/${id}/compact`,
      {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ keep_tokens: 0 }),
      },
      { ...environment(), SUMMARY_MODEL: 'openai:gpt-4o' },
    );
    expect(compacted.status, await compacted.text()).toBe(200);
    expect(seen.at(-1)!.model).toBe('gpt-4o');
    expect(seen.at(-1)!.asked).toBeLessThanOrEqual(OUTPUT_CAPS['gpt-4o']!);
  });
});
