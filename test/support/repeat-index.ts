import type { Item, StoredItem } from '../../lib/items.ts';
import { keySetKey, viewKey } from '../../lib/session/keys.ts';
import { shardPlacesOf, type LogView } from '../../lib/session/view-records.ts';
import { parseView } from './stored-view.ts';
import { expect } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { copyObjects } from './copy-store.ts';
import { CountingStore } from './counting-store.ts';
import { FaultyStore } from './faulty-store.ts';
import type { PackOptions, SessionLog } from './session-log.ts';

/** The repeat index's tests (test/session/repeat-index*.test.ts): session `s`, calls of `read` by path. */

export const call = (n: number, path: string): Item => ({
  type: 'function_call',
  call_id: `c${n}`,
  name: 'read',
  arguments: JSON.stringify({ path }),
});
export const output = (n: number): Item => ({ type: 'function_call_output', call_id: `c${n}`, output: `out ${n}` });

/** Shard gets and puts of a store, apart from the rest. */
export class ShardCountingStore extends CountingStore {
  shardGets = 0;
  shardPuts = 0;
  override get(...args: Parameters<CountingStore['get']>): ReturnType<CountingStore['get']> {
    if (args[0].includes('/keys/')) this.shardGets += 1;
    return super.get(...args);
  }
  override put(...args: Parameters<CountingStore['put']>): ReturnType<CountingStore['put']> {
    if (args[0].includes('/keys/')) this.shardPuts += 1;
    return super.put(...args);
  }
}

let calls = 0;
/** Appends to session `s` one record of a call (and its output) per path, each call id new. */
export async function appendCalls(log: SessionLog, paths: string[]): Promise<void> {
  await log.append(
    's',
    paths.flatMap((path) => {
      calls += 1;
      return [call(calls, path), output(calls)];
    }),
  );
}

/** Every item of session `s`, oldest first, page by page. */
export async function allItems(log: SessionLog): Promise<StoredItem[]> {
  const items: StoredItem[] = [];
  let before: number | undefined;
  for (;;) {
    const page = await log.listItems('s', { limit: 1000, ...(before ? { before } : {}) });
    items.unshift(...page.items.reverse());
    if (!page.has_more) return items;
    before = page.next_before!;
  }
}

/** Session `s`'s newest view, read from the store. */
export async function newestView(store: ObjectStore, log: SessionLog): Promise<LogView> {
  const scope = await log.scope('s');
  const listed = await store.list(viewKey(scope, 1).replace(/\d{12}\.view$/, ''), { limit: 1000 });
  const key = listed.objects.find((object) => object.key.endsWith('.view'))!.key;
  return parseView(key, (await store.get(key))!.body);
}

/** The shards `view` (of session `s`) names, by prefix, read from the store (one gone fails the test). */
export async function shardsOf(store: ObjectStore, log: SessionLog, view: LogView): Promise<Map<string, string>> {
  const scope = await log.scope('s');
  const shards = new Map<string, string>();
  for (const [prefix, { record, offset, length }] of shardPlacesOf(view.keys)) {
    const key = keySetKey(scope, record);
    const object = await store.get(key);
    expect(object, `${key} named by the view of record ${view.record}`).not.toBeNull();
    shards.set(prefix, new TextDecoder().decode(object!.body).slice(offset, offset + length));
  }
  return shards;
}

/**
 * A pack of session `s` (with `options`) crashing at each of its storage calls, before and
 * after the call lands, each on its own copy of `template` (set up once): `check` runs after
 * each, with the copy, the crashed process's log (`logOf` makes it) and where it crashed.
 */
export async function eachPackCrash(
  template: ObjectStore,
  logOf: (store: ObjectStore) => SessionLog,
  check: (store: FaultyStore, log: SessionLog, where: string) => Promise<void>,
  options: PackOptions = {},
): Promise<void> {
  const copy = async () => {
    const store = new FaultyStore(new MemoryStore());
    await copyObjects(template, store);
    return store;
  };
  // How many calls a clean pack makes.
  const probe = await copy();
  let calls = 0;
  probe.failWhen(() => {
    calls += 1;
    return false;
  });
  await logOf(probe).pack('s', options);
  expect(calls).toBeGreaterThan(5);
  for (let at = 1; at <= calls; at++) {
    for (const after of [false, true]) {
      const store = await copy();
      let seen = 0;
      store.failWhen(() => ++seen === at, { after });
      const log = logOf(store);
      await log.pack('s', options).catch(() => undefined);
      await check(store, log, `crash at call ${at}, after: ${after}`);
    }
  }
}
