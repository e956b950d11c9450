import { describe, expect, it } from 'vitest';
import { createApp, type AppOptions } from '../../functions/app.ts';
import { MAX_MODEL_LABELS, Metrics } from '../../functions/metrics.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { freshId, parseSse, SIGNING_KEY, TOKEN } from './http-suite.ts';

// GET /metrics and the per-turn log line through the app, as the Node and Deno entries build it
// (with a Metrics); the log line inside workerd is test/workers/turn-log.test.ts.
const METRICS_TOKEN = 'scrape-me-please';
const lines: string[] = [];
const app = createApp({ store: () => new MemoryStore(), readEnvironment: (c) => c.env ?? {}, log: () => undefined });
const store = new MemoryStore();
/** An app over `store` (unless `options` gives another) that logs nothing but what `options` say. */
function appWith(options: Partial<AppOptions>) {
  return createApp({ store: () => store, readEnvironment: (c) => c.env ?? {}, log: () => undefined, ...options });
}
const shared = appWith({ metrics: new Metrics(), logLine: (line) => lines.push(line) });
const environment = {
  API_TOKEN: TOKEN,
  TOKEN_SIGNING_KEY: SIGNING_KEY,
  ALLOW_ANONYMOUS: 'false',
  DEFAULT_MODEL: 'echo',
  METRICS_TOKEN,
};

async function call(method: string, path: string, body?: unknown, env: Record<string, string> = {}, token = TOKEN) {
  return shared.request(
    path,
    {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    },
    { ...environment, ...env },
  );
}

/** Prometheus text -> `name{labels}` -> value, checking every sample's family is declared. */
function parsePrometheus(text: string): Map<string, number> {
  const types = new Map<string, string>();
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const type = /^# TYPE (\S+) (counter|histogram)$/.exec(line);
    if (type) types.set(type[1]!, type[2]!);
    if (line.startsWith('#')) continue;
    const sample = /^([a-z_]+)(\{.*\})? (\S+)$/.exec(line);
    expect(sample, line).not.toBeNull();
    const family = sample![1]!.replace(/_(bucket|sum|count)$/, '');
    expect(types.has(sample![1]!) || types.get(family) === 'histogram', line).toBe(true);
    samples.set(`${sample![1]}${sample![2] ?? ''}`, Number(sample![3]));
  }
  return samples;
}

describe('GET /metrics and the turn log line (Node)', () => {
  it('counts turns, errors by code, latency, time to first token, storage, tokens and cost', async () => {
    const id = freshId('metrics');
    expect((await call('POST', '/v1/sessions', { id, budget: { max_turns: 2 } })).status).toBe(201);
    expect((await call('POST', `/v1/sessions/${id}/turns`, { input: 'hello there' })).status).toBe(200);
    const streamed = await call('POST', `/v1/sessions/${id}/turns`, { input: 'stream this', stream: true });
    expect(parseSse(await streamed.text()).at(-1)?.event).toBe('turn.completed');
    expect((await call('POST', `/v1/sessions/${id}/turns`, { input: 'over budget' })).status).toBe(402);

    const scraped = await call('GET', '/metrics');
    expect(scraped.status).toBe(200);
    expect(scraped.headers.get('content-type')).toContain('text/plain; version=0.0.4');
    const samples = parsePrometheus(await scraped.text());
    expect(samples.get('tailgate_turns_total{status="completed",model="echo"}')).toBe(2);
    expect(samples.get('tailgate_turns_total{status="failed",model="unknown"}')).toBe(1);
    expect(samples.get('tailgate_turn_errors_total{code="budget_exhausted"}')).toBe(1);
    expect(samples.get('tailgate_turn_duration_seconds_count{status="completed"}')).toBe(2);
    expect(samples.get('tailgate_turn_duration_seconds_bucket{status="completed",le="+Inf"}')).toBe(2);
    expect(samples.get('tailgate_turn_time_to_first_token_seconds_count')).toBe(1);
    expect(samples.get('tailgate_storage_operations_total{op="put"}')).toBeGreaterThan(0);
    expect(samples.get('tailgate_storage_operations_total{op="get"}')).toBeGreaterThan(0);
    const { usage } = (await (await call('GET', `/v1/sessions/${id}`)).json()) as any;
    expect(samples.get('tailgate_tokens_total{kind="input",model="echo",source="turn"}')).toBe(usage.input_tokens);
    expect(samples.get('tailgate_tokens_total{kind="output",model="echo",source="turn"}')).toBe(usage.output_tokens);
    expect(samples.get('tailgate_cost_usd_total{model="echo",source="turn"}')).toBe(0);
  });

  it("counts compactions' summaries (in a turn, POST .../compact, POST /v1/responses/compact) by source", async () => {
    const prices = { MODEL_PRICES: JSON.stringify({ echo: { input: 1, output: 2 } }) };
    const before = parsePrometheus(await (await call('GET', '/metrics')).text());
    const id = freshId('compacted');
    await call('POST', '/v1/sessions', { id });
    for (const input of ['first words', 'second words'])
      expect((await call('POST', `/v1/sessions/${id}/turns`, { input, strategies: [] }, prices)).status).toBe(200);
    const turn = await call(
      'POST',
      `/v1/sessions/${id}/turns`,
      {
        input: 'compact now',
        strategies: ['compact'],
        strategy_config: { context_limit: 100_000, compact_trigger_ratio: 0.0001, compact_keep_ratio: 0.0001 },
      },
      prices,
    );
    const inTurn = ((await turn.json()) as any).compaction_usage;
    expect(inTurn.input_tokens).toBeGreaterThan(0);
    await call('POST', `/v1/sessions/${id}/turns`, { input: 'more words', strategies: [] }, prices);
    const manual = await call('POST', `/v1/sessions/${id}/compact`, { keep_tokens: 0 }, prices);
    const manualUsage = ((await manual.json()) as any).usage;
    expect(manualUsage.input_tokens).toBeGreaterThan(0);
    const inline = await call('POST', '/v1/responses/compact', { model: 'echo', input: 'summarize me' }, prices);
    const inlineUsage = ((await inline.json()) as any).usage;
    expect(inlineUsage.input_tokens).toBeGreaterThan(0);

    const after = parsePrometheus(await (await call('GET', '/metrics')).text());
    const grew = (key: string) => (after.get(key) ?? 0) - (before.get(key) ?? 0);
    const compaction = (kind: string) => `tailgate_tokens_total{kind="${kind}",model="echo",source="compaction"}`;
    const summaries = [inTurn, manualUsage, inlineUsage];
    const sum = (field: string) => summaries.reduce((total, usage) => total + usage[field], 0);
    expect(grew(compaction('input'))).toBe(sum('input_tokens'));
    expect(grew(compaction('output'))).toBe(sum('output_tokens'));
    // The facade answers OpenAI's usage shape, without a cost: echo's price is $1 and $2 a million.
    const inlineCost = (inlineUsage.input_tokens + 2 * inlineUsage.output_tokens) / 1e6;
    const cost = inTurn.cost_usd + manualUsage.cost_usd + inlineCost;
    expect(cost).toBeGreaterThan(0);
    expect(grew('tailgate_cost_usd_total{model="echo",source="compaction"}')).toBeCloseTo(cost, 9);
  });

  it('counts rate-limited turns by their code', async () => {
    const id = freshId('limited');
    await call('POST', '/v1/sessions', { id });
    const limit = { RATE_LIMIT_TURNS_PER_MINUTE_PER_SESSION: '1' };
    expect((await call('POST', `/v1/sessions/${id}/turns`, { input: 'one' }, limit)).status).toBe(200);
    expect((await call('POST', `/v1/sessions/${id}/turns`, { input: 'two' }, limit)).status).toBe(429);
    const samples = parsePrometheus(await (await call('GET', '/metrics')).text());
    expect(samples.get('tailgate_turn_errors_total{code="rate_limited"}')).toBeGreaterThanOrEqual(1);
  });

  it('labels at most MAX_MODEL_LABELS models by name, any further one a client names as "other"', async () => {
    const metrics = new Metrics();
    // A provider that knows no model: every turn fails, under the model its request named.
    const refusing = appWith({
      metrics,
      logLine: () => undefined,
      modelEnvironment: { fetch: async () => Response.json({ error: { message: 'no such model' } }, { status: 404 }) },
    });
    const env = { ...environment, OPENAI_COMPATIBLE_BASE_URL: 'https://models.example/v1', MODEL_MAX_RETRIES: '0' };
    const id = freshId('models');
    await call('POST', '/v1/sessions', { id });
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    for (let index = 0; index < MAX_MODEL_LABELS + 20; index++) {
      const body = JSON.stringify({ input: 'hi', model: `openai-compatible:made-up-${index}` });
      const answer = await refusing.request(`/v1/sessions/${id}/turns`, { method: 'POST', headers, body }, env);
      expect(answer.status).toBe(502);
    }
    const models = [...parsePrometheus(metrics.render()).keys()]
      .filter((key) => key.startsWith('tailgate_turns_total'))
      .map((key) => /model="([^"]*)"/.exec(key)?.[1]);
    expect(models).toHaveLength(MAX_MODEL_LABELS + 1);
    expect(models).toContain('other');
    expect(models).toContain('openai-compatible:made-up-0');
  });

  it('serves the admin token and METRICS_TOKEN; refuses other tokens and none', async () => {
    expect((await call('GET', '/metrics', undefined, {}, METRICS_TOKEN)).status).toBe(200);
    expect((await call('GET', '/metrics', undefined, {}, 'not-the-token')).status).toBe(401);
    const reader = (await (await call('POST', '/v1/tokens', { scopes: ['session:read'] })).json()) as any;
    const forbidden = await call('GET', '/metrics', undefined, {}, reader.token);
    expect(forbidden.status).toBe(403);
    expect(((await forbidden.json()) as any).error.details.required_scope).toBe('admin');
    const anonymous = await shared.request('/metrics', {}, environment);
    expect(anonymous.status).toBe(401);
    // METRICS_TOKEN unset: that token is nobody's.
    const { METRICS_TOKEN: _unset, ...without } = environment;
    const unset = await shared.request('/metrics', { headers: { authorization: `Bearer ${METRICS_TOKEN}` } }, without);
    expect(unset.status).toBe(401);
  });

  it('is not served by an app without metrics (the Workers entry)', async () => {
    const response = await app.request('/metrics', { headers: { authorization: `Bearer ${TOKEN}` } }, environment);
    expect(response.status).toBe(404);
  });

  it('logs one JSON line per turn with its numbers and no content unless LOG_CONTENT', async () => {
    const id = freshId('logged');
    await call('POST', '/v1/sessions', { id });
    lines.length = 0;
    expect((await call('POST', `/v1/sessions/${id}/turns`, { input: 'a secret prompt' })).status).toBe(200);
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0]!);
    const receipt = (await (await call('GET', `/v1/sessions/${id}/turns`)).json()) as any;
    expect(line).toMatchObject({
      event: 'turn',
      session_id: id,
      turn: 1,
      status: 'completed',
      error_code: null,
      model: 'echo',
      cost_usd: 0,
      first_output_ms: null,
    });
    expect(line.tokens.input).toBe(receipt.turns[0].usage.input_tokens);
    expect(line.tokens.output).toBe(receipt.turns[0].usage.output_tokens);
    expect(line.duration_ms).toBeGreaterThanOrEqual(0);
    expect(line.storage_ops.put).toBeGreaterThan(0);
    expect(line.storage_ops.total).toBe(
      line.storage_ops.get +
        line.storage_ops.head +
        line.storage_ops.put +
        line.storage_ops.list +
        line.storage_ops.delete,
    );
    expect(lines[0]).not.toContain('a secret prompt');
    expect(line).not.toHaveProperty('input');

    lines.length = 0;
    await call('POST', `/v1/sessions/${id}/turns`, { input: 'a logged prompt' }, { LOG_CONTENT: 'true' });
    const logged = JSON.parse(lines[0]!);
    expect(logged.input).toBe('a logged prompt');
    expect(logged.output[0].content).toBe('echo: a logged prompt');
  });

  it('logs an inline image of the input under LOG_CONTENT as its media type and size, not its bytes', async () => {
    const id = freshId('logged-image');
    await call('POST', '/v1/sessions', { id });
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
    const content = [
      { type: 'input_text', text: 'see' },
      { type: 'input_image', image_url: `data:image/png;base64,${png}` },
    ];
    lines.length = 0;
    const input = [{ type: 'message', role: 'user', content }];
    expect((await call('POST', `/v1/sessions/${id}/turns`, { input }, { LOG_CONTENT: 'true' })).status).toBe(200);
    expect(lines[0]).not.toContain(png);
    const logged = JSON.parse(lines[0]!);
    expect(logged.input[0].content[0].text).toBe('see');
    expect(logged.input[0].content[1].image_url).toBe(`[data:image/png, ${atob(png).length} bytes]`);
  });

  it('logs a failed turn with its error code', async () => {
    lines.length = 0;
    expect((await call('POST', `/v1/sessions/${freshId('none')}/turns`, { input: 'hi' })).status).toBe(404);
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      status: 'failed',
      error_code: 'not_found',
      turn: null,
      tokens: null,
    });
  });
});

// Sums of binary floats carry noise in their last digits (0.1 + 0.2 is 0.30000000000000004 as a
// double): the text rounds it off, and keeps whole numbers as they are, however large.
describe('Prometheus text of float sums', () => {
  it('prints histogram sums and float counters without binary float noise', () => {
    const metrics = new Metrics();
    const labels = { model: 'echo' };
    for (const value of [0.1, 0.2]) {
      metrics.observe('tailgate_turn_duration_seconds', labels, value);
      metrics.count('tailgate_cost_usd_total', labels, value);
    }
    for (let index = 0; index < 1000; index += 1)
      metrics.observe('tailgate_turn_time_to_first_token_seconds', {}, 0.013);
    const big = 2 ** 53 - 1;
    metrics.count('tailgate_tokens_total', labels, big);
    const text = metrics.render();
    expect(text).toContain('\ntailgate_turn_duration_seconds_sum{model="echo"} 0.3\n');
    expect(text).toContain('\ntailgate_cost_usd_total{model="echo"} 0.3\n');
    expect(text).toContain('\ntailgate_turn_time_to_first_token_seconds_sum 13\n');
    expect(text).toContain(`\ntailgate_tokens_total{model="echo"} ${big}\n`);
    // Still Prometheus text, every sample a number.
    const samples = parsePrometheus(text);
    for (const [name, value] of samples) expect(Number.isFinite(value), name).toBe(true);
  });
});

describe('a log sink that throws', () => {
  it('loses the line, not the turn', async () => {
    const sinkStore = new MemoryStore();
    const failing = appWith({
      store: () => sinkStore,
      logLine: () => {
        throw new Error('stdout is closed');
      },
    });
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const id = freshId('sink');
    await failing.request('/v1/sessions', { method: 'POST', headers, body: JSON.stringify({ id }) }, environment);
    const turn = await failing.request(
      `/v1/sessions/${id}/turns`,
      { method: 'POST', headers, body: JSON.stringify({ input: 'hi' }) },
      environment,
    );
    expect(turn.status).toBe(200);
  });
});

describe('a turn that finds its session busy (Node)', () => {
  it('is logged and counted as queued when queued (its keyed retry: replayed), as failed if 409 answers', async () => {
    // Background turns are claimed and never run here: the session stays busy.
    const busyLines: string[] = [];
    const metrics = new Metrics();
    const busyStore = new MemoryStore();
    const busy = createApp({
      store: () => busyStore,
      readEnvironment: (c) => c.env ?? {},
      log: () => undefined,
      metrics,
      logLine: (line) => busyLines.push(line),
      queueTurn: () => async () => undefined,
    });
    const send = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
      busy.request(
        path,
        {
          method,
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...headers },
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        },
        environment,
      );
    const id = freshId('busy');
    expect((await send('POST', '/v1/sessions', { id })).status).toBe(201);
    expect((await send('POST', `/v1/sessions/${id}/turns`, { input: 'runs', background: true })).status).toBe(202);
    busyLines.length = 0;
    for (const background of [true, false]) {
      const queued = await send('POST', `/v1/sessions/${id}/turns`, { input: 'waits', background, on_busy: 'enqueue' });
      expect(queued.status).toBe(202);
    }
    // A retry under the Idempotency-Key of a queued input is its replay, not a second input queued.
    const keyed = { input: 'waits too', on_busy: 'enqueue' };
    const answers = [];
    for (let attempt = 0; attempt < 2; attempt++) {
      const queued = await send('POST', `/v1/sessions/${id}/turns`, keyed, { 'idempotency-key': `${id}-queued` });
      expect(queued.status).toBe(202);
      answers.push(await queued.json());
    }
    expect(answers[1]).toEqual(answers[0]);
    expect((await send('POST', `/v1/sessions/${id}/turns`, { input: 'refused', on_busy: 'reject' })).status).toBe(409);
    const logged = busyLines.map((line) => JSON.parse(line));
    expect(logged.map(({ status, error_code, turn }) => ({ status, error_code, turn }))).toEqual([
      { status: 'queued', error_code: null, turn: null },
      { status: 'queued', error_code: null, turn: null },
      { status: 'queued', error_code: null, turn: null },
      { status: 'replayed', error_code: null, turn: null },
      { status: 'failed', error_code: 'turn_in_progress', turn: null },
    ]);
    expect(logged[0]).toMatchObject({ session_id: id, level: 'info' });
    const samples = parsePrometheus(await (await send('GET', '/metrics')).text());
    expect(samples.get('tailgate_turns_total{status="queued",model="unknown"}')).toBe(3);
    expect(samples.get('tailgate_turns_total{status="replayed",model="unknown"}')).toBe(1);
    expect(samples.get('tailgate_turns_total{status="failed",model="unknown"}')).toBe(1);
    expect(samples.get('tailgate_turn_errors_total{code="turn_in_progress"}')).toBe(1);

    // An interrupt's refused attempt is not logged: the turn it then takes is.
    busyLines.length = 0;
    expect((await send('POST', `/v1/sessions/${id}/turns`, { input: 'now', on_busy: 'interrupt' })).status).toBe(200);
    expect(busyLines.map((line) => JSON.parse(line).status)).toEqual(['completed']);
  });
});
