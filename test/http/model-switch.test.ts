import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { replayAnthropicCache } from '../support/fake-providers/anthropic-cache.ts';
import {
  startStrictAnthropic,
  startStrictOpenAI,
  type StrictProvider,
} from '../support/fake-providers/strict-providers.ts';
import { dataUrl, pdfBytes, pngBytes } from '../support/media-fixtures.ts';
import { createClient, facadeClient } from './http-suite.ts';

// One session that switches models as an agent does (a cheap model for routine steps, a strong
// one for hard ones, another backend after an outage), against fake providers that refuse with
// the providers' own 400 what the real ones refuse: every request each one got is accepted.

let anthropic: StrictProvider;
let openai: StrictProvider;
let compatible: StrictProvider;

beforeAll(async () => {
  anthropic = await startStrictAnthropic();
  openai = await startStrictOpenAI((n, index) => `call_${n}${'ab'[index]}`);
  compatible = await startStrictOpenAI((n, index) => `functions.get_weather:${n * 10 + index}`, true);
});

afterAll(async () => {
  await Promise.all([anthropic?.close(), openai?.close(), compatible?.close()]);
});

const harness = () =>
  appHarness(new MemoryStore(), {
    API_TOKEN: 'test-token',
    OPENAI_API_KEY: 'sk-test',
    OPENAI_BASE_URL: openai.baseURL,
    OPENAI_COMPATIBLE_BASE_URL: compatible.baseURL,
    OPENAI_COMPATIBLE_IMAGES: 'true',
    ANTHROPIC_API_KEY: 'sk-ant-test',
    ANTHROPIC_BASE_URL: anthropic.baseURL,
    MODEL_MAX_RETRIES: '0',
  });

const weather = {
  type: 'function' as const,
  name: 'get_weather',
  description: 'Current weather',
  strict: false,
  parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
};
const GPT = 'openai:gpt-4.1-mini';
const CLAUDE = 'anthropic:claude-sonnet-4-5';
const KIMI = 'openai-compatible:kimi-k2';
const screenshot = dataUrl('image/png', pngBytes(64, 48));

/** Every request of every fake, with its refusal: none is refused. */
function refusals(): string[] {
  return [anthropic, openai, compatible].flatMap((provider) =>
    provider.refusals.flatMap((refusal, index) => (refusal ? [`${provider.requests[index]!.path}: ${refusal}`] : [])),
  );
}

const outputs = (calls: { call_id: string }[], text: (index: number) => unknown) =>
  calls.map((call, index) => ({ type: 'function_call_output', call_id: call.call_id, output: text(index) }));
const callsOf = (output: any[]) => output.filter((item) => item.type === 'function_call');

/** What a fake answers `body` (Anthropic's `/v1/messages`, else Chat Completions). */
async function send(provider: StrictProvider, body: unknown): Promise<{ status: number; message: string }> {
  const path = provider === anthropic ? '/messages' : '/chat/completions';
  const response = await fetch(`${provider.baseURL}${path}`, { method: 'POST', body: JSON.stringify(body) });
  const answer = (await response.json()) as any;
  return { status: response.status, message: answer.error?.message ?? '' };
}

describe('the fake providers refuse what the real ones refuse', () => {
  const use = (id: string) => ({ type: 'tool_use', id, name: 'get_weather', input: {} });
  const result = (id: string) => ({ type: 'tool_result', tool_use_id: id, content: 'ok' });
  const user = (...content: unknown[]) => ({ role: 'user', content });
  const assistant = (...content: unknown[]) => ({ role: 'assistant', content });
  const png = (media_type: string) => ({ type: 'image', source: { type: 'base64', media_type, data: 'AA==' } });

  it('anthropic: ids, result placement, unanswered calls, foreign signatures, blank text, media types', async () => {
    const refused: [unknown[], string, unknown?][] = [
      [[user({ type: 'text', text: 'hi' }), assistant(use('a.b')), user(result('a.b'))], 'String should match pattern'],
      [
        [user({ type: 'text', text: 'hi' }), assistant(use('a')), user({ type: 'text', text: 'x' }), user(result('a'))],
        'without `tool_result`',
      ],
      [
        [user({ type: 'text', text: 'hi' }), assistant({ type: 'text', text: 'x' }), user(result('a'))],
        'unexpected `tool_use_id`',
      ],
      [
        [user({ type: 'text', text: 'hi' }), assistant(use('a')), user({ type: 'text', text: 'go' })],
        'without `tool_result`',
      ],
      [
        [
          user({ type: 'text', text: 'hi' }),
          assistant({ type: 'thinking', thinking: 't', signature: 'EqQB' }, use('a')),
          user(result('a')),
        ],
        'Invalid `signature`',
      ],
      [[user({ type: 'text', text: ' ' })], 'non-whitespace text'],
      [
        [user({ type: 'text', text: 'hi' }), assistant(use('a')), user({ ...result('a'), content: ' ' })],
        'non-whitespace',
      ],
      [[user(png('image/bmp'))], "Input should be 'image/jpeg'"],
      [
        [
          user({ type: 'text', text: 'hi' }),
          assistant(use('a')),
          user({ ...result('a'), content: [png('image/svg+xml')] }),
        ],
        "Input should be 'image/jpeg'",
      ],
      [
        [user({ type: 'text', text: 'hi' }), assistant(use('a')), user(result('a'))],
        'must start with a thinking block',
        { type: 'enabled', budget_tokens: 1024 },
      ],
    ];
    for (const [messages, message, thinking] of refused) {
      const answer = await send(anthropic, {
        model: 'claude',
        max_tokens: 10,
        messages,
        ...(thinking ? { thinking } : {}),
      });
      expect(answer.status, JSON.stringify(messages)).toBe(400);
      expect(answer.message).toContain(message);
    }
    const accepted = await send(anthropic, { model: 'claude', max_tokens: 10, messages: [user(png('image/png'))] });
    expect(accepted.status).toBe(200);
  });

  it('openai: unanswered tool_calls, a stray tool message, content part types, more than 128 tools', async () => {
    const call = (id: string) => ({ id, type: 'function', function: { name: 'get_weather', arguments: '{}' } });
    const tool = { type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } };
    const hi = { role: 'user', content: 'hi' };
    const refused: [unknown, string][] = [
      [
        {
          messages: [
            hi,
            { role: 'assistant', tool_calls: [call('a'), call('b')] },
            { role: 'tool', tool_call_id: 'a', content: 'x' },
          ],
        },
        'did not have response messages: b',
      ],
      [
        { messages: [hi, { role: 'tool', tool_call_id: 'a', content: 'x' }] },
        "messages with role 'tool' must be a response",
      ],
      [
        {
          messages: [
            hi,
            { role: 'assistant', tool_calls: [call('a')] },
            { role: 'tool', tool_call_id: 'a', content: [{ type: 'image_url', image_url: { url: 'x' } }] },
          ],
        },
        "Invalid value: 'image_url'",
      ],
      [{ messages: [{ role: 'user', content: [{ type: 'input_text', text: 'hi' }] }] }, "Invalid value: 'input_text'"],
      [{ messages: [hi], tools: Array.from({ length: 129 }, () => tool) }, 'maximum length 128'],
    ];
    for (const [body, message] of refused) {
      const answer = await send(openai, { model: 'gpt', ...(body as object) });
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(answer.message).toContain(message);
    }
    expect((await send(openai, { model: 'gpt', messages: [hi], tools: [tool] })).status).toBe(200);
  });
});

/** Each test counts its own requests: the fakes forget those (and refusals) of the tests before. */
function forgetRequests(): void {
  for (const provider of [anthropic, openai, compatible]) {
    provider.requests.length = 0;
    provider.refusals.length = 0;
  }
}

describe('a session switching models OpenAI -> Anthropic -> OpenAI -> openai-compatible -> Anthropic', () => {
  it('sends every provider only requests it accepts, and keeps the stored history as it was', async () => {
    // Only this session's requests count (the fakes' own checks above sent others).
    forgetRequests();
    const h = harness();
    const api = createClient(h);
    const client = facadeClient(h);
    const id = await api.session({
      model: GPT,
      tools: [weather],
      instructions: 'You are a weather agent.',
      strategy_config: {
        epoch_tool_call_threshold: 2,
        epoch_full_tool_calls: 1,
        epoch_compacted_tool_calls: 2,
        epoch_size: 1,
      },
    });
    const contexts: { compacted: number; dropped: number; kept_full: number }[] = [];
    const turn = async (body: Record<string, unknown>) => {
      const response = await api.post(`/v1/sessions/${id}/turns`, body);
      expect(
        response.status,
        `${JSON.stringify(body).slice(0, 200)}: ${JSON.stringify(response.body)}\n${refusals().join('\n')}`,
      ).toBe(200);
      contexts.push(response.body.context);
      return response.body;
    };

    // 1. OpenAI: two parallel calls.
    const first = await turn({ input: 'Weather in Paris and Rome?' });
    const openaiCalls = callsOf(first.output);
    expect(openaiCalls).toHaveLength(2);
    const itemsAfterFirst = (await api.get(`/v1/sessions/${id}/items`)).body.items;

    // 2. Anthropic with thinking, through the facade: the OpenAI calls' outputs, one a screenshot.
    const second = await client.responses.create({
      model: CLAUDE,
      conversation: id,
      reasoning: { effort: 'medium' },
      tools: [weather],
      input: outputs(openaiCalls, (index) =>
        index === 0
          ? [
              { type: 'input_text', text: '18C' },
              { type: 'input_image', image_url: screenshot, detail: 'auto' },
            ]
          : '25C',
      ) as any,
    });
    expect(second.status).toBe('completed');

    // 3. Anthropic again, streamed: thinking and two parallel calls.
    const stream = client.responses.stream({
      model: CLAUDE,
      conversation: id,
      reasoning: { effort: 'medium' },
      tools: [weather],
      input: 'Now Berlin and Oslo?',
    });
    for await (const _event of stream);
    const third = await stream.finalResponse();
    const claudeCalls = callsOf(third.output);
    expect(claudeCalls).toHaveLength(2);
    expect(third.output.some((item) => item.type === 'reasoning')).toBe(true);

    // 4. OpenAI: one Claude call answered, the other left open as the user moves on.
    const fourth = await turn({
      model: GPT,
      input: [
        outputs(claudeCalls.slice(0, 1), () => '12C')[0],
        { type: 'message', role: 'user', content: 'Never mind Oslo. Madrid and Lisbon?' },
      ],
    });
    const gptCalls = callsOf(fourth.output);
    expect(gptCalls).toHaveLength(2);

    // 5. openai-compatible (Kimi-style ids, reasoning_content): answers, then two calls of its own.
    await turn({ model: KIMI, input: outputs(gptCalls, (index) => `${30 + index}C`) });
    // Routine steps on the cheap model: more tool rounds for the default strategies to shorten.
    for (const city of ['Bern', 'Riga', 'Kyiv']) {
      const routine = await turn({ model: GPT, input: `And ${city}?` });
      await turn({ model: GPT, input: outputs(callsOf(routine.output), () => `${city}: ${'mild '.repeat(40)}`) });
    }
    const kimi = await turn({ model: KIMI, input: 'And Vienna and Prague?' });
    const kimiCalls = callsOf(kimi.output);
    expect(kimiCalls.map((call) => call.call_id)).toEqual([expect.stringContaining('functions.'), expect.any(String)]);

    // The late output of the call left open at step 4.
    const late = await api.post(`/v1/sessions/${id}/items`, { items: outputs(claudeCalls.slice(1), () => '3C') });
    expect(late.status, JSON.stringify(late.body)).toBe(201);

    // 6. A compaction made by openai-compatible, continued by Anthropic.
    const compacted = await api.post(`/v1/sessions/${id}/compact`, { model: KIMI, keep_tokens: 600 });
    expect(compacted.status, JSON.stringify(compacted.body)).toBe(200);

    // 7. Anthropic after the switch back: native, native streamed, then the facade, as a client mixes them.
    const before = anthropic.requests.length;
    await turn({
      model: CLAUDE,
      input: outputs(kimiCalls, (index) =>
        index === 0
          ? [
              { type: 'input_image', image_url: screenshot },
              { type: 'input_text', text: '' },
              { type: 'input_file', filename: 'report.pdf', file_data: dataUrl('application/pdf', pdfBytes()) },
            ]
          : '',
      ),
    });
    const streamed = await api.post(`/v1/sessions/${id}/turns`, { model: CLAUDE, input: 'Go on.', stream: true });
    expect(streamed.status).toBe(200);
    await client.responses.create({ model: CLAUDE, conversation: id, tools: [weather], input: 'And then.' });
    // 8. Anthropic with thinking through the facade, twice: a tool loop.
    const seventh = await client.responses.create({
      model: CLAUDE,
      conversation: id,
      reasoning: { effort: 'medium' },
      tools: [weather],
      input: 'Finally Athens and Sofia?',
    });
    const eighth = await client.responses.create({
      model: CLAUDE,
      conversation: id,
      reasoning: { effort: 'medium' },
      tools: [weather],
      input: outputs(callsOf(seventh.output), (index) => `${20 + index}C`) as any,
    });
    expect(eighth.status).toBe('completed');
    // 9. Back to OpenAI for the last word, with the Anthropic thinking and a PDF in the history.
    await turn({ model: GPT, input: 'Thanks, summarize.' });

    expect(refusals()).toEqual([]);
    // The default strategies shortened old tool items on the way.
    expect(contexts.some((context) => context.compacted + context.dropped > 0)).toBe(true);
    expect(openai.requests.length).toBeGreaterThanOrEqual(2);
    expect(compatible.requests.length).toBeGreaterThanOrEqual(3);

    // After the switch back, each Anthropic request reads the one before it from the cache (but
    // where thinking is turned on, which Anthropic documents as ending the messages' cache).
    const bodies = anthropic.requests.slice(before).map((request) => request.body);
    const cache = replayAnthropicCache(bodies);
    expect(bodies.map((body) => body.thinking !== undefined)).toEqual([false, false, false, true, true]);
    for (const index of [1, 2, 4])
      expect(cache.readBlocks[index], `request ${index}: ${JSON.stringify(cache)}`).toBeGreaterThanOrEqual(
        cache.blocks[index - 1]! - 1,
      );

    // The stored history: the items of the first turn unchanged, every call id as its provider made it.
    const items = (await api.get(`/v1/sessions/${id}/items?limit=100`)).body.items;
    const bySeq = new Map(items.map((item: any) => [item.seq, item]));
    for (const item of itemsAfterFirst) expect(bySeq.get(item.seq)).toEqual(item);
    const storedIds = items.filter((item: any) => item.type === 'function_call').map((item: any) => item.call_id);
    for (const call of [...openaiCalls, ...claudeCalls, ...gptCalls, ...kimiCalls])
      expect(storedIds).toContain(call.call_id);
  });
});

describe('a turn a provider would refuse whatever the history', () => {
  it('offering an OpenAI model more than its 128 tools is refused before any call, naming the tools', async () => {
    const api = createClient(harness());
    const tools = Array.from({ length: 129 }, (_, index) => ({ ...weather, name: `tool_${index}` }));
    // (A session of GPT's with them is refused at its create: docs/API.md, "Sessions".)
    const id = await api.session({ model: CLAUDE, tools });
    const sent = openai.requests.length;
    const refused = await api.post(`/v1/sessions/${id}/turns`, { model: GPT, input: 'Weather?' });
    expect(refused.status, JSON.stringify(refused.body)).toBe(400);
    expect(refused.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'tools' } });
    expect(openai.requests.length).toBe(sent);
    // Anthropic takes them (an openai-compatible server's limit is its own: they are sent).
    const answered = await api.post(`/v1/sessions/${id}/turns`, { input: 'Weather.' });
    expect(answered.status, JSON.stringify(answered.body)).toBe(200);
  });
});

describe('a tool loop handed from one family to another mid-way', () => {
  it("continues on Anthropic with thinking a loop whose calls carry another provider's reasoning", async () => {
    forgetRequests();
    const client = facadeClient(harness());
    const options = { tools: [weather], reasoning: { effort: 'medium' as const } };
    const started = await client.responses.create({ model: KIMI, ...options, input: 'Weather in Oslo?' });
    expect(started.output.map((item) => item.type)).toEqual(['reasoning', 'function_call', 'function_call']);
    const handed = await client.responses.create({
      model: CLAUDE,
      ...options,
      previous_response_id: started.id,
      input: outputs(callsOf(started.output), () => '4C') as any,
    });
    expect(handed.status).toBe('completed');
    // And back: Claude's thinking and calls, answered on OpenAI, then on openai-compatible.
    const thought = await client.responses.create({
      model: CLAUDE,
      ...options,
      previous_response_id: handed.id,
      input: 'And Bergen?',
    });
    const answered = outputs(callsOf(thought.output), () => '6C') as any;
    const back = await client.responses.create({
      model: GPT,
      ...options,
      previous_response_id: thought.id,
      input: answered,
    });
    await client.responses.create({ model: KIMI, ...options, previous_response_id: back.id, input: 'Thanks.' });
    expect(refusals()).toEqual([]);
    // Thinking goes off where the loop's last answer has no Anthropic thinking, on for a new question.
    expect(anthropic.requests.map((request) => request.body.thinking?.type)).toEqual([undefined, 'enabled']);
  });
});

describe('compactions made by one family and continued by another', () => {
  it('the compact strategy and the facade compaction, across OpenAI, Anthropic and openai-compatible', async () => {
    forgetRequests();
    const h = harness();
    const api = createClient(h);
    const client = facadeClient(h);
    const id = await api.session({
      model: GPT,
      tools: [weather],
      strategies: ['shorten_tools_epoch_increment', 'compact', 'shorten_images', 'inbox'],
      strategy_config: { context_limit: 1200, response_reserve: 200 },
    });
    const compactions: number[] = [];
    const ran: string[] = [];
    const models = [GPT, CLAUDE, KIMI, CLAUDE, GPT, KIMI, GPT, CLAUDE];
    for (const [index, model] of models.entries()) {
      const asked = await api.post(`/v1/sessions/${id}/turns`, {
        model,
        input: `Step ${index}: ${'details '.repeat(30)}, and the weather?`,
      });
      expect(asked.status, JSON.stringify(asked.body)).toBe(200);
      if (asked.body.compaction_usage) compactions.push(ran.length);
      ran.push(model);
      const calls = callsOf(asked.body.output);
      const next = models[index + 1] ?? CLAUDE;
      const answered = await api.post(`/v1/sessions/${id}/turns`, {
        model: next,
        input: outputs(calls, (call) => (call === 0 ? [{ type: 'input_image', image_url: screenshot }] : 'warm')),
      });
      expect(answered.status, JSON.stringify(answered.body)).toBe(200);
      if (answered.body.compaction_usage) compactions.push(ran.length);
      ran.push(next);
    }
    // Compactions made on the way (their summaries by the turn's model), each continued by other families.
    expect(compactions.length).toBeGreaterThan(0);
    expect(new Set(ran.slice(compactions[0]!)).size, `${compactions} ${ran}`).toBe(3);

    // The facade: a compaction Anthropic summarizes, continued by OpenAI and openai-compatible.
    const latest = await client.responses.create({ model: KIMI, conversation: id, input: 'Status.' });
    const compacted = await client.responses.compact({ model: CLAUDE, previous_response_id: latest.id });
    expect(compacted.output.map((item) => item.type)).toContain('compaction');
    const before = anthropic.requests.length;
    for (const model of [GPT, KIMI, CLAUDE]) {
      const continued = await client.responses.create({
        model,
        conversation: id,
        tools: [weather],
        input: 'Where now?',
      });
      expect(continued.status).toBe('completed');
    }
    expect(anthropic.requests.length).toBeGreaterThan(before);
    expect(refusals()).toEqual([]);
  });
});
