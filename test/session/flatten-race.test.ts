import { describe, expect, it } from 'vitest';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { SessionLog } from '../support/session-log.ts';
import { contents, turnOf } from './rewind-simulation-suite.ts';

/** `store`, running `meanwhile` once just before the `nth` get of a key `matches` accepts. */
function racing(store: ObjectStore, matches: (key: string) => boolean, nth: number, meanwhile: () => Promise<unknown>) {
  let seen = 0;
  return new Proxy(store, {
    get(target, prop) {
      if (prop === 'get')
        return async (key: string, ...rest: unknown[]) => {
          if (matches(key) && ++seen === nth) await meanwhile();
          return (target.get as (...args: unknown[]) => unknown).call(target, key, ...rest);
        };
      const value = Reflect.get(target, prop);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** The generations anything under the session is stored for. */
async function levels(store: ObjectStore): Promise<Set<string>> {
  const listed = await store.list('sessions/s/', { limit: 10000 });
  return new Set(listed.objects.map((object) => object.key.split('/')[3] ?? '').filter((level) => level !== ''));
}

const generationOf = async (store: ObjectStore, id: string) =>
  JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', id)))!.body)).generation as string;

describe('a delete that flattens the history while the packer packs the generation it reads', () => {
  it('writes each record once: no segments of the new generation overlap', async () => {
    const store = new MemoryStore();
    // Loose records, cut into small segments by the flattening.
    const log = (on: ObjectStore = store) =>
      new SessionLog(on, { packMinRecords: 100, keepRecords: 100, segmentTargetBytes: 300 });
    await log().create({ id: 's' });
    const kept: string[] = [];
    for (let n = 1; n <= 8; n++) {
      await turnOf(log(), 's', `kept ${n}`);
      kept.push(`kept ${n}`, `re kept ${n}`);
      await turnOf(log(), 's', `gone ${n}`);
      await log().deleteTurn('s', n + 1);
    }
    for (let n = 9; n <= 14; n++) {
      await turnOf(log(), 's', `kept ${n}`);
      kept.push(`kept ${n}`, `re kept ${n}`);
    }
    await turnOf(log(), 's', 'gone');
    const generation = await generationOf(store, 's');
    const records = (key: string) => key.includes(`/turn/${generation}/`) && /\d$/.test(key);
    // The packer packs the generation's records while the flattening reads them, one by one.
    const packer = new SessionLog(store, { packMinRecords: 2, keepRecords: 1 });
    await log(racing(store, records, 8, () => packer.pack('s'))).deleteTurn('s', 15);
    const packed = await store.list(`sessions/s/turn/${generation}/`, { limit: 1000 });
    expect(
      packed.objects.some((object) => object.key.endsWith('.seg')),
      'packed meanwhile',
    ).toBe(true);
    const flat = await generationOf(store, 's');
    const listed = await store.list(`sessions/s/turn/${flat}/`, { limit: 1000 });
    const ranges = listed.objects
      .map((object) => object.key)
      .filter((key) => key.endsWith('.seg'))
      .map((key) => key.split('/').at(-1)!.split('-').slice(1, 2).map(Number)[0]!);
    expect(new Set(ranges).size, 'one segment per first record').toBe(ranges.length);
    await expect(contents(log(), 's')).resolves.toEqual(kept);
  });

  it('racing another flattening delete: one takes the turn out, the other finds it gone, leaving nothing', async () => {
    const store = new MemoryStore();
    const log = (on: ObjectStore = store) => new SessionLog(on, { packMinRecords: 2, keepRecords: 1 });
    await log().create({ id: 's' });
    const kept: string[] = [];
    for (let n = 1; n <= 9; n++) {
      await turnOf(log(), 's', `kept ${n}`);
      kept.push(`kept ${n}`, `re kept ${n}`);
      await turnOf(log(), 's', `gone ${n}`);
      if (n < 9) await log().deleteTurn('s', n + 1);
    }
    const generation = await generationOf(store, 's');
    const known = await levels(store);
    const units = (key: string) => key.includes('/turn/') && !key.includes(`/turn/${generation}/`);
    let other: Promise<unknown> = Promise.resolve();
    const first = log(racing(store, units, 2, () => (other = log().deleteTurn('s', 10)))).deleteTurn('s', 10);
    await expect(first).rejects.toMatchObject({ code: 'not_found' });
    await other;
    await expect(contents(log(), 's')).resolves.toEqual(kept);
    // Only generations written before the race, and the one the winner flattened into.
    known.add(await generationOf(store, 's'));
    expect([...(await levels(store))].filter((level) => !known.has(level))).toEqual([]);
  });

  it.each([
    ['an append', (log: SessionLog) => log.append('s', [{ type: 'message', role: 'user', content: 'late' }])],
    ['a turn', (log: SessionLog) => turnOf(log, 's', 'late')],
  ])('%s landing while it copies: the delete is refused, and what it wrote is gone', async (_, late) => {
    const store = new MemoryStore();
    const log = (on: ObjectStore = store) => new SessionLog(on, { packMinRecords: 2, keepRecords: 1 });
    await log().create({ id: 's' });
    for (let n = 1; n <= 9; n++) {
      await turnOf(log(), 's', `kept ${n}`);
      await turnOf(log(), 's', `gone ${n}`);
      if (n < 9) await log().deleteTurn('s', n + 1);
    }
    const before = await contents(log(), 's');
    const generation = await generationOf(store, 's');
    const known = await levels(store);
    const units = (key: string) => key.includes('/turn/') && !key.includes(`/turn/${generation}/`);
    await expect(log(racing(store, units, 2, () => late(log()))).deleteTurn('s', 10)).rejects.toMatchObject({
      code: 'delete_refused',
    });
    expect((await contents(log(), 's')).slice(0, before.length)).toEqual(before);
    expect(await generationOf(store, 's')).toBe(generation);
    expect([...(await levels(store))].filter((level) => !known.has(level))).toEqual([]);
  });
});
