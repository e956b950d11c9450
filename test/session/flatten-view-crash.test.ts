import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { computeAggregates } from '../../lib/strategies/aggregates.ts';
import { packOptions, sessionStrategyPlan } from '../../lib/turn/plan.ts';
import { copyObjects } from '../support/copy-store.ts';
import { allItems } from '../support/repeat-index.ts';
import { SessionLog } from '../support/session-log.ts';
import { attempt, LEASE_MS } from '../support/simulation.ts';
import { InterleavedStore } from './fork-simulation-suite.ts';
import { contents, turnOf } from './rewind-simulation-suite.ts';

/**
 * A delete that flattens a history long enough for views made in memory between its segments
 * (lib/session/log/flatten.ts, every VIEW_EVERY_RECORDS segments: their key shards written) crashed
 * at each storage call of those views and of the first view it stores, before the call and after
 * it landed: the session reads before or after the delete, a retry ends after, the next turn's
 * view holds the history's aggregates, and a delete of the session leaves nothing.
 */

const OPTIONS = { packMinRecords: 2, keepRecords: 1, segmentTargetBytes: 2048, blobThreshold: 1024 };
const PACK = packOptions(sessionStrategyPlan({}, { strategies: null, strategy_config: {} }));
const DEPTH = 8;

async function template() {
  const store = new MemoryStore();
  const log = new SessionLog(store, OPTIONS);
  await log.create({ id: 's' });
  for (let n = 1; n <= 60; n++) {
    // Calls of new keys, past INDEX_DELTA_KEYS (the views' repeat index is written to shards),
    // some repeated, and now and then an output out of line.
    const pairs: Item[] = Array.from({ length: 80 }, (_, k): Item[] => [
      {
        type: 'function_call',
        call_id: `c${n}-${k}`,
        name: 'read',
        arguments: JSON.stringify({ path: `f${n}-${k % 70}` }),
      },
      {
        type: 'function_call_output',
        call_id: `c${n}-${k}`,
        output: k === 0 && n % 7 === 0 ? 'y'.repeat(1500) : `${n}-${k}`,
      },
    ]).flat();
    await log.append('s', pairs);
    if (n % 4 === 0) await log.pack('s', PACK);
  }
  await log.pack('s', PACK);
  for (let n = 1; n <= DEPTH; n++) {
    await turnOf(log, 's', `kept ${n}`);
    await turnOf(log, 's', `gone ${n}`);
    await log.deleteTurn('s', (await log.get('s')).counts.turns, { pack: () => PACK });
  }
  await turnOf(log, 's', `kept ${DEPTH + 1}`);
  await turnOf(log, 's', 'gone');
  return store;
}

/** A store whose every call's key is recorded. */
class KeyRecordingStore implements ObjectStore {
  readonly keys: string[] = [];
  readonly inner: ObjectStore;
  constructor(inner: ObjectStore) {
    this.inner = inner;
  }
  get: ObjectStore['get'] = (key, options) => (this.keys.push(`get ${key}`), this.inner.get(key, options));
  head: ObjectStore['head'] = (key) => (this.keys.push(`head ${key}`), this.inner.head(key));
  put: ObjectStore['put'] = (key, body, options) => (this.keys.push(`put ${key}`), this.inner.put(key, body, options));
  list: ObjectStore['list'] = (prefix, options) => (this.keys.push(`list ${prefix}`), this.inner.list(prefix, options));
  delete: ObjectStore['delete'] = (keys) => (this.keys.push(`delete ${String(keys)}`), this.inner.delete(keys));
}

describe('a delete flattening a history with views made in memory, crashed at a view’s storage call', () => {
  it('leaves it before or after, a retry after, and the next turn reads the history from a view', async () => {
    const base = await template();
    let offset = 0;
    const clock = () => new Date(Date.now() + offset);
    const logOf = (store: ObjectStore) => new SessionLog(store, { ...OPTIONS, clock, leaseMs: LEASE_MS });
    const copy = async () => {
      const store = new MemoryStore();
      await copyObjects(base, store);
      return store;
    };
    // The newest items (a page holds a thousand of the history's), and the turns.
    const newest = async (store: ObjectStore) => ({
      items: (await contents(logOf(store), 's')).slice(-20),
      turns: (await logOf(store).get('s')).counts.turns,
    });
    const before = await newest(base);
    const turns = (await logOf(base).get('s')).counts.turns;
    const rewind = (log: SessionLog) => attempt(() => log.deleteTurn('s', turns, { pack: () => PACK }));
    // Which calls are the views' (their key shards, tail chunks, views, older repeated entries).
    const probe = new KeyRecordingStore(await copy());
    expect((await rewind(logOf(probe))).ok).toBe(true);
    const config = JSON.parse(new TextDecoder().decode((await probe.get(sessionConfigKey('', 's')))!.body));
    expect(config.named, 'the delete flattens').toBeDefined();
    const after = await newest(probe);
    expect(after).toEqual({ items: (await contents(logOf(base), 's')).slice(-22, -2), turns: before.turns - 1 });
    const crashes = probe.keys.flatMap((key, index) =>
      /\/(keys|tail)\/|\.view$/.test(key) && !key.startsWith('list') ? [index + 1] : [],
    );
    // Views were made in memory (their shards), and one stored.
    expect(probe.keys.some((key) => key.startsWith('put') && key.includes('/keys/'))).toBe(true);
    expect(probe.keys.some((key) => key.startsWith('put') && key.endsWith('.view'))).toBe(true);
    for (const at of crashes) {
      for (const landed of [false, true]) {
        const store = await copy();
        const where = `crashed at call ${at} (${probe.keys[at - 1]}) ${landed ? 'after' : 'before'} it`;
        await rewind(logOf(new InterleavedStore(store, { crash: { at, after: landed } })));
        expect([before, after], where).toContainEqual(await newest(store));
        offset += LEASE_MS + 1;
        const retried = await rewind(logOf(store));
        if (!retried.ok) expect(retried.code, `${where}: ${(retried.error as Error).message}`).toBe('not_found');
        expect(await newest(store), where).toEqual(after);
        const begun = await logOf(store).beginTurn('s', {
          input: [{ type: 'message', role: 'user', content: 'next' }],
        });
        if (begun.kind !== 'claimed') throw new Error(`${where}: expected a claim`);
        // From the view the retry stored, nothing read past it.
        expect(begun.turn.base.view?.record, where).toBe(begun.turn.record - 1);
        expect(begun.turn.base.since, where).toEqual([]);
        expect(begun.turn.aggregates, where).toEqual(computeAggregates(await allItems(logOf(store))));
        offset += LEASE_MS + 1;
        for (let round = 0; round < 2; round++) {
          await attempt(() => logOf(store).delete('s'));
          offset += LEASE_MS + 1;
        }
        expect(
          (await store.list('sessions/', { limit: 1000 })).objects.map((object) => object.key),
          where,
        ).toEqual([]);
      }
    }
  }, 240_000);
});
