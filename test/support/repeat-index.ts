import type { Item, StoredItem } from '../../lib/items.ts';
import { viewKey } from '../../lib/session/keys.ts';
import type { LogView } from '../../lib/session/view-records.ts';
import { parseView } from './stored-view.ts';
import { expect } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { copyObjects } from './copy-store.ts';
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
