import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { costOf, DEFAULT_PRICES, priceTable, roundUsd, type ModelPrice } from '../../lib/ledger/prices.ts';
import { anthropicStreamOf } from '../support/fake-providers/anthropic-stream.ts';
import {
  fixture,
  startFakeProvider,
  type FakeProvider,
  type FakeReply,
  type RecordedRequest,
} from '../support/fake-providers/fake-provider-server.ts';
import { startTailgate } from '../openai/server.ts';
import { createClient, TOKEN } from './http-suite.ts';

// The operator's comparison: each fake provider counts every request's tokens by its own rules
// (Anthropic's cache: a prefix up to a cache_control breakpoint seen before is read, the rest up
// to the last breakpoint written; OpenAI's: the prefix shared with an earlier prompt, from 1,024
// tokens in 128-token steps) and keeps its bill, priced with tailgate's own table. What tailgate
// shows (receipts, session totals, a token's spend) must add up to it.

const PRICES = { 'anthropic:bill-model': { input: 3, cached_input: 0.3, cache_write: 3.75, output: 15 } };
const table = priceTable(JSON.stringify(PRICES));
const ANTHROPIC_PRICE = table['anthropic:bill-model'] as ModelPrice;
const OPENAI_PRICE = DEFAULT_PRICES['openai:gpt-4.1-mini'] as ModelPrice;

interface Billed {
  session: string | undefined;
  input_tokens: number;
  cached_input_tokens: number;
  cache_write_tokens: number;
  output_tokens: number;
  reasoning_tokens: number;
  cost_usd: number;
  /** How the request was answered: the whole answer, or broken off. */
  answered: 'whole' | 'broken' | 'started' | 'hung';
}

const tokensOf = (value: unknown) => Math.ceil(JSON.stringify(value).length / 4);

/** Anthropic's blocks in cache order, each with its tokens and whether it carries cache_control. */
function anthropicBlocks(body: any): { tokens: number; marked: boolean; key: string }[] {
  const blocks: { tokens: number; marked: boolean; key: string }[] = [];
  const add = (kind: string, block: any) => {
    const { cache_control: marked, ...content } = block;
    blocks.push({ tokens: tokensOf(content), marked: marked !== undefined, key: `${kind}:${JSON.stringify(content)}` });
  };
  for (const tool of body.tools ?? []) add('tool', tool);
  const system = typeof body.system === 'string' ? [{ type: 'text', text: body.system }] : (body.system ?? []);
  for (const block of system) add('system', block);
  for (const message of body.messages) {
    const content = typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content;
    for (const [index, block] of content.entries()) add(`${message.role}${index === 0 ? ' start' : ''}`, block);
  }
  return blocks;
}

/** A fake Anthropic: its cache, its bill, and what it answers. */
function anthropicFake() {
  const cache = new Set<string>();
  const bill: Billed[] = [];
  let plan: (request: RecordedRequest) => 'text' | 'tool' | 'broken' | 'started' | 'hang' = () => 'text';
  const usageOf = (body: any) => {
    const blocks = anthropicBlocks(body);
    const prefixes: string[] = [];
    for (const [index, block] of blocks.entries()) prefixes.push(`${prefixes[index - 1] ?? ''}\u0000${block.key}`);
    const marks = blocks.flatMap((block, index) => (block.marked ? [index] : []));
    let read = 0;
    for (const mark of marks)
      for (let end = mark; end >= Math.max(0, mark - 19); end--)
        if (cache.has(prefixes[end]!)) {
          read = Math.max(read, end + 1);
          break;
        }
    const last = marks.length > 0 ? marks[marks.length - 1]! + 1 : 0;
    for (const mark of marks) cache.add(prefixes[mark]!);
    const sum = (from: number, to: number) => blocks.slice(from, to).reduce((total, block) => total + block.tokens, 0);
    return {
      cache_read_input_tokens: sum(0, read),
      cache_creation_input_tokens: sum(read, Math.max(read, last)),
      input_tokens: sum(Math.max(read, last), blocks.length),
    };
  };
  const reply = (request: RecordedRequest): FakeReply => {
    if (!request.path.endsWith('/messages')) return { status: 404, json: {} };
    const kind = plan(request);
    const usage = usageOf(request.body);
    const message = JSON.parse(
      fixture(kind === 'tool' ? 'anthropic-message-tool-use.json' : 'anthropic-message-text.json'),
    );
    const output = message.usage.output_tokens as number;
    const input = usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens;
    const counted = { input, cached: usage.cache_read_input_tokens, written: usage.cache_creation_input_tokens };
    const entry = (answered: Billed['answered'], outputTokens: number): Billed => {
      const tokens = {
        input_tokens: counted.input,
        cached_input_tokens: counted.cached,
        cache_write_tokens: counted.written,
        output_tokens: outputTokens,
      };
      return {
        session: request.headers['x-bill-session'] as string | undefined,
        ...tokens,
        reasoning_tokens: 0,
        cost_usd: costOf(tokens, ANTHROPIC_PRICE)!,
        answered,
      };
    };
    const whole = { ...message, usage: { ...usage, output_tokens: output } };
    if (kind === 'hang') {
      bill.push(entry('hung', 0));
      return { hang: true };
    }
    if (kind === 'broken' || kind === 'started') {
      // message_start (input billed), the first text delta, then the stream fails in band
      // (broken) or stays open with no more (started): the provider bills the input and the one
      // output token it sent.
      const sse = anthropicStreamOf(JSON.stringify(whole));
      const events = sse
        .split(/(?<=\n\n)/)
        .slice(0, 3)
        .join('');
      bill.push(entry(kind, 1));
      if (kind === 'started') return { sse: events, hang: true };
      return {
        text: `${events}event: error\ndata: {"type":"error","error":{"type":"overloaded_error"}}\n\n`,
        contentType: 'text/event-stream',
      };
    }
    bill.push(entry('whole', output));
    if (request.body.stream) return { sse: anthropicStreamOf(JSON.stringify(whole)) };
    return { json: whole };
  };
  return {
    bill,
    reply,
    setPlan(next: typeof plan) {
      plan = next;
    },
  };
}

/** A fake OpenAI Chat Completions: prompt caching by shared prefix, and its bill. */
function openaiFake() {
  const seen: string[] = [];
  const bill: Billed[] = [];
  const reply = (request: RecordedRequest): FakeReply => {
    if (!request.path.endsWith('/chat/completions')) return { status: 404, json: {} };
    const prompt = JSON.stringify({ tools: request.body.tools, messages: request.body.messages });
    let shared = 0;
    for (const earlier of seen) {
      let length = 0;
      while (length < Math.min(earlier.length, prompt.length) && earlier[length] === prompt[length]) length++;
      shared = Math.max(shared, length);
    }
    seen.push(prompt);
    const promptTokens = Math.ceil(prompt.length / 4);
    const sharedTokens = Math.floor(shared / 4);
    const cached = sharedTokens < 1024 ? 0 : 1024 + Math.floor((sharedTokens - 1024) / 128) * 128;
    const usage = {
      prompt_tokens: promptTokens,
      completion_tokens: 40,
      total_tokens: promptTokens + 40,
      prompt_tokens_details: { cached_tokens: cached, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 12, audio_tokens: 0 },
    };
    const tokens = {
      input_tokens: promptTokens,
      cached_input_tokens: cached,
      cache_write_tokens: 0,
      output_tokens: 40,
    };
    bill.push({
      session: undefined,
      ...tokens,
      reasoning_tokens: 12,
      cost_usd: costOf(tokens, OPENAI_PRICE)!,
      answered: 'whole',
    });
    const json = JSON.parse(fixture('openai-chat-text.json'));
    if (!request.body.stream) return { json: { ...json, usage } };
    const events = fixture('openai-chat-text.sse')
      .split('\n\n')
      .map((event) => {
        if (!event.startsWith('data: {') || !event.includes('"choices":[]')) return event;
        return `data: ${JSON.stringify({ ...JSON.parse(event.slice(6)), usage })}`;
      });
    return { sse: events.join('\n\n') };
  };
  return { bill, reply };
}

const anthropic = anthropicFake();
const openai = openaiFake();
let anthropicServer: FakeProvider;
let openaiServer: FakeProvider;
let tailgate: Awaited<ReturnType<typeof startTailgate>>;
let origin: string;

beforeAll(async () => {
  anthropicServer = await startFakeProvider(anthropic.reply);
  openaiServer = await startFakeProvider(openai.reply);
  tailgate = await startTailgate(
    {
      API_TOKEN: TOKEN,
      ANTHROPIC_API_KEY: 'test-key',
      ANTHROPIC_BASE_URL: anthropicServer.baseURL,
      OPENAI_API_KEY: 'test-key',
      OPENAI_BASE_URL: openaiServer.baseURL,
      MODEL_MAX_RETRIES: '0',
      MODEL_PRICES: JSON.stringify(PRICES),
      DEFAULT_MODEL: 'anthropic:bill-model',
    },
    undefined,
    { logLine: () => {} },
  );
  origin = tailgate.baseURL.replace(/\/v1$/, '');
});

afterAll(async () => {
  await tailgate?.close();
  await anthropicServer?.close();
  await openaiServer?.close();
});

const api = createClient({
  fetch: (path, init) => fetch(`${origin}${path}`, init),
  fetchWithEnv: () => {
    throw new Error('not here');
  },
  store: undefined as never,
  keyPrefix: '',
  logged: [],
});

const sumOf = (entries: Billed[]) => ({
  input_tokens: entries.reduce((total, entry) => total + entry.input_tokens, 0),
  cached_input_tokens: entries.reduce((total, entry) => total + entry.cached_input_tokens, 0),
  cache_write_tokens: entries.reduce((total, entry) => total + entry.cache_write_tokens, 0),
  output_tokens: entries.reduce((total, entry) => total + entry.output_tokens, 0),
  reasoning_tokens: entries.reduce((total, entry) => total + entry.reasoning_tokens, 0),
  cost_usd: roundUsd(entries.reduce((total, entry) => total + entry.cost_usd, 0)),
});
const receiptOf = ({ answered: _answered, session: _session, ...usage }: Billed) => usage;

describe("tailgate's figures against the provider's bill", () => {
  it('a native Anthropic session: plain, streamed, tool loop, background, compaction, retry', async () => {
    const from = anthropic.bill.length;
    const id = await api.session({ model: 'anthropic:bill-model' });
    const tools = [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: {} } }];
    anthropic.setPlan((request) =>
      JSON.stringify(request.body.messages.at(-1)).includes('weather?') ? 'tool' : 'text',
    );
    const plain = await api.post(`/v1/sessions/${id}/turns`, { input: `hello ${'lorem ipsum '.repeat(400)}` });
    expect(plain.status, JSON.stringify(plain.body)).toBe(200);
    const streamed = await api.post(`/v1/sessions/${id}/turns`, { input: 'again', stream: true });
    expect(streamed.status).toBe(200);
    const called = await api.post(`/v1/sessions/${id}/turns`, { input: 'weather?', tools });
    expect(called.status, JSON.stringify(called.body)).toBe(200);
    const call = called.body.output.find((item: any) => item.type === 'function_call');
    const answered = await api.post(`/v1/sessions/${id}/turns`, {
      input: [{ type: 'function_call_output', call_id: call.call_id, output: '14 C' }],
      tools,
    });
    expect(answered.status, JSON.stringify(answered.body)).toBe(200);
    const background = await api.post(`/v1/sessions/${id}/turns`, { input: 'later', background: true });
    expect(background.status).toBe(202);
    let receipt: any;
    do {
      receipt = await api.get(`/v1/sessions/${id}/turns/${background.body.turn}`);
    } while (receipt.body.status === 'queued' || receipt.body.status === 'in_progress');
    expect(receipt.body.status).toBe('completed');
    const keyed = { 'idempotency-key': 'bill-retry-1' };
    const first = await api.post(`/v1/sessions/${id}/turns`, { input: 'once' }, keyed);
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: 'once' }, keyed);
    expect([first.status, again.status]).toEqual([200, 200]);
    expect(again.body.turn).toBe(first.body.turn);
    const compacted = await api.post(`/v1/sessions/${id}/compact`, {});
    expect(compacted.status, JSON.stringify(compacted.body)).toBe(200);
    const after = await api.post(`/v1/sessions/${id}/turns`, { input: 'after the summary', stream: true });
    expect(after.status).toBe(200);
    await tailgate.settled();

    const billed = anthropic.bill.slice(from);
    // One call per turn, the retry none, the compaction one.
    expect(billed.length).toBe(8);
    const turns = (await api.get(`/v1/sessions/${id}/turns?limit=100`)).body.turns.reverse();
    const usages = turns.map((turn: any) => turn.usage);
    const summary = billed[6]!;
    expect(compacted.body.usage).toEqual(receiptOf(summary));
    expect(usages).toEqual([...billed.slice(0, 6), billed[7]!].map(receiptOf));
    const session = await api.get(`/v1/sessions/${id}`);
    const total = sumOf(billed);
    expect(session.body.usage).toMatchObject({
      ...total,
      priced_cost_usd: total.cost_usd,
      turns: 7,
      unpriced_turns: 0,
    });
    // The cache did its work: the bill shows reads.
    expect(total.cached_input_tokens).toBeGreaterThan(0);
  });

  it('a stream broken mid-way, a turn cancelled mid-stream and before it, and a fork', async () => {
    const from = anthropic.bill.length;
    const id = await api.session({ model: 'anthropic:bill-model' });
    anthropic.setPlan(() => 'text');
    const first = await api.post(`/v1/sessions/${id}/turns`, { input: `start ${'dolor sit amet '.repeat(300)}` });
    expect(first.status).toBe(200);
    anthropic.setPlan(() => 'broken');
    const broken = await api.post(`/v1/sessions/${id}/turns`, { input: 'break', stream: true });
    expect(broken.status).toBe(200);
    // Cancelled once its first words reached the client: the provider had reported its input.
    anthropic.setPlan(() => 'started');
    const streaming = await fetch(`${origin}/v1/sessions/${id}/turns`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'start and stop', stream: true }),
    });
    const reader = streaming.body!.pipeThrough(new TextDecoderStream()).getReader();
    let read = '';
    while (!read.includes('event: output_text.delta')) read += (await reader.read()).value ?? '';
    const stopped = await api.post(`/v1/sessions/${id}/turns/3/cancel`, {});
    expect(stopped.status, JSON.stringify(stopped.body)).toBe(200);
    while (!(await reader.read()).done);
    let hungSeen!: () => void;
    const hung = new Promise<void>((resolve) => (hungSeen = resolve));
    anthropic.setPlan(() => {
      hungSeen();
      return 'hang';
    });
    const running = api.post(`/v1/sessions/${id}/turns`, { input: 'hang', stream: true });
    await hung;
    const cancelled = await api.post(`/v1/sessions/${id}/turns/4/cancel`, {});
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    await running;
    anthropic.setPlan(() => 'text');
    const next = await api.post(`/v1/sessions/${id}/turns`, { input: 'next' });
    expect(next.status, JSON.stringify(next.body)).toBe(200);
    await tailgate.settled();
    const fork = await api.post(`/v1/sessions/${id}/fork`, { at_turn: 1 });
    expect(fork.status, JSON.stringify(fork.body)).toBe(201);
    const forked = await api.post(`/v1/sessions/${fork.body.id}/turns`, { input: 'on the fork' });
    expect(forked.status).toBe(200);
    await tailgate.settled();

    const billed = anthropic.bill.slice(from);
    expect(billed.map((entry) => entry.answered)).toEqual(['whole', 'broken', 'started', 'hung', 'whole', 'whole']);
    const turns = (await api.get(`/v1/sessions/${id}/turns?limit=100`)).body.turns.reverse();
    expect(turns[0].usage).toEqual(receiptOf(billed[0]!));
    expect(turns[4].usage).toEqual(receiptOf(billed[4]!));
    // The broken call and the one cancelled mid-stream reported their input (message_start) but
    // not their output: the bill's input, its cache reads and writes priced as such, and the
    // output streamed as counted; estimated, and said so.
    for (const index of [1, 2]) {
      expect(turns[index].usage_estimated).toBe(true);
      const { output_tokens } = turns[index].usage;
      expect(output_tokens).toBeGreaterThan(0);
      const tokens = { ...receiptOf(billed[index]!), output_tokens };
      expect(turns[index].usage).toEqual({ ...tokens, cost_usd: costOf(tokens, ANTHROPIC_PRICE) });
    }
    // The call cancelled before its stream began reported nothing: the estimate counts the
    // prompt near the bill's input, but prices all of it as uncached input.
    expect(turns[3].usage_estimated).toBe(true);
    const off = Math.abs(turns[3].usage.input_tokens - billed[3]!.input_tokens);
    expect(off).toBeLessThan(billed[3]!.input_tokens / 10);
    expect(turns[3].usage.cached_input_tokens).toBe(0);
    expect(turns[3].usage.cost_usd).toBeGreaterThan(billed[3]!.cost_usd);
    const session = await api.get(`/v1/sessions/${id}`);
    expect(session.body.usage).toMatchObject({ ...sumOf(turns.map((turn: any) => turn.usage)), turns: 2 });
    const forkSession = await api.get(`/v1/sessions/${fork.body.id}`);
    expect(forkSession.body.usage).toMatchObject({ ...sumOf([billed[5]!]), turns: 1 });
  });

  it("a session's max_cost_usd and a token's stop a runaway tool loop one turn past the limit at most", async () => {
    const tools = [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: {} } }];
    anthropic.setPlan(() => 'tool');
    const loop = async (id: string, headers: Record<string, string>) => {
      let input: unknown = `go ${'x '.repeat(2000)}`;
      const statuses: number[] = [];
      for (let step = 0; step < 40; step++) {
        const taken = await api.post(`/v1/sessions/${id}/turns`, { input, tools }, headers);
        statuses.push(taken.status);
        if (taken.status !== 200) return { statuses, refused: taken.body };
        const call = taken.body.output.find((item: any) => item.type === 'function_call');
        input = [{ type: 'function_call_output', call_id: call.call_id, output: 'rain '.repeat(200) }];
      }
      return { statuses, refused: undefined };
    };
    const from = anthropic.bill.length;
    const limited = await api.session({ model: 'anthropic:bill-model', budget: { max_cost_usd: 0.05 } });
    const stopped = await loop(limited, {});
    await tailgate.settled();
    const billed = anthropic.bill.slice(from);
    const usage = (await api.get(`/v1/sessions/${limited}`)).body.usage;
    expect(stopped.refused.error.code).toBe('budget_exhausted');
    expect(usage).toMatchObject({ ...sumOf(billed), turns: billed.length });
    const last = billed.at(-1)!.cost_usd;
    expect(usage.cost_usd).toBeGreaterThanOrEqual(0.05);
    expect(usage.cost_usd - last).toBeLessThan(0.05);

    const minted = await api.post('/v1/tokens', {
      scopes: ['session:turn', 'session:read'],
      budget: { max_cost_usd: 0.04 },
    });
    expect(minted.status, JSON.stringify(minted.body)).toBe(201);
    const auth = { authorization: `Bearer ${minted.body.token as string}` };
    const tokenFrom = anthropic.bill.length;
    const one = await api.session({ model: 'anthropic:bill-model' });
    const two = await api.session({ model: 'anthropic:bill-model' });
    await loop(one, auth).then(() => undefined);
    const second = await loop(two, auth);
    await tailgate.settled();
    const tokenBilled = anthropic.bill.slice(tokenFrom);
    const current = await api.get('/v1/tokens/current', auth);
    expect(second.statuses).toEqual([402]);
    expect(current.body.usage).toMatchObject({ ...sumOf(tokenBilled), turns: tokenBilled.length });
    expect(current.body.remaining).toEqual({ max_cost_usd: 0 });
  });

  it('the OpenAI facade through the official client: Responses and Chat Completions', async () => {
    const client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
    const from = openai.bill.length;
    const long = `${'the quick brown fox '.repeat(400)}`;
    const first = await client.responses.create({ model: 'openai:gpt-4.1-mini', input: long });
    const second = await client.responses.create({
      model: 'openai:gpt-4.1-mini',
      previous_response_id: first.id,
      input: 'and then?',
    });
    const stream = await client.responses.create({
      model: 'openai:gpt-4.1-mini',
      previous_response_id: second.id,
      input: 'go on',
      stream: true,
    });
    let streamed: any;
    for await (const event of stream) if (event.type === 'response.completed') streamed = event.response;
    await tailgate.settled();
    const billed = openai.bill.slice(from);
    expect(billed.length).toBe(3);
    const shown = [first, second, streamed].map((response: any) => ({
      input_tokens: response.usage.input_tokens,
      cached_input_tokens: response.usage.input_tokens_details.cached_tokens,
      output_tokens: response.usage.output_tokens,
      reasoning_tokens: response.usage.output_tokens_details.reasoning_tokens,
      cost_usd: response.tailgate?.cost_usd ?? response.usage.tailgate?.cost_usd,
    }));
    expect(shown).toEqual(
      billed.map(({ cache_write_tokens: _written, answered: _answered, session: _session, ...usage }) => usage),
    );
    expect(billed[2]!.cached_input_tokens).toBeGreaterThan(0);

    const chatFrom = openai.bill.length;
    const minted = await api.post('/v1/tokens', {
      scopes: ['session:turn', 'session:read'],
      budget: { max_cost_usd: 1 },
    });
    const chat = new OpenAI({ apiKey: minted.body.token, baseURL: tailgate.baseURL, maxRetries: 0 });
    const messages = [{ role: 'user' as const, content: long }];
    const completion = await chat.chat.completions.create({ model: 'openai:gpt-4.1-mini', messages });
    const chunks = await chat.chat.completions.create({
      model: 'openai:gpt-4.1-mini',
      messages: [...messages, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'more' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let streamedUsage: any;
    for await (const chunk of chunks) if (chunk.usage) streamedUsage = chunk.usage;
    await tailgate.settled();
    const chatBilled = openai.bill.slice(chatFrom);
    expect([completion.usage?.prompt_tokens, streamedUsage.prompt_tokens]).toEqual(
      chatBilled.map((entry) => entry.input_tokens),
    );
    const current = await api.get('/v1/tokens/current', { authorization: `Bearer ${minted.body.token as string}` });
    expect(current.body.usage).toMatchObject({ ...sumOf(chatBilled) });
  });

  it('a compaction in a turn, a background turn under a budgeted token, a dropped stream retried by key', async () => {
    const from = anthropic.bill.length;
    anthropic.setPlan(() => 'text');
    const id = await api.session({
      model: 'anthropic:bill-model',
      strategies: ['compact'],
      strategy_config: { context_limit: 6000, response_reserve: 1000 },
    });
    const minted = await api.post('/v1/tokens', {
      scopes: ['session:turn', 'session:read'],
      budget: { max_cost_usd: 5 },
    });
    expect(minted.status, JSON.stringify(minted.body)).toBe(201);
    const auth = { authorization: `Bearer ${minted.body.token as string}` };
    for (let step = 0; step < 8; step++) {
      const taken = await api.post(`/v1/sessions/${id}/turns`, { input: `step ${step} ${'words '.repeat(500)}` }, auth);
      expect(taken.status, JSON.stringify(taken.body)).toBe(200);
    }
    const background = await api.post(`/v1/sessions/${id}/turns`, { input: 'in the back', background: true }, auth);
    expect(background.status).toBe(202);
    let receipt: any;
    do {
      receipt = await api.get(`/v1/sessions/${id}/turns/${background.body.turn}`);
    } while (receipt.body.status === 'queued' || receipt.body.status === 'in_progress');
    // A streamed turn whose client goes away after the first event, then its retry under the key.
    const keyed = { ...auth, 'idempotency-key': 'dropped-1', 'content-type': 'application/json' };
    const controller = new AbortController();
    const dropped = await fetch(`${origin}/v1/sessions/${id}/turns`, {
      method: 'POST',
      headers: keyed,
      body: JSON.stringify({ input: 'dropped', stream: true }),
      signal: controller.signal,
    });
    const reader = dropped.body!.getReader();
    await reader.read();
    controller.abort();
    await tailgate.settled();
    let retried: any;
    do {
      retried = await api.post(`/v1/sessions/${id}/turns`, { input: 'dropped', stream: true }, keyed);
    } while (retried.status === 409 && retried.body.error?.code === 'turn_in_progress');
    await tailgate.settled();

    const billed = anthropic.bill.slice(from);
    const turns = (await api.get(`/v1/sessions/${id}/turns?limit=100`)).body.turns.reverse();
    const session = (await api.get(`/v1/sessions/${id}`)).body.usage;
    const token = (await api.get('/v1/tokens/current', auth)).body.usage;
    const summaries = turns.flatMap((turn: any) => (turn.compaction_usage ? [turn.compaction_usage] : []));
    expect(turns.map((turn: any) => turn.status)).toEqual(Array(10).fill('completed'));
    expect(retried.status).toBe(200);
    expect(billed.length).toBe(11);
    expect(summaries.length).toBeGreaterThan(0);
    // The summary call's usage is one of the bill's calls, exactly.
    expect(billed.map(receiptOf)).toContainEqual(summaries[0]);
    expect(session).toMatchObject({ ...sumOf(billed), turns: 10 });
    expect(token).toMatchObject({ ...sumOf(billed), turns: 10 });
  });
});
