import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { CountingStore, type StoreCounts } from '../support/counting-store.ts';

/**
 * What the inspector's live updates (functions/ui/client/poll.ts) cost in storage calls, as
 * docs/DEVELOPING.md ("Inspector") states them: a poll of an open session reads the session
 * (GET /v1/sessions/{id}), a poll of the list reads the index's first page; neither writes, so
 * a turn costs what it costs without them.
 */
const TOKEN = 'poll-token';

function setup() {
  const store = new CountingStore(new MemoryStore());
  const background: Promise<unknown>[] = [];
  const executionContext = {
    waitUntil: (task: Promise<unknown>) => void background.push(task),
    passThroughOnException: () => {},
    props: {},
  };
  const app = createApp({
    store: () => store,
    readEnvironment: () => ({ API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' }),
    log: () => {},
  });
  const call = async (method: string, path: string, body?: unknown) => {
    const headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const init = { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) };
    const response = await app.request(path, init, {}, executionContext);
    expect(response.status).toBeLessThan(300);
    return response.json() as Promise<any>;
  };
  /** The calls of one request, once the work after the previous one's answer (packing) is done. */
  const counted = async (method: string, path: string, body?: unknown): Promise<StoreCounts> => {
    await Promise.all(background.splice(0));
    store.reset();
    await call(method, path, body);
    const counts = store.counts;
    await Promise.all(background.splice(0));
    return counts;
  };
  return { call, counted, operations: (counts: StoreCounts) => counts.get + counts.list + counts.head };
}

describe('the inspector’s polls in storage calls', () => {
  it('an idle session costs at most 5 reads a poll, the session list 1 listing, and neither writes', async () => {
    const { call, counted, operations } = setup();
    await call('POST', '/v1/sessions', { id: 'polled' });
    await call('POST', '/v1/sessions', { id: 'other' });
    const sessionPolls: number[] = [];
    const listPolls: number[] = [];
    for (let turn = 1; turn <= 40; turn++) {
      await call('POST', '/v1/sessions/polled/turns', { input: `t${turn}` });
      for (const [path, costs] of [
        ['/v1/sessions/polled', sessionPolls],
        ['/v1/sessions?limit=30', listPolls],
      ] as const) {
        const counts = await counted('GET', path);
        expect([counts.put, counts.delete]).toEqual([0, 0]);
        costs.push(operations(counts));
      }
    }
    // The session's config, a listing of its records (one page: the newest record's keys and
    // the next record's fit, packed or not) and the newest record's completion; the record itself
    // from the record cache (lib/session/log/record-cache.ts: the listing shows it with the etag
    // its put returned in this process; a process that has not read it gets it, a fourth).
    expect(new Set(sessionPolls)).toEqual(new Set([3]));
    expect(new Set(listPolls)).toEqual(new Set([1]));
  });

  it('a turn costs the same with the session polled between its neighbours', async () => {
    const { call, counted } = setup();
    await call('POST', '/v1/sessions', { id: 'alone' });
    await call('POST', '/v1/sessions', { id: 'watched' });
    for (let turn = 1; turn <= 6; turn++) {
      const alone = await counted('POST', '/v1/sessions/alone/turns', { input: `t${turn}` });
      for (let poll = 0; poll < 3; poll++) await call('GET', '/v1/sessions/watched');
      const watched = await counted('POST', '/v1/sessions/watched/turns', { input: `t${turn}` });
      const calls = ({ get, head, put, list, delete: deletes }: StoreCounts) => [get, head, put, list, deletes];
      expect(calls(watched)).toEqual(calls(alone));
    }
  });
});
