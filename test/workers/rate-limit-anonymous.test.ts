import { expect, it } from 'vitest';
import { freshId } from '../http/http-suite.ts';
import { bindings, workerHarness } from './worker-harness.ts';

const harness = workerHarness();

it('anonymous turns share one per-token key whatever Authorization header they carry', async () => {
  // A deployment with anonymous access (no API_TOKEN, no TOKEN_SIGNING_KEY) and a per-token limit of 3.
  const anonymous = {
    ALLOW_ANONYMOUS: 'true',
    API_TOKEN: undefined,
    TOKEN_SIGNING_KEY: undefined,
    TURN_LIMIT_PER_TOKEN: bindings.TEST_TURN_LIMIT,
  } as unknown as Record<string, string>;
  const send = (path: string, body: unknown) =>
    harness.fetchWithEnv(anonymous, path, {
      method: 'POST',
      // Any bearer text: anonymous access does not look at it.
      headers: { authorization: `Bearer ${crypto.randomUUID()}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const statuses: number[] = [];
  // The binding counts minutes aligned to the clock: two windows hold at most 6.
  for (let turn = 0; turn < 7; turn++) {
    const id = freshId('rl-anon');
    expect((await send('/v1/sessions', { id })).status).toBe(201);
    statuses.push((await send(`/v1/sessions/${id}/turns`, { input: 'hi' })).status);
  }
  expect(statuses).toContain(429);
});
