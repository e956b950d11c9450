import { describe, expect, it } from 'vitest';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { indexPrefix } from '../../lib/session/log/session-index.ts';
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
    expect((await w.log.sweepExpired()).deleted).toEqual(['short']);
    w.at(8);
    expect((await w.log.sweepExpired()).deleted).toEqual(['default']);
    expect(await w.exists('long')).toBe(true);
    w.at(31);
    expect((await w.log.sweepExpired()).deleted).toEqual(['long']);
    // Through the delete protocol: nothing of them is left, index entries included.
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
    expect((await w.store.list(indexPrefix(''))).objects).toEqual([]);
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
    expect((await w.store.list('')).objects).toEqual([]);
  });
});
