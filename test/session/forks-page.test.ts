import { describe, expect, it } from 'vitest';
import type { GetOptions, ListOptions, ListResult, StoredObject } from '../../lib/store/object-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SessionLog } from '../support/session-log.ts';
import { turnOf } from './rewind-simulation-suite.ts';

// GET /v1/sessions/{id}/forks on a session whose newest turn was deleted again and again: each
// delete leaves a reference of the session to itself (lib/session/log/rewind.ts), never listed,
// so a page reads on past them until it holds `limit` forks or the references end.

/** Counts the listings of session `base`'s fork references, and the gets of session configs. */
class CountedStore extends MemoryStore {
  listings = 0;
  configGets = 0;
  override async list(prefix: string, options?: ListOptions): Promise<ListResult> {
    if (prefix.startsWith('sessions/base/forks/')) this.listings += 1;
    return super.list(prefix, options);
  }
  override async get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    if (key.endsWith('/session.json')) this.configGets += 1;
    return super.get(key, options);
  }
}

/**
 * Session `base` with the forks `ids` of its first turn, then `deletes` deletes of its newest
 * turn: its references to itself (`base.<g>`) come before the forks' in key order.
 */
async function forkedThenDeleted(ids: string[], deletes: number) {
  const store = new CountedStore();
  const log = new SessionLog(store, { packMinRecords: 2, keepRecords: 1 });
  await log.create({ id: 'base' });
  await turnOf(log, 'base', 'kept');
  for (const id of ids) await log.fork('base', { at_turn: 1, fields: { id } });
  for (let n = 1; n <= deletes; n++) {
    await turnOf(log, 'base', `gone ${n}`);
    await log.deleteTurn('base', 2);
  }
  const references = (await store.list('sessions/base/forks/', { limit: 1000 })).objects.map((object) => object.key);
  expect(references.filter((key) => key.includes('/base.')).length).toBeGreaterThanOrEqual(deletes);
  expect(references.findIndex((key) => key.includes('/base.'))).toBeLessThan(
    references.findIndex((key) => !key.includes('/base.')),
  );
  return { store, log, references };
}

describe('the forks of a session deleted from many times', () => {
  it('a page of one holds the fork, however many references of the session to itself come first', async () => {
    const { log } = await forkedThenDeleted(['fork'], 20);
    expect(await log.listForks('base', { limit: 1 })).toEqual({
      forks: [{ id: 'fork', seq: 2, created_at: expect.any(String) }],
      has_more: false,
      next_after: null,
    });
  });

  it('every page holds `limit` forks while that many remain, and `has_more` is false only on the last', async () => {
    const { log } = await forkedThenDeleted(['fork-a', 'fork-b', 'fork-c'], 12);
    const pages: { ids: string[]; has_more: boolean }[] = [];
    let after: string | undefined;
    do {
      const page = await log.listForks('base', { limit: 2, ...(after !== undefined ? { after } : {}) });
      pages.push({ ids: page.forks.map((fork) => fork.id), has_more: page.has_more });
      after = page.next_after ?? undefined;
      expect(pages.length).toBeLessThan(5);
    } while (after !== undefined);
    expect(pages).toEqual([
      { ids: ['fork-a', 'fork-b'], has_more: true },
      { ids: ['fork-c'], has_more: false },
    ]);
  });

  it('reads at most five listings a page: past more references to itself, `next_after` goes on', async () => {
    const { store, log, references } = await forkedThenDeleted(['fork'], 1);
    // Thousands of references of the session to itself, before the fork's in key order.
    const under = references.find((key) => key.includes('/fork.'))!.replace(/fork\.[^/]*$/, '');
    const body = new Uint8Array();
    for (let n = 0; n < 4_200; n++) await store.put(`${under}base.g${String(n).padStart(21, '0')}`, body);
    store.listings = 0;
    const first = await log.listForks('base', { limit: 1 });
    expect(store.listings).toBe(5);
    expect(first).toMatchObject({ forks: [], has_more: true });
    store.listings = 0;
    const second = await log.listForks('base', { limit: 1, after: first.next_after! });
    // One of `limit` keys, then one of 1,000 reaching the fork past the 200 references left.
    expect(store.listings).toBe(2);
    expect(second).toMatchObject({ forks: [{ id: 'fork' }], has_more: false, next_after: null });
  });

  it('reads at most 200 configs a page: past more references of no fork, `next_after` goes on', async () => {
    const { store, log, references } = await forkedThenDeleted(['fork'], 1);
    // References of sessions that are gone (their forks' deletes never ran), before the fork's.
    const under = references.find((key) => key.includes('/fork.'))!.replace(/fork\.[^/]*$/, '');
    const body = new Uint8Array();
    for (let n = 0; n < 250; n++) await store.put(`${under}dead-${String(n).padStart(3, '0')}.g0`, body);
    store.configGets = 0;
    const first = await log.listForks('base', { limit: 1 });
    // The session's own config, then 200 of the references.
    expect(store.configGets).toBe(1 + 200);
    expect(first).toMatchObject({ forks: [], has_more: true });
    const second = await log.listForks('base', { limit: 1, after: first.next_after! });
    expect(second).toMatchObject({ forks: [{ id: 'fork' }], has_more: false, next_after: null });
  });
});
