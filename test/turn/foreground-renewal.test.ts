import { afterEach, describe, expect, it, vi } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { Body, GetOptions, ObjectInfo, PutOptions, StoredObject } from '../../lib/store/object-store.ts';
import { runTurn } from '../../lib/turn/index.ts';
import { CountingStore } from '../support/counting-store.ts';
import { HeldStore } from '../support/held-store.ts';
import { SessionLog } from '../support/session-log.ts';
import { hookedEcho, turnWorld } from '../support/turn-world.ts';

/**
 * What a foreground turn's lease renewals cost: a turn shorter than a renewal renews nothing and
 * reads nothing more than before (its storage calls are counted by test/turn/depth.test.ts and
 * test/session/session-log-cost.test.ts); a longer one reads its `.done` once per renewal, before
 * it puts its `.lease`, and completes as usual when nobody closed it; a turn whose session was
 * deleted removes its lease after every renewal under way. Time is the test's.
 */

const LEASE_MS = 30_000;

/** A store that keeps, in order, each get of a `.done` and each put of a `.lease`. */
class RenewalStore extends CountingStore {
  readonly renewals: string[] = [];

  override async get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    if (key.endsWith('.done')) this.renewals.push('read .done');
    return super.get(key, options);
  }

  override async put(key: string, body: Body, options?: PutOptions): Promise<ObjectInfo | null> {
    if (key.endsWith('.lease')) this.renewals.push('put .lease');
    return super.put(key, body, options);
  }
}

async function world() {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  const clock = () => new Date();
  const counted = new RenewalStore(new MemoryStore({ clock }));
  // Its calls the test may hold (test/support/held-store.ts).
  const store = new HeldStore(counted);
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let calls = 0;
  const model = hookedEcho('echo', async (request) => {
    calls++;
    if (JSON.stringify(request.prompt.at(-1)).includes('slow')) await released;
  });
  const { sessions, services } = turnWorld(store, model, { clock, leaseMs: LEASE_MS });
  await sessions.create({ id: 's' });
  return { store, renewals: counted.renewals, services, release, calls: () => calls };
}

describe("a foreground turn's lease renewals", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('a turn shorter than a renewal reads no completion and puts no lease', async () => {
    const { renewals, services } = await world();
    const response = await runTurn(services, 's', { input: 'quick' });
    expect(response.output).toMatchObject([{ content: 'echo: quick' }]);
    expect(renewals).toEqual([]);
  });

  it('a longer one reads its completion once a renewal, then puts its lease, and completes', async () => {
    const { renewals, services, release, calls } = await world();
    let settled = false;
    const turn = runTurn(services, 's', { input: 'slow' }).finally(() => (settled = true));
    for (let step = 0; step < 100 && calls() === 0; step++) await vi.advanceTimersByTimeAsync(10);
    expect(calls()).toBe(1);
    // Three renewals, a third of the lease apart.
    await vi.advanceTimersByTimeAsync(LEASE_MS);
    const renewal = ['read .done', 'put .lease'];
    expect(renewals).toEqual([...renewal, ...renewal, ...renewal]);
    expect(settled).toBe(false);
    release();
    const response = await turn;
    expect(response.output).toMatchObject([{ content: 'echo: slow' }]);
    expect(renewals).toEqual([...renewal, ...renewal, ...renewal]);
  });

  it('a turn whose session was deleted removes its lease only once every renewal under way ended', async () => {
    const { store, renewals, services, release, calls } = await world();
    const turn = runTurn(services, 's', { input: 'slow' }).catch((error: unknown) => error);
    for (let step = 0; step < 100 && calls() === 0; step++) await vi.advanceTimersByTimeAsync(10);
    // The first renewal's put hangs; the next one's lands meanwhile.
    const first = store.hold(({ operation, keys }) => operation === 'put' && keys[0]!.endsWith('.lease'));
    await vi.advanceTimersByTimeAsync(LEASE_MS / 3);
    await first.reached;
    await vi.advanceTimersByTimeAsync(LEASE_MS / 3);
    expect(renewals).toEqual(['read .done', 'read .done', 'put .lease']);
    // Deleted by another process: the turn's completion is refused by the delete's fence (404).
    await new SessionLog(store).delete('s');
    release();
    expect(await turn).toMatchObject({ code: 'not_found' });
    await vi.advanceTimersByTimeAsync(10);
    // The first renewal's lease lands after the sweep, and goes with the fence.
    first.release();
    await vi.advanceTimersByTimeAsync(10);
    expect((await store.list('sessions/s/')).objects).toEqual([]);
  });
});
