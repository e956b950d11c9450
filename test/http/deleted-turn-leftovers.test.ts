import { describe, expect, it } from 'vitest';
import type { Model } from '../../lib/models/model.ts';
import { ModelError } from '../../lib/models/errors.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { appHarness } from '../support/app-harness.ts';
import { HeldStore } from '../support/held-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A running turn and a delete of its session by another process, racing: the turn's notices
// and its lease land in no session. What the turn took from the inbox goes with the session
// (never given back after the delete's sweep, nor into a session created again under the id),
// and a lease renewal in flight as the delete ran leaves no `.lease` under the dead generation.
// Each race is held at one storage call (test/support/held-store.ts). On the memory store and
// the file store.

const stores = await memoryAndFileStores('deleted-turn-leftovers');
const heldEcho = releasedAfterEach();

/**
 * Two processes over one store whose calls the test holds; `one` runs the held model (`failing`:
 * which, once released, fails with a provider's error instead of answering).
 */
function world(storeOf: () => ObjectStore, leaseMs = 600_000, failing = false) {
  const store = new HeldStore(storeOf());
  const slow = heldEcho();
  const { options, drain } = heldOptions(failing ? failed(slow.model) : slow.model);
  const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: String(leaseMs) };
  const one = createClient(appHarness(store, environment, options));
  const two = createClient(appHarness(store, environment, options));
  const calling = () => expect.poll(() => slow.signals.length).toBe(1);
  const left = async (id: string, under = '') =>
    (await store.inner.list(`sessions/${id}/${under}`)).objects.map((object) => object.key);
  /** A session of the inbox strategy whose turn 1 holds its model call, having taken `note`: its answer, pending. */
  const tookNote = async (id: string) => {
    expect((await one.post(`/v1/sessions/${id}/inbox`, note)).status).toBe(201);
    const pending = one.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
    await calling();
    await expect.poll(() => left(id, 'inbox_removed/')).toHaveLength(1);
    return { pending };
  };
  /** Turn 1 of `id` holding its model call while a renewal's put of its lease is held: its answer, pending. */
  const renewing = async (id: string) => {
    const pending = one.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
    await calling();
    const renewal = store.hold(({ operation, keys }) => operation === 'put' && keys[0]!.endsWith('.lease'));
    await renewal.reached;
    return { pending, renewal };
  };
  return { store, one, two, slow, drain, calling, left, tookNote, renewing };
}

// The turn holds its model call: its prompt ends with the notice (test/support/slow-echo.ts).
const note = { name: 'note.md', content: 'slow note' };

/** `model`, but each call, once `model` answered it, fails as a provider's would. */
function failed(model: Model): Model {
  const down = () => new ModelError('the provider failed', { model: model.id });
  return {
    ...model,
    async generate(request) {
      await model.generate(request);
      throw down();
    },
    async *stream(request) {
      yield* model.stream(request);
      throw down();
    },
  };
}

describe.each(stores)('a turn racing the delete of its session: %s', (_, storeOf) => {
  it('gives no notice back after the delete swept: the inbox stays empty, one created again sees none', async () => {
    const { store, one, two, slow, drain, left, tookNote } = world(storeOf);
    const id = await one.session({ strategies: ['inbox'] });
    const { pending } = await tookNote(id);
    // The delete's sweep listed the session and waits to delete what it listed.
    const sweep = store.hold(
      ({ operation, keys }) => operation === 'delete' && keys.some((key) => key.includes('/inbox_removed/')),
    );
    const deleting = two.delete(`/v1/sessions/${id}`);
    await sweep.reached;
    // The turn's completion is refused by the delete's fence meanwhile.
    slow.release();
    const answered = await pending;
    expect(answered.status, JSON.stringify(answered.body)).toBe(404);
    sweep.release();
    expect((await deleting).status).toBe(204);
    await drain();
    expect(await left(id, 'inbox')).toEqual([]);
    await one.session({ id, strategies: ['inbox'] });
    expect((await one.get(`/v1/sessions/${id}/inbox`)).body.pending).toEqual([]);
    const next = await one.post(`/v1/sessions/${id}/turns`, { input: 'what is new?' });
    expect(next.body.context.notices_delivered).toEqual([]);
  });

  // The model answers (its completion refused by the fence), or fails (its failed completion refused).
  it.each([
    ['answers', false],
    ['fails', true],
  ])(
    "removes a notice's move that landed after the sweep: nothing of the session is left (the model %s)",
    async (_, failing) => {
      const { store, one, two, slow, drain, calling, left } = world(storeOf, 600_000, failing);
      const id = await one.session({ strategies: ['inbox'] });
      expect((await one.post(`/v1/sessions/${id}/inbox`, note)).status).toBe(201);
      // The move's claim (create-only) waits until the delete ended.
      const move = store.hold(({ operation, keys }) => operation === 'put' && keys[0]!.includes('/inbox_removed/'));
      const pending = one.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
      await calling();
      await move.reached;
      expect((await two.delete(`/v1/sessions/${id}`)).status).toBe(204);
      move.release();
      slow.release();
      const answered = await pending;
      expect(answered.status, JSON.stringify(answered.body)).toBe(404);
      await drain();
      expect(await left(id)).toEqual([]);
    },
  );

  it('a notice a cancelled turn gives back as the session is deleted and created again lands in neither', async () => {
    const { store, one, two, slow, drain, left, tookNote } = world(storeOf);
    const id = await one.session({ strategies: ['inbox'] });
    const { pending } = await tookNote(id);
    // The give-back's post of the notice waits while the id is deleted and created again.
    const given = store.hold(
      ({ operation, keys }) => operation === 'put' && keys[0] === `sessions/${id}/inbox/note.md`,
    );
    expect((await two.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    slow.release();
    await given.reached;
    expect((await two.delete(`/v1/sessions/${id}`)).status).toBe(204);
    await two.session({ id, strategies: ['inbox'] });
    given.release();
    const answered = await pending;
    expect(answered.status, JSON.stringify(answered.body)).toBe(409);
    await drain();
    expect(await left(id, 'inbox/')).toEqual([]);
    expect((await one.get(`/v1/sessions/${id}/inbox`)).body.pending).toEqual([]);
    const next = await one.post(`/v1/sessions/${id}/turns`, { input: 'what is new?' });
    expect(next.body.context.notices_delivered).toEqual([]);
  });

  it('a lease renewal in flight as the session is deleted leaves no lease (nor fence) behind', async () => {
    // TURN_LEASE_MS 3000: a renewal every second.
    const { one, two, slow, drain, left, renewing } = world(storeOf, 3000);
    const id = await one.session();
    // A renewal asked whether the turn was closed (no), and its put waits while the delete runs.
    const { pending, renewal } = await renewing(id);
    expect((await two.delete(`/v1/sessions/${id}`)).status).toBe(204);
    renewal.release();
    // The next renewal finds the delete's fence and stops the turn.
    await expect.poll(() => slow.signals[0]?.aborted, { timeout: 10_000 }).toBe(true);
    expect((await pending).status).toBe(404);
    await drain();
    expect(await left(id)).toEqual([]);
  });

  it('answers a turn stopped in its process while a lease renewal hangs, and leaves nothing once it ends', async () => {
    // TURN_LEASE_MS 3000: a renewal every second.
    const { one, drain, left, renewing } = world(storeOf, 3000);
    const id = await one.session();
    // A renewal's put that does not answer (a connection that hangs) until the end.
    const { pending, renewal } = await renewing(id);
    // The delete in the turn's own process stops it: its answer waits for no renewal.
    expect((await one.delete(`/v1/sessions/${id}`)).status).toBe(204);
    const answered = await pending;
    expect(answered.status, JSON.stringify(answered.body)).toBe(404);
    // Once the renewal ended, its lease (put after the sweep) goes, with the fence.
    renewal.release();
    await drain();
    expect(await left(id)).toEqual([]);
  });

  it('answers a turn cancelled in its process while a lease renewal hangs', async () => {
    const { one, drain, renewing } = world(storeOf, 3000);
    const id = await one.session();
    const { pending, renewal } = await renewing(id);
    expect((await one.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    const answered = await pending;
    expect(answered.status, JSON.stringify(answered.body)).toBe(409);
    renewal.release();
    await drain();
    expect((await one.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('cancelled');
  });
});
