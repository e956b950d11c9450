import type { SessionConfig } from '../records.ts';
import type { LogContext } from './context.ts';
import { indexPosition, indexPrefix, type IndexEntry } from './session-index.ts';

/**
 * Delete markers of the session index (docs/STORAGE.md, "Session index"): a delete of a session,
 * once its `session.json` is gone, puts `index/<position>/-<generation>.<ms>` (`g` for a config
 * naming no generation; `<ms>`: when, by the deleting process's clock). An entry of that position
 * and generation is of the incarnation deleted, whoever put it: a background writer that read
 * the session before the delete and stopped after its put landed past the delete's clean-up (its
 * config check never ran) leaves one. The listing shows no such entry and deletes it after its
 * response; the retention sweep deletes it whatever its expiry. `-` sorts before the digits every
 * entry's state starts with, so the marker is the first key of its position: a page of the
 * listing, which starts at a position, meets it before any entry of that position.
 *
 * A marker stands for MARKER_MS, far longer than a writer's put can come after its read of the
 * session; then the retention sweep (or a listing meeting it) deletes it.
 */

/** How long a delete marker stands. */
export const MARKER_MS = 60 * 60_000;

const markerPattern = /^(\d{13}-[A-Za-z0-9_-]{1,64})\/-(g(?:\d{13}[0-9a-f]{8})?)\.(\d{1,15})$/;

/** What a delete marker says: the position and generation deleted ('' for none), and when. */
export interface IndexMarker {
  position: string;
  generation: string;
  deletedMs: number;
}

/** The marker of a delete of the incarnation `config` names, made at `deletedMs`. */
export function indexMarkerKey(keyPrefix: string, config: SessionConfig, deletedMs: number): string {
  const position = indexPosition(config.id, Date.parse(config.created_at));
  return `${indexPrefix(keyPrefix)}${position}/-${config.generation || 'g'}.${deletedMs}`;
}

/** Parses a key listed under `indexPrefix`; null for one that is no delete marker. */
export function parseIndexMarker(keyPrefix: string, key: string): IndexMarker | null {
  if (!key.startsWith(indexPrefix(keyPrefix))) return null;
  const parsed = markerPattern.exec(key.slice(indexPrefix(keyPrefix).length));
  if (!parsed) return null;
  return { position: parsed[1]!, generation: parsed[2] === 'g' ? '' : parsed[2]!, deletedMs: Number(parsed[3]) };
}

/** Puts the marker of a delete of `config`'s incarnation (after its `session.json` was deleted). */
export async function markDeleted(log: LogContext, config: SessionConfig): Promise<void> {
  await log.store.put(indexMarkerKey(log.keyPrefix, config, log.clock().getTime()), '');
}

/** Whether `entry` is of a generation a marker in `markers` (those of its position) says was deleted. */
export function markedDeleted(entry: IndexEntry, markers: readonly IndexMarker[] | undefined): boolean {
  return markers?.some((marker) => entry.generation === marker.generation) ?? false;
}

/** Whether `marker` has stood long enough to be deleted, by the log's clock. */
export function markerStale(log: LogContext, marker: IndexMarker): boolean {
  return log.clock().getTime() - marker.deletedMs >= MARKER_MS;
}
