import { describe, expect, it } from 'vitest';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { indexPrefix, parseIndexKey } from '../../lib/session/log/session-index.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { HeldStore } from '../support/held-store.ts';
import { SessionLog } from '../support/session-log.ts';

const DAY = 86_400_000;
const START = Date.parse('2026-03-01T00:00:00.000Z');

function world(sessionTtlDays: number | null) {
  const store = new MemoryStore();
  let now = START;
  const log = new SessionLog(store, { clock: () => new Date(now), sessionTtlDays });
  const at = (days: number) => {
    now = START + days * DAY;
  };
  const touch = async (id: string) => {
    await log.append(id, [{ type: 'message', role: 'user', content: 'hello' }]);
    await log.refreshIndex(id);
  };
  const exists = async (id: string) =>
    log.get(id).then(
      () => true,
      () => false,
    );
  return { store, log, at, touch, exists };
}

describe('retention', () => {
  it('deletes sessions idle longer than their expires_after_days or SESSION_TTL_DAYS, and no other', async () => {
    const w = world(7);
    await w.log.create({ id: 'default' });
    await w.log.create({ id: 'long', expires_after_days: 30 });
    await w.log.create({ id: 'short', expires_after_days: 1 });
    for (const id of ['default', 'long', 'short']) await w.touch(id);
    w.at(2);
    expect(await w.log.sweepExpired()).toMatchObject({ deleted: ['short'], orphans: 0 });
    w.at(8);
    expect((await w.log.sweepExpired()).deleted).toEqual(['default']);
    expect(await w.exists('long')).toBe(true);
    w.at(31);
    expect((await w.log.sweepExpired()).deleted).toEqual(['long']);
    // Through the delete protocol: nothing of them is left but the delete's index marker, which
    // the next sweep once it stood its hour deletes.
    expect(await entries(w)).toEqual([]);
    w.at(32);
    await w.log.sweepExpired();
    expect((await w.store.list('')).objects.map((object) => object.key)).toEqual([]);
  });

  it('keeps a session whose index entry lags its last activity', async () => {
    const w = world(3);
    await w.log.create({ id: 'busy' });
    await w.touch('busy');
    w.at(2.5);
    // A turn or append whose background index refresh has not run yet.
    await w.log.append('busy', [{ type: 'message', role: 'user', content: 'still here' }]);
    w.at(4);
    expect((await w.log.sweepExpired()).deleted).toEqual([]);
    expect(await w.exists('busy')).toBe(true);
  });

  it('without SESSION_TTL_DAYS only sessions with their own expires_after_days expire', async () => {
    const w = world(null);
    await w.log.create({ id: 'forever' });
    await w.log.create({ id: 'brief', expires_after_days: 2 });
    w.at(10_000);
    expect((await w.log.sweepExpired()).deleted).toEqual(['brief']);
    expect(await w.exists('forever')).toBe(true);
  });

  it('shows expires_at in the listing, and a PATCH of expires_after_days moves it', async () => {
    const w = world(7);
    await w.log.create({ id: 'a' });
    await w.log.create({ id: 'b', expires_after_days: 30 });
    const expiry = async () =>
      Object.fromEntries((await w.log.listSessions({ limit: 10 })).sessions.map((row) => [row.id, row.expires_at]));
    expect(await expiry()).toEqual({
      a: new Date(START + 7 * DAY).toISOString(),
      b: new Date(START + 30 * DAY).toISOString(),
    });
    expect(await w.log.get('b')).toMatchObject({ expires_after_days: 30 });
    await w.log.update('b', { expires_after_days: null });
    await w.log.update('a', { expires_after_days: 2 });
    expect(await expiry()).toEqual({
      a: new Date(START + 2 * DAY).toISOString(),
      b: new Date(START + 7 * DAY).toISOString(),
    });
    expect(await w.log.get('b')).not.toHaveProperty('expires_after_days');
  });

  it('counts a PATCH as activity: a session patched within its TTL is kept', async () => {
    const w = world(3);
    await w.log.create({ id: 'patched' });
    await w.touch('patched');
    w.at(2.5);
    await w.log.update('patched', { metadata: { still: 'in use' } });
    // 1.5 days after the PATCH, 4 after the append.
    w.at(4);
    expect((await w.log.sweepExpired()).deleted).toEqual([]);
    w.at(5.6);
    expect((await w.log.sweepExpired()).deleted).toEqual(['patched']);
  });

  it('deletes at most maxDeletes a run and says more are left', async () => {
    const w = world(1);
    for (const id of ['s1', 's2', 's3']) await w.log.create({ id });
    w.at(2);
    const first = await w.log.sweepExpired({ maxDeletes: 2 });
    expect(first).toMatchObject({ more: true });
    expect(first.deleted).toHaveLength(2);
    expect(await w.log.sweepExpired({ maxDeletes: 2 })).toMatchObject({ more: false, deleted: [expect.any(String)] });
    expect(await entries(w)).toEqual([]);
  });

  it("two processes' sweeps at once delete a session once, neither reporting the other's delete", async () => {
    const w = world(1);
    await w.log.create({ id: 'idle' });
    w.at(2);
    // Process A's second read of the session's config waits while process B sweeps the store.
    const held = new HeldStore(w.store);
    let configReads = 0;
    const hold = held.hold(
      (call) => call.operation === 'get' && call.keys[0] === sessionConfigKey('', 'idle') && ++configReads === 2,
    );
    const a = new SessionLog(held, { clock: () => new Date(START + 2 * DAY), sessionTtlDays: 1 }).sweepExpired();
    await hold.reached;
    const b = await w.log.sweepExpired();
    hold.release();
    const sweeps = [await a, b];
    expect(sweeps.map((sweep) => sweep.failed)).toEqual([[], []]);
    expect(sweeps.flatMap((sweep) => sweep.deleted)).toEqual(['idle']);
    // Nothing left but the delete's index marker (one, though both swept).
    const left = (await w.store.list('')).objects.map((object) => object.key);
    expect(left).toEqual([expect.stringMatching(/^index\/\d{13}-idle\/-g\d{13}[0-9a-f]{8}\.\d+$/)]);
  });
});

/** The sessions' index entries (not a delete's markers). */
async function entries(w: ReturnType<typeof world>): Promise<string[]> {
  const listed = (await w.store.list(indexPrefix(''))).objects.map((object) => object.key);
  return listed.filter((key) => parseIndexKey('', key) !== null);
}

describe('retention of index entries whose session is gone', () => {
  /**
   * Session `id` deleted, with an entry left: a background writer read it, its entry put landed
   * after the delete's second clean-up, and its process stopped there (before its config check).
   */
  async function orphaned(w: ReturnType<typeof world>, id: string) {
    await w.log.create({ id });
    await w.touch(id);
    const held = new HeldStore(w.store);
    const put = held.hold((call) => call.operation === 'put' && call.keys[0]!.startsWith(indexPrefix('')));
    let stopped = false;
    const stopping = new Proxy(held, {
      get(target, property) {
        const value = Reflect.get(target, property, target) as unknown;
        if (typeof value !== 'function') return value;
        return async (...args: unknown[]) => {
          if (stopped) throw new Error('the process stopped');
          const result = await (value as (...args: unknown[]) => Promise<unknown>).apply(target, args);
          if (property === 'put') stopped = true;
          return result;
        };
      },
    });
    const writer = new SessionLog(stopping, { clock: () => new Date(START), sessionTtlDays: 1 }).refreshIndex(id);
    await put.reached;
    await w.log.delete(id);
    put.release();
    await expect(writer).rejects.toThrow('the process stopped');
    const [orphan] = (await entries(w)).filter((key) => key.startsWith(indexPrefix('')));
    // Not listed: the session answers 404.
    expect((await w.log.listSessions({ limit: 10 })).sessions).toEqual([]);
    expect(await w.exists(id)).toBe(false);
    return orphan!;
  }

  it('deletes an expired entry of a session gone, and only the key it listed', async () => {
    const w = world(1);
    const orphan = await orphaned(w, 'x');
    // The id created again at the same ms (the same index position) while the sweep deletes the
    // orphan: the new incarnation's entry names its own generation, another key.
    let created: Promise<unknown> | undefined;
    const recreating = new Proxy(w.store, {
      get(target, property) {
        const value = Reflect.get(target, property, target) as unknown;
        if (typeof value !== 'function') return value;
        if (property !== 'delete') return (value as (...args: unknown[]) => unknown).bind(target);
        return async (keys: string | string[]) => {
          if (String(keys).includes(orphan) && !created) {
            created = w.log.create({ id: 'x' });
            await created;
          }
          return (value as (keys: string | string[]) => Promise<void>).call(target, keys);
        };
      },
    });
    const sweep = await new SessionLog(recreating, {
      clock: () => new Date(START + 2 * DAY),
      sessionTtlDays: 1,
    }).sweepExpired();
    expect(sweep).toMatchObject({ deleted: [], failed: [], orphans: 1 });
    expect(created).toBeDefined();
    const left = await entries(w);
    expect(left).toHaveLength(1);
    expect(left[0]).not.toBe(orphan);
    expect(left[0]!.split('/')[1]).toBe(orphan.split('/')[1]);
    expect((await w.log.listSessions({ limit: 10 })).sessions.map((row) => row.id)).toEqual(['x']);
    expect(await w.exists('x')).toBe(true);
  });

  it('deletes an expired entry of an incarnation gone, beside the one created again', async () => {
    const w = world(1);
    const orphan = await orphaned(w, 'x');
    w.at(0.5);
    await w.log.create({ id: 'x', expires_after_days: 30 });
    w.at(2);
    expect(await w.log.sweepExpired()).toMatchObject({ deleted: [], failed: [], orphans: 1 });
    const left = await entries(w);
    expect(left).toHaveLength(1);
    expect(left[0]).not.toBe(orphan);
    expect((await w.log.listSessions({ limit: 10 })).sessions).toMatchObject([
      { id: 'x', expires_at: new Date(START + 30.5 * DAY).toISOString() },
    ]);
  });

  it('deletes an entry of a session gone that never expires, and counts it', async () => {
    // No SESSION_TTL_DAYS and no expires_after_days: the entry says the session never expires.
    const w = world(null);
    const orphan = await orphaned(w, 'x');
    expect(await entries(w)).toEqual([orphan]);
    expect(await w.log.sweepExpired()).toMatchObject({ checked: 1, deleted: [], failed: [], orphans: 1 });
    expect(await entries(w)).toEqual([]);
    expect(await w.log.sweepExpired()).toMatchObject({ checked: 0, deleted: [], failed: [], orphans: 0 });
    // The delete's marker goes once it stood its hour, not counted among the entries.
    w.at(1);
    expect(await w.log.sweepExpired()).toMatchObject({ failed: [], orphans: 0 });
    expect((await w.store.list('')).objects).toEqual([]);
  });
});
