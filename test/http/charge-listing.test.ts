import { expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A turn whose claim's record put failed after its model call started stores nothing of itself;
// what the call spent is stored as a charge of the session once the call settled, after the
// response (lib/turn/unlanded.ts). A read of the session counts it at once, and so does the
// session listing's row once the charge landed: its entry is written again then.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };

it("lists a session's charge, stored after its failed turn was answered, in its row", async () => {
  const store = new FaultyStore(new MemoryStore());
  const tasks: Promise<unknown>[] = [];
  const api = createClient(appHarness(store, environment, { afterResponse: (task) => void tasks.push(task) }));
  const drain = async () => {
    while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
  };
  const id = await api.session();
  const first = await api.post(`/v1/sessions/${id}/turns`, { input: 'first' });
  expect(first.status).toBe(200);
  await drain();
  // Turn 2's record put fails: the echo model answered meanwhile, and that call is charged.
  store.failWhen(({ operation, key }) => operation === 'put' && /\/turn\/[^/]+\/\d{12}$/.test(key), { times: 1 });
  const failed = await api.post(`/v1/sessions/${id}/turns`, { input: 'second' });
  expect(failed.status).toBe(503);
  await drain();
  expect((await store.list(`sessions/${id}/turn/`, { limit: 100 })).objects.map((o) => o.key)).toContainEqual(
    expect.stringContaining('-charge-'),
  );
  const session = (await api.get(`/v1/sessions/${id}`)).body;
  expect(session.counts).toMatchObject({ turns: 1 });
  expect(session.usage.input_tokens).toBeGreaterThan(first.body.usage.input_tokens);
  const listing = (await api.get('/v1/sessions')).body;
  expect(listing.sessions).toHaveLength(1);
  expect(listing.sessions[0]).toMatchObject({ id, counts: session.counts, usage: session.usage });
});
