import { createExecutionContext, env, waitOnExecutionContext } from 'cloudflare:test';
import { expect, it } from 'vitest';
import worker from '../../functions/worker.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';

// A background turn cancelled while queued never runs: its runner finds it closed and writes
// nothing, so the cancel is the last write of the session until its next turn. The session
// listing (GET /v1/sessions) then shows the row the cancel left, as GET /v1/sessions/{id} does.

const bindings = env as unknown as Record<string, unknown>;

/** One request through the worker with `vars` over the bindings, to its end (waitUntil too). */
async function call(vars: Record<string, unknown>, method: string, path: string, body?: unknown): Promise<any> {
  const context = createExecutionContext();
  const init: RequestInit = { method, headers: { authorization: 'Bearer test-token' } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = { ...init.headers, 'content-type': 'application/json' };
  }
  const response = await worker.fetch(
    new Request(`https://tailgate.test${path}`, init) as never,
    { ...bindings, ...vars } as never,
    context,
  );
  await waitOnExecutionContext(context);
  return { status: response.status, body: await response.json() };
}

it('lists a session whose queued background turn was cancelled with that turn', async () => {
  // A prefix of its own: the listing holds this test's session alone.
  const KEY_PREFIX = `${crypto.randomUUID()}/`;
  // Messages are kept, not delivered: the turn stays queued until the cancel.
  const sent: BackgroundTurn[] = [];
  const vars = { KEY_PREFIX, TURNS: { send: async (run: BackgroundTurn) => void sent.push(run) } };
  expect((await call(vars, 'POST', '/v1/sessions', { id: 's' })).status).toBe(201);
  const queued = await call(vars, 'POST', '/v1/sessions/s/turns', { input: 'later', background: true });
  expect(queued.status, JSON.stringify(queued.body)).toBe(202);
  expect(sent).toHaveLength(1);
  const cancelled = await call(vars, 'POST', '/v1/sessions/s/turns/1/cancel');
  expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
  const session = await call(vars, 'GET', '/v1/sessions/s');
  expect(session.body.counts).toEqual({ items: 1, turns: 1, tool_calls: 0 });
  const listing = await call(vars, 'GET', '/v1/sessions');
  expect(listing.body.sessions).toHaveLength(1);
  expect(listing.body.sessions[0]).toMatchObject({ id: 's', counts: session.body.counts });
});
