import { expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { FaultyStore } from '../support/faulty-store.ts';
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

// Within the lease its record took, a turn renews it beside its record (every third of it): the
// 409 names that renewal, which holds the session were the turn's process to die now.
it('a 409 within the lease the holder claimed names the lease it renewed since', async () => {
  const slow = heldEcho();
  const { options, drain } = heldOptions(slow.model);
  const memory = new MemoryStore();
  let renewal = (_key: string) => {};
  const renewed = new Promise<string>((resolve) => (renewal = resolve));
  const store = new FaultyStore(memory).failWhen((call) => {
    if (call.operation === 'put' && call.key.endsWith('.lease')) renewal(call.key);
    return false;
  });
  const api = createClient(
    appHarness(store, { ...environment, TURN_LEASE_MS: '3000' }, { ...options, logLine: () => {} }),
  );
  const id = await api.session();
  const pending = api.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
  const key = await renewed;
  const leaseOf = async () => {
    const object = await memory.get(key);
    return object ? (JSON.parse(new TextDecoder().decode(object.body)) as { lease_expires_at: string }) : null;
  };
  await expect.poll(leaseOf).not.toBeNull();
  const lease = Date.parse((await leaseOf())!.lease_expires_at);
  const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'two' });
  expect(refused.status).toBe(409);
  const named = Date.parse(refused.body.error.details.lease_expires_at);
  expect(named).toBeGreaterThanOrEqual(lease);
  slow.release();
  expect((await pending).status).toBe(200);
  await drain();
});

// The renewal is read only once the 409 is the answer: that read failing leaves the 409 as it
// was, naming the lease the holder's record took, never a 5xx.
it('a 409 whose renewal cannot be read names the lease the holder claimed', async () => {
  const slow = heldEcho();
  const { options, drain } = heldOptions(slow.model);
  const memory = new MemoryStore();
  let renewal = (_key: string) => {};
  const renewed = new Promise<string>((resolve) => (renewal = resolve));
  let failing = false;
  const store = new FaultyStore(memory).failWhen((call) => {
    if (call.operation === 'put' && call.key.endsWith('.lease')) renewal(call.key);
    return failing && call.operation === 'get' && call.key.endsWith('.lease');
  });
  const api = createClient(
    appHarness(store, { ...environment, TURN_LEASE_MS: '3000' }, { ...options, logLine: () => {} }),
  );
  const id = await api.session();
  const pending = api.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
  const key = await renewed;
  const leaseOf = async () => {
    const object = await memory.get(key);
    return object ? (JSON.parse(new TextDecoder().decode(object.body)) as { lease_expires_at: string }) : null;
  };
  await expect.poll(leaseOf).not.toBeNull();
  const lease = Date.parse((await leaseOf())!.lease_expires_at);
  failing = true;
  const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'two' });
  failing = false;
  expect(refused.status).toBe(409);
  expect(refused.body.error.code).toBe('turn_in_progress');
  expect(Date.parse(refused.body.error.details.lease_expires_at)).toBeLessThan(lease);
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  slow.release();
  expect((await pending).status).toBe(200);
  await drain();
});
