import { createExecutionContext, createMessageBatch, env, waitOnExecutionContext } from 'cloudflare:test';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import worker from '../../functions/worker.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { freshId } from '../http/http-suite.ts';

// The per-turn JSON log line inside workerd, through the real worker (the Node side, and
// GET /metrics, are test/http/metrics.test.ts).
const origin = 'https://tailgate.test';
const bindings = env as unknown as Record<string, unknown>;
const lines: string[] = [];
const log = console.log;
beforeEach(() => {
  lines.length = 0;
  console.log = (line?: unknown) => lines.push(String(line));
});
afterEach(() => {
  console.log = log;
});

async function call(path: string, body?: unknown, overrides: Record<string, unknown> = {}, method = 'POST') {
  const context = createExecutionContext();
  const response = await worker.fetch(
    new Request(`${origin}${path}`, {
      method,
      headers: { authorization: 'Bearer test-token', 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    }) as never,
    { ...bindings, ...overrides } as never,
    context,
  );
  await waitOnExecutionContext(context);
  return response;
}

describe('workerd: the turn log line', () => {
  it('one JSON line per turn with its numbers, no content unless LOG_CONTENT', async () => {
    const id = freshId('wlog');
    expect((await call('/v1/sessions', { id })).status).toBe(201);
    const answered = await call(`/v1/sessions/${id}/turns`, { input: 'a private prompt' });
    expect(answered.status).toBe(200);
    const turns = lines.filter((line) => line.startsWith('{"level"'));
    expect(turns).toHaveLength(1);
    const line = JSON.parse(turns[0]!);
    expect(line).toMatchObject({ event: 'turn', session_id: id, turn: 1, status: 'completed', model: 'echo' });
    // The line names the request as its answer's x-request-id does.
    expect(line.request_id).toMatch(/^req_[0-9a-f]{24}$/);
    expect(answered.headers.get('x-request-id')).toBe(line.request_id);
    expect(line.tokens.output).toBeGreaterThan(0);
    expect(line.cost_usd).toBe(0);
    expect(line.storage_ops.put).toBeGreaterThan(0);
    expect(turns[0]).not.toContain('a private prompt');

    lines.length = 0;
    await call(`/v1/sessions/${id}/turns`, { input: 'a logged prompt' }, { LOG_CONTENT: 'true' });
    expect(JSON.parse(lines.find((entry) => entry.startsWith('{"level"'))!).input).toBe('a logged prompt');
  });

  // A queued input's turn, run by the queue consumer (TURNS bound) or, without the binding, in
  // the isolate after its closer's run: its line counts its run's storage operations alone, not
  // those of the run that closed the turn before it (test/http/busy-turn-cost.test.ts).
  it.each([true, false])("a queued input's turn counts its own storage operations (TURNS bound: %s)", async (bound) => {
    const id = freshId('wqueued');
    const sent: BackgroundTurn[] = [];
    const turns = { send: async (run: BackgroundTurn) => void sent.push(run) };
    expect((await call('/v1/sessions', { id, on_busy: 'enqueue' })).status).toBe(201);
    expect(
      (await call(`/v1/sessions/${id}/turns`, { input: 'first', background: true }, { TURNS: turns })).status,
    ).toBe(202);
    const enqueued = await call(`/v1/sessions/${id}/turns`, { input: 'later' }, { TURNS: turns });
    expect(enqueued.status).toBe(202);
    const deliver = async () => {
      const batch = createMessageBatch<BackgroundTurn>(
        'tailgate-turns',
        sent.splice(0).map((body, index) => ({ id: `m${index}`, timestamp: new Date(), attempts: 1, body })),
      );
      const context = createExecutionContext();
      await worker.queue(batch as never, { ...bindings, TURNS: bound ? turns : undefined } as never, context);
      await waitOnExecutionContext(context);
    };
    await deliver();
    if (bound) await deliver();
    const logged = lines.filter((line) => line.startsWith('{"level"')).map((line) => JSON.parse(line));
    const second = logged.find((line) => line.session_id === id && line.turn === 2);
    expect(second).toMatchObject({ status: 'completed' });
    // Named by the request that queued it (its message says so, `enqueued_by`), and apart by the
    // request whose run took it up: the consumer's of turn 1, whose message named the first request.
    const first = logged.find((line) => line.session_id === id && line.turn === 1);
    expect(second.request_id).toBe(enqueued.headers.get('x-request-id'));
    expect(second.pickup_request_id).toBe(first.request_id);
    expect(first.request_id).toMatch(/^req_/);
    // The newest record, listed with the etag its put returned in this isolate, is taken from the
    // record cache (lib/session/log/record-cache.ts): one get less than a turn's 8.
    expect(second.storage_ops).toEqual({ get: 2, head: 0, put: 3, list: 2, delete: 0, total: 7 });
  });

  // A background turn run by the TURNS queue consumer names the request that queued it: its
  // message carries the request's id; a message without one (sent by older code) still runs, and
  // its line names no request.
  it('a background turn run by the queue consumer names the request that sent it', async () => {
    const id = freshId('wbgreq');
    const sent: BackgroundTurn[] = [];
    const turns = { send: async (run: BackgroundTurn) => void sent.push(run) };
    const deliver = async (messages: BackgroundTurn[]) => {
      const batch = createMessageBatch<BackgroundTurn>(
        'tailgate-turns',
        messages.map((body, index) => ({ id: `r${index}`, timestamp: new Date(), attempts: 1, body })),
      );
      const context = createExecutionContext();
      await worker.queue(batch as never, { ...bindings, TURNS: turns } as never, context);
      await waitOnExecutionContext(context);
    };
    const logged = (turn: number) =>
      lines
        .filter((line) => line.startsWith('{"level"'))
        .map((line) => JSON.parse(line))
        .find((line) => line.session_id === id && line.turn === turn);
    expect((await call('/v1/sessions', { id })).status).toBe(201);
    const answered = await call(`/v1/sessions/${id}/turns`, { input: 'first', background: true }, { TURNS: turns });
    expect(answered.status).toBe(202);
    const requestId = answered.headers.get('x-request-id');
    expect(requestId).toMatch(/^req_[0-9a-f]{24}$/);
    expect(sent).toEqual([{ session_id: id, turn: 1, writer: expect.any(String), request_id: requestId }]);
    await deliver(sent.splice(0));
    expect(logged(1)).toMatchObject({ status: 'completed', request_id: requestId });

    const again = await call(`/v1/sessions/${id}/turns`, { input: 'second', background: true }, { TURNS: turns });
    expect(again.status).toBe(202);
    const older = sent.splice(0).map(({ session_id, turn, writer }) => ({ session_id, turn, writer }));
    await deliver(older);
    expect(logged(2)).toMatchObject({ status: 'completed', request_id: null });
  });

  it('the Worker serves no /metrics, and says so to any token, a METRICS_TOKEN scraper too', async () => {
    for (const authorization of ['Bearer test-token', 'Bearer a-scraper-token', undefined]) {
      const context = createExecutionContext();
      const response = await worker.fetch(
        new Request(`${origin}/metrics`, authorization ? { headers: { authorization } } : {}) as never,
        { ...bindings, METRICS_TOKEN: 'a-scraper-token' } as never,
        context,
      );
      await waitOnExecutionContext(context);
      expect(response.status).toBe(404);
      const { error } = (await response.json()) as { error: { code: string; message: string } };
      expect(error.code).toBe('not_found');
      expect(error.message).toMatch(/^a Worker serves no \/metrics/);
    }
  });
});

describe('workerd: CORS_ORIGINS', () => {
  it("answers an allowed origin's preflight before auth, and its requests with Allow-Origin", async () => {
    const page = 'https://app.example.com';
    const send = async (init: RequestInit, overrides: Record<string, unknown>) => {
      const context = createExecutionContext();
      const response = await worker.fetch(
        new Request(`${origin}/v1/responses`, init) as never,
        { ...bindings, ...overrides } as never,
        context,
      );
      await waitOnExecutionContext(context);
      return response;
    };
    const preflight = {
      method: 'OPTIONS',
      headers: {
        origin: page,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization',
      },
    };
    const answered = await send(preflight, { CORS_ORIGINS: page });
    expect(answered.status).toBe(204);
    expect(answered.headers.get('access-control-allow-origin')).toBe(page);
    expect(answered.headers.get('access-control-allow-headers')).toContain('Authorization');
    const request = { method: 'POST', headers: { origin: page, 'content-type': 'application/json' }, body: '{}' };
    const refused = await send(request, { CORS_ORIGINS: page });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('access-control-allow-origin')).toBe(page);
    expect(refused.headers.get('x-request-id')).toMatch(/^req_/);

    const off = await send(preflight, {});
    expect(off.headers.get('access-control-allow-origin')).toBeNull();
  });
});
