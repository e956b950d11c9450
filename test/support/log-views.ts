import { expect } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { sessionPrefix } from '../../lib/session/keys.ts';
import { logContext } from '../../lib/session/log/context.ts';
import { readConfig, scopeOf } from '../../lib/session/log/head.ts';
import { readView } from '../../lib/session/log/view-chunks.ts';
import type { LogView } from '../../lib/session/view-records.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { listAll, type ObjectStore } from '../../lib/store/object-store.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';
import { USAGE } from '../session/rewind-simulation-suite.ts';
import { copyObjects } from './copy-store.ts';
import { CountingStore } from './counting-store.ts';
import { eachPackCrash } from './repeat-index.ts';
import type { PackOptions, SessionLog } from './session-log.ts';

/** Session logs whose views are stored, dropped and written again from the log alone (test/session/*view*.test.ts). */

/** Packs from two closed records older than the newest, into segments of some 2 KB; blobs past 4 KB. */
export const SEGMENTED = { packMinRecords: 2, keepRecords: 1, segmentTargetBytes: 2048, blobThreshold: 4096 };
/** SEGMENTED with no view cache: a read gets the view stored (views are dropped and written again under their keys). */
export const UNCACHED = { ...SEGMENTED, viewCacheBytes: 0 };

const OUTPUT = 'tool output line\n'.repeat(40);

/**
 * Creates session `id` of `count` records (n from 1), each a call of `read` of `{ n: file(n) }`
 * and its output of some 700 bytes, and packs it with `pack`: every `packEvery` records too, and
 * `after(n)` runs after record n.
 */
export async function sessionOfReads(
  log: SessionLog,
  id: string,
  count: number,
  {
    file = (n) => n,
    packEvery,
    after,
    pack,
  }: {
    file?: (n: number) => number;
    packEvery?: number;
    after?: (n: number) => Promise<unknown>;
    pack?: PackOptions | undefined;
  } = {},
): Promise<void> {
  await log.create({ id });
  for (let n = 1; n <= count; n++) {
    const pair: Item[] = [
      { type: 'function_call', call_id: `c${n}`, name: 'read', arguments: JSON.stringify({ n: file(n) }) },
      { type: 'function_call_output', call_id: `c${n}`, output: `${OUTPUT}${n}` },
    ];
    await log.append(id, pair);
    if (packEvery && n % packEvery === 0) await log.pack(id, pack);
    await after?.(n);
  }
  await log.pack(id, pack);
}

/** A turn of session `id` ('overflowing') that moves its overflow boundary to the seqs given. */
export async function overflowingTurn(
  log: SessionLog,
  id: string,
  message_start_seq: number,
  tool_start_seq: number,
): Promise<void> {
  const begun = await log.beginTurn(id, { input: [{ type: 'message', role: 'user', content: 'overflowing' }] });
  if (begun.kind !== 'claimed') throw new Error('expected a claim');
  await log.completeTurn(begun.turn, {
    status: 'completed',
    output: [{ type: 'message', role: 'assistant', content: 're overflowing' }],
    receipt: {},
    usage: USAGE,
    overflow: { message_start_seq, tool_start_seq, turn: begun.turn.turn },
  });
}

/** Counts the gets of segments and their bytes. */
export class SegmentCountingStore extends CountingStore {
  segmentGets = 0;
  segmentBytes = 0;
  override async get(...args: Parameters<CountingStore['get']>): ReturnType<CountingStore['get']> {
    const object = await super.get(...args);
    if (args[0].endsWith('.seg')) {
      this.segmentGets += 1;
      this.segmentBytes += object?.body.length ?? 0;
    }
    return object;
  }
  override reset(): void {
    super.reset();
    this.segmentGets = 0;
    this.segmentBytes = 0;
  }
}

/** The views of session `id`'s generation, read whole (their chunks' items too). */
export async function storedViews(store: ObjectStore, id = 's'): Promise<{ key: string; view: LogView }[]> {
  const reader = logContext(store, { viewPolicy, viewCacheBytes: 0 });
  const scope = scopeOf('', (await readConfig(reader, id)).config);
  const listed = (await listAll(store, sessionPrefix('', id))).filter(
    (object) => object.key.endsWith('.view') && object.key.includes(`/${scope.generation}/`),
  );
  return Promise.all(
    listed.map(async ({ key }) => {
      const { record } = JSON.parse(new TextDecoder().decode((await store.get(key))!.body)) as LogView;
      const view = await readView(reader, scope, key, record);
      if (!view || view === 'gone') throw new Error(`${key} unread`);
      return { key, view };
    }),
  );
}

/**
 * Deletes the views under `prefix` (every one, or only those of `views`) and every view chunk
 * there.
 */
export async function dropViews(store: ObjectStore, prefix = 'sessions/', views?: string[]): Promise<void> {
  const listed = (await listAll(store, prefix)).filter((object) =>
    object.key.endsWith('.view') ? (views?.includes(object.key) ?? true) : object.key.includes('/tail/'),
  );
  await store.delete(listed.map((object) => object.key));
}

/** What a preview gives a prompt: its items and aggregates. */
type Prompt = Pick<Awaited<ReturnType<SessionLog['previewContext']>>, 'items' | 'aggregates'>;

/**
 * Drops the views under `prefix` (every one, or only `views`) and their chunks, lets `repack`
 * write the view again from the log alone, and expects the prompt `read` gives then to be
 * `before`'s.
 */
export async function samePromptFromTheLogAlone(
  store: ObjectStore,
  {
    before,
    read,
    repack,
    prefix,
    views,
  }: {
    before: Prompt;
    read: () => Promise<Prompt>;
    repack: () => Promise<unknown>;
    prefix?: string;
    views?: string[];
  },
): Promise<void> {
  await dropViews(store, prefix, views);
  await repack();
  const after = await read();
  expect(before.items).toEqual(after.items);
  expect(before.aggregates).toEqual(after.aggregates);
}

/**
 * What a process that never saw session `s` previews of `store` (the prompt's items and what
 * decides them; `logOf` makes its log), and the same read of a copy with no view or chunk stored.
 */
export async function previewsWithAndWithoutViews(
  store: ObjectStore,
  logOf: (store: ObjectStore) => SessionLog,
  requirement: Parameters<SessionLog['previewContext']>[1],
): Promise<{ read: unknown; reference: unknown }> {
  const preview = async (on: ObjectStore) => {
    const { items, aggregates, context, overflow } = await logOf(on).previewContext('s', requirement);
    return { items, aggregates, context, overflow };
  };
  const read = await preview(store);
  const bare = new MemoryStore();
  await copyObjects(store, bare);
  await dropViews(bare, '');
  return { read, reference: await preview(bare) };
}

/**
 * A pack of session `s` (with `options`) crashing at each of its storage calls, before and after
 * the call lands (eachPackCrash, more than 10 crashes): whatever it left, a process that never saw
 * the session previews what the log itself gives, and so after the crashed process's next pack
 * and after `then` (run on the crashed process's log, when given).
 */
export async function previewsAfterEachPackCrash(
  template: ObjectStore,
  logOf: (store: ObjectStore) => SessionLog,
  requirement: NonNullable<PackOptions['requirement']>,
  options: PackOptions,
  then?: (log: SessionLog) => Promise<unknown>,
): Promise<void> {
  const asTheLog = async (store: ObjectStore, where: string) => {
    const { read, reference } = await previewsWithAndWithoutViews(store, logOf, requirement);
    expect(read, where).toEqual(reference);
  };
  let crashes = 0;
  await eachPackCrash(
    template,
    logOf,
    async (store, crashed, where) => {
      crashes += 1;
      await asTheLog(store, where);
      // The next pack goes on from whatever the crash left, and what it leaves reads the same.
      await crashed.pack('s', { requirement, refresh: true });
      await asTheLog(store, where);
      if (!then) return;
      await then(crashed);
      await asTheLog(store, where);
    },
    options,
  );
  expect(crashes).toBeGreaterThan(10);
}
