import { createExecutionContext, env, waitOnExecutionContext } from 'cloudflare:test';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import worker from '../../functions/worker.ts';
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

async function call(path: string, body?: unknown, overrides: Record<string, string> = {}, method = 'POST') {
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
    expect((await call(`/v1/sessions/${id}/turns`, { input: 'a private prompt' })).status).toBe(200);
    const turns = lines.filter((line) => line.startsWith('{"level"'));
    expect(turns).toHaveLength(1);
    const line = JSON.parse(turns[0]!);
    expect(line).toMatchObject({ event: 'turn', session_id: id, turn: 1, status: 'completed', model: 'echo' });
    expect(line.tokens.output).toBeGreaterThan(0);
    expect(line.cost_usd).toBe(0);
    expect(line.storage_ops.put).toBeGreaterThan(0);
    expect(turns[0]).not.toContain('a private prompt');

    lines.length = 0;
    await call(`/v1/sessions/${id}/turns`, { input: 'a logged prompt' }, { LOG_CONTENT: 'true' });
    expect(JSON.parse(lines.find((entry) => entry.startsWith('{"level"'))!).input).toBe('a logged prompt');
  });

  it('the Worker serves no /metrics', async () => {
    expect((await call('/metrics', undefined, {}, 'GET')).status).toBe(404);
  });
});
