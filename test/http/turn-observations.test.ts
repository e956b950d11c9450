import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { Metrics } from '../../functions/metrics.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { freshId, TOKEN } from './http-suite.ts';

// docs/API.md, "Metrics and logs": one JSON line per turn, native and background; with
// LOG_CONTENT the request's input; time to first token for turns whose model streamed (to a
// client, or a background turn's to its journal), not a plain foreground one; a replay is
// `replayed`, and the error of a failed turn is counted once.

const lines: string[] = [];
const tasks: Promise<unknown>[] = [];
const store = new MemoryStore();
const app = createApp({
  store: () => store,
  readEnvironment: (c) => c.env ?? {},
  log: () => undefined,
  metrics: new Metrics(),
  logLine: (line) => lines.push(line),
  afterResponse: (task) => void tasks.push(task),
});
const environment = { API_TOKEN: TOKEN, ALLOW_ANONYMOUS: 'false', DEFAULT_MODEL: 'echo', LOG_CONTENT: 'true' };

function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  return app.request(
    path,
    {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...headers },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    },
    environment,
  );
}

async function sample(series: string): Promise<number | undefined> {
  const text = await (await call('GET', '/metrics')).text();
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

async function session(): Promise<string> {
  const id = freshId('observed');
  expect((await call('POST', '/v1/sessions', { id })).status).toBe(201);
  return id;
}

const TTFT = 'tailgate_turn_time_to_first_token_seconds_count';

describe("a turn's log line and metrics", () => {
  it.each([false, true])(
    "log a turn's input; time its first output only when its model streamed (background: %s)",
    async (background) => {
      const id = await session();
      const timedBefore = (await sample(TTFT)) ?? 0;
      lines.length = 0;
      const taken = await call('POST', `/v1/sessions/${id}/turns`, { input: 'a logged prompt', background });
      expect(taken.status).toBe(background ? 202 : 200);
      await expect.poll(() => lines.length).toBe(1);
      while (tasks.length > 0) await Promise.all(tasks.splice(0));
      const line = JSON.parse(lines[0]!);
      // A background turn's model streams to its journal: timed as a streamed turn is.
      const timed = background ? expect.any(Number) : null;
      expect(line).toMatchObject({ status: 'completed', turn: 1, first_output_ms: timed });
      expect(line.output[0].content).toBe('echo: a logged prompt');
      expect(JSON.stringify(line.input)).toContain('a logged prompt');
      expect((await sample(TTFT)) ?? 0).toBe(timedBefore + (background ? 1 : 0));
      // A streamed turn is timed.
      await (await call('POST', `/v1/sessions/${id}/turns`, { input: 'streamed', stream: true })).text();
      await expect.poll(() => lines.length).toBe(2);
      expect(JSON.parse(lines[1]!).first_output_ms).toEqual(expect.any(Number));
      expect(await sample(TTFT)).toBe(timedBefore + (background ? 2 : 1));
    },
  );

  it('count a replayed failed turn as replayed, and its error once', async () => {
    const id = await session();
    expect((await call('POST', `/v1/sessions/${id}/inbox`, { name: 'abort', content: 'stop' })).status).toBe(201);
    const errors = 'tailgate_turn_errors_total{code="aborted"}';
    const before = (await sample(errors)) ?? 0;
    const key = { 'idempotency-key': freshId('key') };
    expect((await call('POST', `/v1/sessions/${id}/turns`, { input: 'go' }, key)).status).toBe(409);
    lines.length = 0;
    const retry = await call('POST', `/v1/sessions/${id}/turns`, { input: 'go' }, key);
    expect(retry.status).toBe(409);
    expect(((await retry.json()) as { error: { code: string } }).error.code).toBe('aborted');
    expect(JSON.parse(lines[0]!)).toMatchObject({ status: 'replayed', error_code: 'aborted' });
    expect(await sample(errors)).toBe(before + 1);
  });

  it.each([false, true])(
    'log and count a refused turn, foreground or background (background: %s)',
    async (background) => {
      const id = freshId('refused');
      expect((await call('POST', '/v1/sessions', { id, budget: { max_turns: 1 } })).status).toBe(201);
      expect((await call('POST', `/v1/sessions/${id}/turns`, { input: 'one' })).status).toBe(200);
      const errors = 'tailgate_turn_errors_total{code="budget_exhausted"}';
      const before = (await sample(errors)) ?? 0;
      lines.length = 0;
      const refused = await call('POST', `/v1/sessions/${id}/turns`, { input: 'two', background });
      expect(refused.status).toBe(402);
      expect(lines.map((line) => JSON.parse(line))).toMatchObject([
        { status: 'failed', error_code: 'budget_exhausted' },
      ]);
      expect(await sample(errors)).toBe(before + 1);
    },
  );
});

describe('a keyed retry of a background turn', () => {
  const replays = 'tailgate_turns_total{status="replayed",model="unknown"}';

  it.each(['native', 'response'] as const)(
    'is logged and counted as replayed once its turn ended (%s)',
    async (route) => {
      const key = { 'idempotency-key': freshId('key') };
      const take =
        route === 'native'
          ? async (id: string) => call('POST', `/v1/sessions/${id}/turns`, { input: 'later', background: true }, key)
          : async (id: string) =>
              call('POST', '/v1/responses', { model: 'echo', input: 'later', background: true, conversation: id }, key);
      const id = await session();
      lines.length = 0;
      expect((await take(id)).status).toBe(route === 'native' ? 202 : 200);
      await expect.poll(() => lines.length).toBe(1);
      while (tasks.length > 0) await Promise.all(tasks.splice(0));
      const before = (await sample(replays)) ?? 0;
      const retry = await take(id);
      expect(retry.status).toBe(route === 'native' ? 202 : 200);
      expect(await retry.json()).toMatchObject({ status: 'completed' });
      expect(lines.slice(1).map((line) => JSON.parse(line))).toMatchObject([
        { session_id: id, status: 'replayed', turn: 1, error_code: null },
      ]);
      expect(await sample(replays)).toBe(before + 1);
    },
  );

  it('is logged and counted as replayed while its turn runs (a response answered as it stands)', async () => {
    // Background turns handed to no runner: each stays queued, its claim's lease running.
    const held = createApp({
      store: () => store,
      readEnvironment: (c) => c.env ?? {},
      log: () => undefined,
      logLine: (line) => lines.push(line),
      queueTurn: () => async () => undefined,
    });
    const key = {
      authorization: `Bearer ${TOKEN}`,
      'content-type': 'application/json',
      'idempotency-key': freshId('k'),
    };
    const body = JSON.stringify({ model: 'echo', input: 'waiting', background: true });
    const create = () => held.request('/v1/responses', { method: 'POST', headers: key, body }, environment);
    const created = (await (await create()).json()) as { id: string; conversation: { id: string } };
    lines.length = 0;
    const retry = await create();
    expect(retry.status).toBe(200);
    expect(await retry.json()).toMatchObject({ id: created.id, status: 'queued' });
    expect(lines.map((line) => JSON.parse(line))).toMatchObject([
      { session_id: created.conversation.id, status: 'replayed', turn: 1, error_code: null },
    ]);
  });
});

describe('a response that branches', () => {
  // docs/OPENAI.md: previous_response_id naming an older response takes the turn in a fork. The
  // claim the older response's conversation refused took no turn: only the branch's is told.
  it.each(['json', 'stream', 'background'] as const)('logs and counts the branch turn only (%s)', async (mode) => {
    const first = (await (await call('POST', '/v1/responses', { model: 'echo', input: 'one' })).json()) as {
      id: string;
      conversation: { id: string };
    };
    const previous = { model: 'echo', previous_response_id: first.id };
    expect((await call('POST', '/v1/responses', { ...previous, input: 'two' })).status).toBe(200);
    const errors = 'tailgate_turn_errors_total{code="internal_error"}';
    const before = (await sample(errors)) ?? 0;
    lines.length = 0;
    const settings = { json: {}, stream: { stream: true }, background: { background: true } }[mode];
    const branch = await call('POST', '/v1/responses', { ...previous, input: 'branch', ...settings });
    expect(branch.status).toBe(200);
    await branch.text();
    while (tasks.length > 0) await Promise.all(tasks.splice(0));
    await expect.poll(() => lines.some((line) => JSON.parse(line).status === 'completed')).toBe(true);
    const told = lines.map((line) => JSON.parse(line));
    expect(told).toMatchObject([{ status: 'completed', turn: 2, error_code: null }]);
    expect(told[0].session_id).not.toBe(first.conversation.id);
    expect((await sample(errors)) ?? 0).toBe(before);
  });
});
