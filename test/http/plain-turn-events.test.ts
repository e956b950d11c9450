import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ListOptions, ListResult } from '../../lib/store/object-store.ts';
import { appHarness } from '../support/app-harness.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { createClient, TOKEN } from './http-suite.ts';

// The events of a closed plain JSON turn (neither streamed nor in the background): its record
// says it has no journal, and none is ever written for it, so its events' reader answers 404 as
// soon as it finds the turn closed, having listed the journal once (no batch to wait for), however
// it was closed: by its own completion, or by someone else (a cancel through another process).

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };
const heldEcho = releasedAfterEach();

/** A memory store that counts the listings of turn event journals, and tells of the second. */
class JournalListings extends MemoryStore {
  count = 0;
  #second = () => {};
  readonly second = new Promise<'listed again'>((resolve) => (this.#second = () => resolve('listed again')));

  override async list(prefix: string, options?: ListOptions): Promise<ListResult> {
    if (prefix.includes('/events/') && ++this.count === 2) this.#second();
    return super.list(prefix, options);
  }
}

function world() {
  const store = new JournalListings();
  const slow = heldEcho();
  const { options } = heldOptions(slow.model);
  const owner = appHarness(store, environment, options);
  // Another process over the same store.
  const other = appHarness(store, environment, options);
  /** The events route's answer, or the reader's second listing of the journal, whichever comes first. */
  const readEvents = async (id: string) => {
    const answer = other
      .fetch(`/v1/sessions/${id}/turns/1/events`, { headers: { authorization: `Bearer ${TOKEN}` } })
      .then((response) => ({ status: response.status }));
    return Promise.race([answer, store.second]);
  };
  return { store, slow, api: createClient(owner), closer: createClient(other), readEvents };
}

describe("a closed plain JSON turn's events", () => {
  it('are 404 at once after its own completion', async () => {
    const { store, api, readEvents } = world();
    const id = await api.session();
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'plain' })).status).toBe(200);
    expect(await readEvents(id)).toEqual({ status: 404 });
    expect(store.count).toBe(1);
  });

  it("are 404 whose message says which turns journal events and where this one's outcome is", async () => {
    const { api } = world();
    const id = await api.session();
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'plain' })).status).toBe(200);
    const events = await api.get(`/v1/sessions/${id}/turns/1/events`);
    expect(events.status).toBe(404);
    expect(events.body.error).toMatchObject({ code: 'not_found', details: { id, turn: 1 } });
    expect(events.body.error.message).toContain('only streamed and background turns journal their events');
    expect(events.body.error.message).toContain(`GET /v1/sessions/${id}/turns/1`);
  });

  it('are 404 at once after another process cancelled it while it runs', async () => {
    const { store, slow, api, closer, readEvents } = world();
    const id = await api.session();
    const pending = api.post(`/v1/sessions/${id}/turns`, { input: 'slow plain' });
    await expect.poll(() => slow.signals.length).toBe(1);
    await expect.poll(async () => (await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('in_progress');
    expect((await closer.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    expect(await readEvents(id)).toEqual({ status: 404 });
    expect(store.count).toBe(1);
    slow.release();
    expect((await pending).body).toMatchObject({ error: { code: 'turn_cancelled' } });
  });
});
