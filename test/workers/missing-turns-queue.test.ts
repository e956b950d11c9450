import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import worker from '../../functions/worker.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { freshId } from '../http/http-suite.ts';
import { bindings, consoleErrors } from './worker-harness.ts';

// A Worker deployed without the queue of background turns (TURNS, wrangler.toml's
// [[queues.producers]]; an [env.<name>] does not inherit it): its background turns run in the
// isolate, each logged as an error naming the binding, not silently cut short by waitUntil.

const origin = 'https://tailgate.test';
const errors = consoleErrors();

async function call(path: string, body: unknown, overrides: Record<string, unknown> = {}) {
  const context = createExecutionContext();
  const response = await worker.fetch(
    new Request(`${origin}${path}`, {
      method: 'POST',
      headers: { authorization: 'Bearer test-token', 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }) as never,
    { ...bindings, ...overrides } as never,
    context,
  );
  await waitOnExecutionContext(context);
  return response;
}

describe('a Worker deployed without the TURNS binding', () => {
  it('runs a background turn in the isolate, and logs an error naming the missing binding', async () => {
    const id = freshId('wnoqueue');
    expect((await call('/v1/sessions', { id }, { TURNS: undefined })).status).toBe(201);
    const answered = await call(`/v1/sessions/${id}/turns`, { input: 'hi', background: true }, { TURNS: undefined });
    expect(answered.status).toBe(202);
    expect(errors.filter((line) => line.includes('TURNS'))).toEqual([
      expect.stringContaining(`background turn 1 of session ${id} runs in this isolate`),
    ]);
  });

  it('logs nothing of the kind when the binding is there', async () => {
    const id = freshId('wqueue');
    const sent: BackgroundTurn[] = [];
    const turns = { send: async (run: BackgroundTurn) => void sent.push(run) };
    expect((await call('/v1/sessions', { id }, { TURNS: turns })).status).toBe(201);
    expect((await call(`/v1/sessions/${id}/turns`, { input: 'hi', background: true }, { TURNS: turns })).status).toBe(
      202,
    );
    expect(sent).toEqual([expect.objectContaining({ session_id: id, turn: 1 })]);
    expect(errors.filter((line) => line.includes('TURNS'))).toEqual([]);
  });
});
