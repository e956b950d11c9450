import type { SessionConfig } from '../records.ts';
import type { LogContext } from './context.ts';
import { indexPosition, indexPrefix, type IndexEntry } from './session-index.ts';

/**
 * Delete markers of the session index (docs/STORAGE.md, "Session index"): a delete of a session,
 * once its `session.json` is gone, puts `index/<position>/-<generations>.<ms>`: the config's
 * generation and the nearest ones a delete of its newest turn left (`queued_in`), at most
 * MARKER_GENERATIONS in all, each followed by `.` (`g` for none); `<ms>`: when, by the deleting
 * process's clock. An entry of that position and one of those generations is of the incarnation
 * deleted, whoever put it: a background writer that read the session before the delete (or
 * before a delete of its newest turn) and stopped after its put landed past the delete's
 * clean-up (its config check never ran) leaves one. The listing shows no such entry and deletes it after its
 * response; the retention sweep deletes it whatever its expiry. `-` sorts before the digits every
 * entry's state starts with, so the marker is the first key of its position: a page of the
 * listing, which starts at a position, meets it before any entry of that position.
 *
 * A marker stands for MARKER_MS, far longer than a writer's put can come after its read of the
 * session; then the retention sweep (or a listing meeting it) deletes it.
 */

/** How long a delete marker stands. */
export const MARKER_MS = 60 * 60_000;

/** The most generations a marker names (its key stays far below the 1,024 bytes S3 and R2 allow). */
export const MARKER_GENERATIONS = 8;

const markerPattern = new RegExp(
  String.raw`^(\d{13}-[A-Za-z0-9_-]{1,64})\/-((?:g(?:\d{13}[0-9a-f]{8})?\.){1,${MARKER_GENERATIONS}})(\d{1,15})$`,
);

/** What a delete marker says: the position and generations deleted ('' for none), and when. */
export interface IndexMarker {
  position: string;
  generations: string[];
  deletedMs: number;
}

/** The marker of a delete of the incarnation `config` names, made at `deletedMs`. */
export function indexMarkerKey(keyPrefix: string, config: SessionConfig, deletedMs: number): string {
  const position = indexPosition(config.id, Date.parse(config.created_at));
  const generations = [...new Set([config.generation ?? '', ...(config.queued_in ?? [])])];
  const named = generations.slice(0, MARKER_GENERATIONS).map((generation) => `${generation || 'g'}.`);
  return `${indexPrefix(keyPrefix)}${position}/-${named.join('')}${deletedMs}`;
}

/** Parses a key listed under `indexPrefix`; null for one that is no delete marker. */
export function parseIndexMarker(keyPrefix: string, key: string): IndexMarker | null {
  if (!key.startsWith(indexPrefix(keyPrefix))) return null;
  const parsed = markerPattern.exec(key.slice(indexPrefix(keyPrefix).length));
  if (!parsed) return null;
  const generations = parsed[2]!
    .slice(0, -1)
    .split('.')
    .map((generation) => (generation === 'g' ? '' : generation));
  return { position: parsed[1]!, generations, deletedMs: Number(parsed[3]) };
}

/** Puts the marker of a delete of `config`'s incarnation (after its `session.json` was deleted). */
export async function markDeleted(log: LogContext, config: SessionConfig): Promise<void> {
  await log.store.put(indexMarkerKey(log.keyPrefix, config, log.clock().getTime()), '');
}

/** Whether `entry` is of a generation a marker in `markers` (those of its position) says was deleted. */
export function markedDeleted(entry: IndexEntry, markers: readonly IndexMarker[] | undefined): boolean {
  const { generation } = entry;
  return generation !== undefined && (markers?.some((marker) => marker.generations.includes(generation)) ?? false);
}

/** Whether `marker` has stood long enough to be deleted, by the log's clock. */
export function markerStale(log: LogContext, marker: IndexMarker): boolean {
  return log.clock().getTime() - marker.deletedMs >= MARKER_MS;
}
