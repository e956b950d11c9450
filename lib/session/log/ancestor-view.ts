import { CorruptObjectError } from '../../errors.ts';
import {
  ancestorScope,
  keySetKey,
  olderRepeatedKey,
  parseRecordsEntry,
  RECORD_BOUND,
  recordKey,
  recordsPrefix,
  type ForkPoint,
  type LogScope,
} from '../keys.ts';
import type { LogItem } from '../records.ts';
import type { UnitCursor } from '../unit-cursor.ts';
import type { LogView } from '../view-records.ts';
import type { LogContext } from './context.ts';
import type { Head } from './head.ts';
import { readView } from './view-chunks.ts';
import { itemsAfterView } from './views.ts';

/**
 * A fork's first view from its ancestor's (docs/STORAGE.md, "Deleting the newest turn"): a
 * generation a delete of the newest turn writes, a history a flattening holds, or a fork of
 * another session lists no view of its own, but the generation it forks from holds the same
 * history up to the fork point, and its views up to there are views of the fork's history
 * too (the same records, numbered the same: a view names what it covers by its record and
 * last seq). So the fork's first view is made from the newest of them and the items after it,
 * not from the log's start. What that view names beside itself (the sets of its repeat
 * index's shards, its split `repeated`) is named by record under its own generation: those
 * objects are copied into the fork's (create-only; each is a function of the history up to
 * its record, so a second writer writes the same), and the views made from it name them
 * there. Its tail's chunk is not named again: the fork's view writes its own.
 */

/** Pages of the ancestor's records (from the fork point down) listed for its newest view at or below it. */
const LISTED_PAGES = 2;
const PAGE_KEYS = 100;

/**
 * The newest view of the generation `point` names at or below its record (a view of a prefix of
 * the history of `scope`, a fork of it there), read, with what it names copied into `scope`;
 * null when there is none to take (none listed, another version's, one whose chunk or named
 * objects are gone, or one that is corrupt: then the fork's view is made as before).
 */
export async function adoptedView(log: LogContext, scope: LogScope, point: ForkPoint): Promise<LogView | null> {
  const from = ancestorScope(log.keyPrefix, point);
  for (const listed of await viewsAtOrBelow(log, from, point.record)) {
    const view = await readView(log, from, listed.key, listed.record).catch((error: unknown) => {
      if (error instanceof CorruptObjectError) return null;
      throw error;
    });
    // Deleted since the listing (a newer one replaced it): an older one may still serve.
    if (view === 'gone') continue;
    if (!view || view.last_seq > point.seq) return null;
    if (!(await copyNamed(log, from, scope, view))) return null;
    // Another object than the ancestor's: its chunk is not the fork's (view-chunks.ts chunkOfView).
    return { ...view };
  }
  return null;
}

/**
 * The views of `from` at or below `record`, newest first, from at most LISTED_PAGES pages of its
 * records listed from `record` down (keys invert the record number: those of the records after it,
 * however many, list before it and are not listed).
 */
async function viewsAtOrBelow(
  log: LogContext,
  from: LogScope,
  record: number,
): Promise<{ record: number; key: string }[]> {
  const prefix = recordsPrefix(from);
  // After every key of record `record + 1` (its record, completion, view, lease and the segments it ends).
  const after = record + 1 < RECORD_BOUND ? { startAfter: `${recordKey(from, record + 1)}~` } : {};
  const views: { record: number; key: string }[] = [];
  let page = await log.store.list(prefix, { limit: PAGE_KEYS, ...after });
  for (let lists = 1; ; lists++) {
    for (const object of page.objects) {
      const entry = parseRecordsEntry(object.key.slice(prefix.length));
      if (entry?.kind === 'view' && entry.record <= record) views.push({ record: entry.record, key: object.key });
    }
    if (views.length > 0 || !page.truncated || page.cursor === undefined || lists >= LISTED_PAGES) return views;
    page = await log.store.list(prefix, { limit: PAGE_KEYS, cursor: page.cursor });
  }
}

/** Copies the objects `view` names under `from` into `to`, create-only (false: one is gone). */
async function copyNamed(log: LogContext, from: LogScope, to: LogScope, view: LogView): Promise<boolean> {
  const older = view.aggregates.repeated_older;
  const named: { key: (scope: LogScope) => string; contentType: string }[] = [
    ...Object.keys(view.keys.versions).map((record) => ({
      key: (scope: LogScope) => keySetKey(scope, Number(record)),
      contentType: 'text/plain',
    })),
    ...(older
      ? [
          {
            key: (scope: LogScope) => olderRepeatedKey(scope, older.record, older.before_seq),
            contentType: 'application/json',
          },
        ]
      : []),
  ];
  const copied = await Promise.all(
    named.map(async ({ key, contentType }) => {
      const object = await log.store.get(key(from));
      if (!object) return false;
      await log.store.put(key(to), object.body, { onlyIfAbsent: true, contentType });
      return true;
    }),
  );
  return copied.every(Boolean);
}

/**
 * The base of the first view of `scope` (a fork: see above), when it lists no view of its own
 * at or below its newest record (`cursor`, listed with it): the view adopted from its nearest
 * ancestor and every item after it up to `newest` (`held`: items the caller holds, see
 * readBase). Null when it lists one, is no fork, or its ancestor has none to take.
 */
export async function ancestorBase(
  log: LogContext,
  scope: LogScope,
  newest: NonNullable<Head['newest']>,
  cursor: UnitCursor,
  held: readonly LogItem[] = [],
): Promise<{ view: LogView; since: LogItem[] } | null> {
  const point = scope.ancestors?.[0];
  if (!point || cursor.views.some((listed) => listed.record <= newest.record.record)) return null;
  const view = await adoptedView(log, scope, point);
  if (!view) return null;
  const { walked, carried } = await itemsAfterView(log, scope, newest, cursor, view.record, view.last_seq, held);
  return { view, since: [...walked, ...carried] };
}
