import { describe, expect, it } from 'vitest';
import { CorruptObjectError } from '../../lib/errors.ts';
import { sha256Hex } from '../../lib/hash.ts';
import { echoModel } from '../../lib/models/echo.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { listAll, type ObjectStore } from '../../lib/store/object-store.ts';
import { claimBackgroundTurn } from '../../lib/turn/background.ts';
import { sweepQueues } from '../../lib/turn/index.ts';
import { turnWorld } from '../support/turn-world.ts';

// The sweep of queues (lib/turn/queue-sweep.ts) and a marked session whose open turn no runner
// holds (a background turn its queue gave up marks its session, functions/worker.ts): the
// session stays marked while the turn's lease runs, and the first sweep after the lease ran out
// closes the turn (failed, `lease_expired`), as any closer of a lapsed lease, and unmarks it.

const LEASE_MS = 3000;

function world() {
  const store = new MemoryStore();
  let now = Date.parse('2030-01-01T00:00:00Z');
  const kept: Promise<unknown>[] = [];
  const { sessions, services } = turnWorld(store, echoModel, { clock: () => new Date(now), leaseMs: LEASE_MS, kept });
  return {
    store,
    sessions,
    services: { ...services, sessions },
    advance: (ms: number) => {
      now += ms;
    },
    settle: async () => {
      while (kept.length > 0) await Promise.all(kept.splice(0));
    },
  };
}

const markers = async (store: ObjectStore) => (await listAll(store, 'queues/')).map((object) => object.key);

/** Session `s` with background turn 1 claimed, whose runner never comes, and marked as its give-up marks it. */
async function givenUp(w: ReturnType<typeof world>): Promise<void> {
  await w.sessions.create({ id: 's', model: 'echo' });
  expect((await claimBackgroundTurn(w.services, 's', { input: 'hi' })).run).toBeDefined();
  await w.store.put('queues/s', '');
}

/** Overwrites session `s`'s newest turn record with what no reader can parse. */
async function corruptNewest(store: ObjectStore): Promise<void> {
  const turns = (await listAll(store, 'sessions/s/turn/')).map((object) => object.key).sort();
  await store.put(turns.at(-1)!, 'not json');
}

describe('the sweep of queues and a marked session with an open turn', () => {
  it('keeps the session marked while the turn’s lease runs, then closes the turn and unmarks it', async () => {
    const w = world();
    await givenUp(w);
    expect(await sweepQueues(w.services)).toEqual({ checked: 1, unmarked: 0, failed: [] });
    await w.settle();
    expect(await w.sessions.getTurn('s', 1)).toMatchObject({ status: 'queued' });
    expect(await markers(w.store)).toEqual(['queues/s']);

    w.advance(LEASE_MS + 1);
    expect(await sweepQueues(w.services)).toEqual({ checked: 1, unmarked: 1, failed: [] });
    await w.settle();
    expect(await w.sessions.getTurn('s', 1)).toMatchObject({ status: 'failed', error: { code: 'lease_expired' } });
    expect(await markers(w.store)).toEqual([]);
  });

  it('unmarks the session at the first sweep after its open turn was closed otherwise (a cancel)', async () => {
    const w = world();
    await givenUp(w);
    expect(await sweepQueues(w.services)).toEqual({ checked: 1, unmarked: 0, failed: [] });
    // Its turn is cancelled (as a client would): nothing runs, the session is unmarked at once.
    await w.sessions.cancelTurn('s', 1);
    await w.settle();
    expect(await sweepQueues(w.services)).toEqual({ checked: 1, unmarked: 1, failed: [] });
    expect(await w.sessions.getTurn('s', 1)).toMatchObject({ status: 'cancelled' });
    expect(await markers(w.store)).toEqual([]);
  });

  it('tells a session whose newest record is corrupt once, and unmarks it when nothing is queued', async () => {
    const w = world();
    await givenUp(w);
    await corruptNewest(w.store);
    const sweep = await sweepQueues(w.services);
    expect(sweep).toMatchObject({ checked: 1, unmarked: 1 });
    expect(sweep.failed.map(({ id, error }) => [id, error instanceof CorruptObjectError])).toEqual([['s', true]]);
    expect(await markers(w.store)).toEqual([]);
    // Nothing is left to sweep: the session is no longer tried (its readers meet the corrupt record).
    expect(await sweepQueues(w.services)).toEqual({ checked: 0, unmarked: 0, failed: [] });
  });

  it('keeps a session whose newest record is corrupt marked, told at each sweep, while input is queued', async () => {
    const w = world();
    await givenUp(w);
    const input = [{ type: 'message' as const, role: 'user' as const, content: 'later' }];
    await w.sessions.enqueue('s', { input, request: {}, key_sha256: sha256Hex('later') });
    await corruptNewest(w.store);
    for (let sweeps = 0; sweeps < 2; sweeps++) {
      const sweep = await sweepQueues(w.services);
      expect(sweep).toMatchObject({ checked: 1, unmarked: 0 });
      expect(sweep.failed.map(({ id, error }) => [id, error instanceof CorruptObjectError])).toEqual([['s', true]]);
      // Its input waits, marked: nothing queued is left behind.
      expect(await markers(w.store)).toEqual(['queues/s']);
    }
  });
});
