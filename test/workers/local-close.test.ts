import { describe, expect, inject, it } from 'vitest';
import { parseSse, TOKEN } from '../http/http-suite.ts';
import { workerHarness } from './worker-harness.ts';

// A turn closed by another request of the isolate that runs it (lib/turn/running.ts): the turn
// runs in this test's own request context (the worker's fetch called here, its model a loopback
// provider that never answers: test/support/workers-global-setup.ts), the close goes through
// SELF, another request in the same isolate, which shares the worker's registry of running
// turns. Leases and model calls last ten minutes, so nothing but that close stops the turn
// within the test: its answer must still be its own request's (409, or 404, and a streamed
// turn's error event) after the close is served elsewhere.

const harness = workerHarness();
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const held = {
  OPENAI_COMPATIBLE_BASE_URL: inject('hangingModelBaseUrl'),
  OPENAI_COMPATIBLE_API_KEY: 'test',
  MODEL_MAX_RETRIES: '0',
  MODEL_TIMEOUT_MS: '600000',
  TURN_LEASE_MS: '600000',
};

/** Starts turn 1 of a new session in this context; resolves once its record landed. */
async function runningTurn(stream: boolean): Promise<{ id: string; answered: Promise<Response> }> {
  const id = `local-close-${crypto.randomUUID()}`;
  const created = await harness.fetch('/v1/sessions', { method: 'POST', headers, body: JSON.stringify({ id }) });
  expect(created.status).toBe(201);
  const answered = harness.fetchWithEnv(held, `/v1/sessions/${id}/turns`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ input: 'held', model: 'openai-compatible:m', ...(stream ? { stream: true } : {}) }),
  });
  await expect
    .poll(async () => {
      const turn = await harness.fetch(`/v1/sessions/${id}/turns/1`, { headers });
      return ((await turn.json()) as { status?: string }).status;
    })
    .toBe('in_progress');
  return { id, answered };
}

describe('a turn closed by another request of its isolate', () => {
  it('a cancel: the turn is answered 409 turn_cancelled by its own request', async () => {
    const { id, answered } = await runningTurn(false);
    // Meanwhile another turn is refused, its 409 naming the holder's lease (its renewal read when answered).
    const busy = await harness.fetch(`/v1/sessions/${id}/turns`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ input: 'two' }),
    });
    const refused = (await busy.json()) as { error: { code: string; details: { lease_expires_at: string } } };
    expect(busy.status, JSON.stringify(refused)).toBe(409);
    expect(refused.error.code).toBe('turn_in_progress');
    expect(Date.parse(refused.error.details.lease_expires_at)).toBeGreaterThan(Date.now());
    expect(Number(busy.headers.get('retry-after'))).toBeGreaterThan(0);
    const cancelled = await harness.fetch(`/v1/sessions/${id}/turns/1/cancel`, { method: 'POST', headers });
    expect(cancelled.status).toBe(200);
    const response = await answered;
    const body = (await response.json()) as { error: { code: string } };
    expect(response.status, JSON.stringify(body)).toBe(409);
    expect(body.error.code).toBe('turn_cancelled');
    // A cancel's 409: the cancelled input is not to be sent again.
    expect(response.headers.get('x-should-retry')).toBe('false');
  });

  it('a delete: the streamed turn ends with its error event not_found', async () => {
    const { id, answered } = await runningTurn(true);
    expect((await harness.fetch(`/v1/sessions/${id}`, { method: 'DELETE', headers })).status).toBe(204);
    const response = await answered;
    expect(response.status).toBe(200);
    const events = parseSse(await response.text());
    expect(events.at(-1)).toMatchObject({ event: 'error', data: { error: { code: 'not_found' } } });
  });
});
