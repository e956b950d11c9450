import { expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A busy 409 says when to come back (docs/API.md, "Busy sessions"): when the holder's lease runs
// out, in whole seconds (at least 1) and in ms.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '30000' };
const heldEcho = releasedAfterEach();

it('a 409 turn_in_progress carries Retry-After and retry-after-ms from the holder lease', async () => {
  let now = Date.parse('2026-01-01T00:00:00Z');
  const slow = heldEcho();
  const { options, drain } = heldOptions(slow.model);
  const api = createClient(
    appHarness(new MemoryStore(), environment, {
      ...options,
      logLine: () => {},
      clock: () => new Date(now),
    }),
  );
  const id = await api.session();
  const pending = api.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
  await expect.poll(() => slow.signals.length).toBe(1);
  const busy = async () => {
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'two' });
    expect(refused.status).toBe(409);
    expect(refused.body.error.details.lease_expires_at).toBe('2026-01-01T00:00:30.000Z');
    return [refused.headers.get('retry-after'), refused.headers.get('retry-after-ms')];
  };
  expect(await busy()).toEqual(['30', '30000']);
  now += 14_500;
  expect(await busy()).toEqual(['16', '15500']);
  now += 15_000;
  expect(await busy()).toEqual(['1', '500']);
  slow.release();
  expect((await pending).status).toBe(200);
  await drain();
});
