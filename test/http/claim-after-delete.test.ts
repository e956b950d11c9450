import { describe, expect, it } from 'vitest';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { appHarness } from '../support/app-harness.ts';
import { HeldStore } from '../support/held-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A turn whose claim (the create-only put of its record) is still in flight while another
// process deletes its session: the delete reads no turn to fence, and the claim lands after its
// sweep. The turn is answered as one that ran before the delete, and what it stored under the
// dead generation goes after its answer (lib/session/log/claimed-after-delete.ts): nothing is
// left, and a session created again under the id sees none of it. Held at the claim's put
// (test/support/held-store.ts), on the memory store and the file store.

const stores = await memoryAndFileStores('claim-after-delete');
const heldEcho = releasedAfterEach();

function world(storeOf: () => ObjectStore) {
  const store = new HeldStore(storeOf());
  const { options, drain } = heldOptions(heldEcho().model);
  const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '600000' };
  const one = createClient(appHarness(store, environment, options));
  const two = createClient(appHarness(store, environment, options));
  const left = async (id: string) => (await store.inner.list(`sessions/${id}/`)).objects.map((object) => object.key);
  /** Turn 1 of `id` sent with `headers`, its claim's put held: its answer, pending, and the hold. */
  const claiming = async (id: string, headers?: Record<string, string>, stream = false) => {
    const claim = store.hold(
      ({ operation, keys, options }) =>
        operation === 'put' && options?.onlyIfAbsent === true && /\/turn\/[^/]+\/\d+$/.test(keys[0]!),
    );
    const pending = one.post(`/v1/sessions/${id}/turns`, { input: 'before the delete', stream }, headers);
    await claim.reached;
    return { pending, claim };
  };
  return { one, two, drain, left, claiming, store };
}

describe.each(stores)('a turn whose claim lands after the delete of its session: %s', (_, storeOf) => {
  it.each([
    ['unkeyed', undefined, false],
    ['keyed', { 'Idempotency-Key': 'key-1' }, false],
    ['streamed, its events journaled', undefined, true],
  ])('leaves nothing of it once answered (%s)', async (_, headers, stream) => {
    const { one, two, drain, left, claiming } = world(storeOf);
    const id = await one.session();
    const { pending, claim } = await claiming(id, headers, stream);
    expect((await two.delete(`/v1/sessions/${id}`)).status).toBe(204);
    claim.release();
    const answered = await pending;
    // Linearized before the delete: its answer is the turn's, as it ran on the session read.
    expect(answered.status, JSON.stringify(answered.body)).toBe(200);
    if (stream) expect(answered.body).toContain('event: turn.completed');
    else expect(answered.body.turn).toBe(1);
    await drain();
    expect(await left(id)).toEqual([]);
    expect((await one.get(`/v1/sessions/${id}`)).status).toBe(404);
    // Created again, the id holds none of it: the same key runs a turn of its own with another input.
    await one.session({ id });
    expect((await one.get(`/v1/sessions/${id}`)).body.counts).toMatchObject({ items: 0, turns: 0 });
    expect((await one.get(`/v1/sessions/${id}/turns/1`)).status).toBe(404);
    const next = await one.post(`/v1/sessions/${id}/turns`, { input: 'after the delete' }, headers);
    expect(next.status, JSON.stringify(next.body)).toBe(200);
    expect(next.body.turn).toBe(1);
    expect(next.body.context.items_in_prompt).toBe(1);
  });

  it('removes it when the session was created again before it landed, keeping the new one whole', async () => {
    const { one, two, drain, left, claiming } = world(storeOf);
    const id = await one.session();
    const { pending, claim } = await claiming(id);
    expect((await two.delete(`/v1/sessions/${id}`)).status).toBe(204);
    await two.session({ id });
    const created = await left(id);
    claim.release();
    expect((await pending).status).toBe(200);
    await drain();
    expect(await left(id)).toEqual(created);
    expect((await one.get(`/v1/sessions/${id}`)).body.counts).toMatchObject({ items: 0, turns: 0 });
    const next = await one.post(`/v1/sessions/${id}/turns`, { input: 'after the delete' });
    expect(next.body.turn).toBe(1);
    expect(next.body.context.items_in_prompt).toBe(1);
  });

  it('removes it when the session was imported again from its export, its creation time the same', async () => {
    const { one, two, drain, left, claiming } = world(storeOf);
    const id = await one.session();
    const exported = await one.get(`/v1/sessions/${id}/export`);
    expect(exported.status).toBe(200);
    const { pending, claim } = await claiming(id);
    expect((await two.delete(`/v1/sessions/${id}`)).status).toBe(204);
    const imported = await two.call('POST', '/v1/sessions/import', exported.body, {
      'content-type': 'application/x-ndjson',
    });
    expect(imported.status, JSON.stringify(imported.body)).toBe(201);
    const created = await left(id);
    claim.release();
    expect((await pending).status).toBe(200);
    await drain();
    expect((await one.get(`/v1/sessions/${id}`)).body.counts).toMatchObject({ items: 0, turns: 0 });
    expect((await one.get(`/v1/sessions/${id}/turns/1`)).status).toBe(404);
    expect(await left(id)).toEqual(created);
  });

  it('keeps a turn a fork made after its answer reads, when its owner finds the session deleted', async () => {
    const { one, two, drain, store } = world(storeOf);
    const id = await one.session();
    // The owner's read of the session after the turn's completion, held until the fork and the delete ran.
    let completed = false;
    const refresh = store.hold(({ operation, keys }) => {
      if (operation === 'put' && keys[0]!.endsWith('.done')) completed = true;
      return completed && operation === 'get' && keys[0] === `sessions/${id}/session.json`;
    });
    const answered = await one.post(`/v1/sessions/${id}/turns`, { input: 'before the delete' });
    expect(answered.status).toBe(200);
    await refresh.reached;
    const fork = await two.post(`/v1/sessions/${id}/fork`, { at_turn: 1 });
    expect(fork.status, JSON.stringify(fork.body)).toBe(201);
    expect((await two.delete(`/v1/sessions/${id}`)).status).toBe(204);
    refresh.release();
    await drain();
    const items = await one.get(`/v1/sessions/${fork.body.id}/items`);
    expect(items.status, JSON.stringify(items.body)).toBe(200);
    expect(JSON.stringify(items.body)).toContain('before the delete');
  });

  it("journals none of its events into the session created again: that session's turn 1 reads its own", async () => {
    const { one, two, drain, left, claiming } = world(storeOf);
    const id = await one.session();
    const { pending, claim } = await claiming(id, undefined, true);
    expect((await two.delete(`/v1/sessions/${id}`)).status).toBe(204);
    await two.session({ id });
    claim.release();
    expect(await pending).toMatchObject({ status: 200 });
    await drain();
    expect((await left(id)).filter((key) => key.includes('/events/'))).toEqual([]);
    const next = await one.post(`/v1/sessions/${id}/turns`, { input: 'after the delete', stream: true });
    expect(next.body).toContain('event: turn.completed');
    await drain();
    const events = await one.get(`/v1/sessions/${id}/turns/1/events`);
    expect(events.status).toBe(200);
    expect(events.body).toContain('after the delete');
    expect(events.body).not.toContain('before the delete');
  });
});
