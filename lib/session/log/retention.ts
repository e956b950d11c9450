import { NotFoundError } from '../../errors.ts';
import type { LogContext } from './context.ts';
import { deleteSession } from './config-object.ts';
import type { Head } from './head.ts';
import { expiryOf } from './listing.ts';
import { indexPrefix, lastActivityOf, parseIndexKey } from './session-index.ts';
import { markedDeleted, markerStale, parseIndexMarker, type IndexMarker } from './index-markers.ts';

/**
 * Retention: sessions idle longer than their `expires_after_days`, or SESSION_TTL_DAYS, are
 * deleted. The sweep walks the session index (one list call per 1,000 sessions, never the
 * bucket), reads the head of each session its index entry says has expired (the entry may lag
 * a turn behind), and deletes those still expired through the ordinary delete protocol. An
 * expired entry whose incarnation is gone (404, or the id created again since) is deleted, that
 * key alone: a writer stopped after its entry landed past a delete's clean-up leaves one. Such
 * an entry of a generation a delete's marker names (log/index-markers.ts) is deleted whatever
 * its expiry, and a marker that stood its time goes. A session gone is swept as a 404 delete
 * sweeps, but for the generations made within the entry's retention period (no incarnation idle
 * past it made them): an import of the id before its config writes under one (log/import.ts).
 */

export interface SweepResult {
  /** Index entries read. */
  checked: number;
  /** Sessions deleted. */
  deleted: string[];
  /**
   * Index entries deleted whose session was gone (a writer's, put past a delete; or of an
   * incarnation deleted since): not counted in `deleted`, nor are the delete markers that go.
   */
  orphans: number;
  /** The run stopped at `maxDeletes`: more expired sessions may be left for the next. */
  more: boolean;
  /** Sessions whose check or delete failed (left for the next run), with why. */
  failed: { id: string; error: unknown }[];
}

/** Deletes the sessions that expired by the log's clock, at most `maxDeletes` a run. */
export async function sweepExpired(log: LogContext, options: { maxDeletes?: number } = {}): Promise<SweepResult> {
  const maxDeletes = options.maxDeletes ?? 100;
  const now = log.clock().getTime();
  const prefix = indexPrefix(log.keyPrefix);
  const seen = new Set<string>();
  const markers = new Map<string, IndexMarker[]>();
  const result: SweepResult = { checked: 0, deleted: [], orphans: 0, failed: [], more: false };
  let cursor: string | undefined;
  do {
    const page = await log.store.list(prefix, cursor === undefined ? {} : { cursor });
    for (const info of page.objects) {
      // A delete's marker (log/index-markers.ts), the first key of its position: deleted once it
      // stood its time, and the entries of the generation it names go whatever their expiry.
      const marker = parseIndexMarker(log.keyPrefix, info.key);
      if (marker) {
        markers.set(marker.position, [...(markers.get(marker.position) ?? []), marker]);
        if (markerStale(log, marker)) await orphaned(log, info.key, marker.position.slice(14), result, false);
        continue;
      }
      const entry = parseIndexKey(log.keyPrefix, info.key);
      if (!entry || seen.has(entry.position)) continue;
      result.checked += 1;
      if (markedDeleted(entry, markers.get(entry.position))) {
        await orphaned(log, info.key, entry.id, result);
        continue;
      }
      const expiry = expiryOf(entry.lastActivityMs, entry.expiresAfterDays ?? log.sessionTtlDays);
      if (expiry === null || expiry > now) continue;
      seen.add(entry.position);
      if (result.deleted.length + result.failed.length >= maxDeletes) return { ...result, more: true };
      try {
        let gone = false;
        // Checked on the head the delete reads itself: the incarnation it deletes, as it is then.
        const expired = (head: Head) => {
          gone = Date.parse(head.config.created_at) !== entry.createdMs;
          return !gone && expiredNow(log, head, now);
        };
        // Gone, what a delete stopped after its config left is swept, but for generations made within
        // the entry's retention period: an import of the id before its config writes under one.
        const madeBefore = now - (expiry - entry.lastActivityMs);
        if (await deleteSession(log, entry.id, expired, { madeBefore })) result.deleted.push(entry.id);
        else if (gone) await orphaned(log, info.key, entry.id, result);
      } catch (error) {
        // Gone already: another process's sweep, or a client's delete, took it since the listing,
        // or a writer that stopped after its entry landed past the delete left that entry. The
        // key listed goes, and no other: an incarnation created since names its own generation.
        if (error instanceof NotFoundError) await orphaned(log, info.key, entry.id, result);
        // One session that cannot be read or deleted does not keep the others.
        else result.failed.push({ id: entry.id, error });
      }
    }
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor !== undefined);
  return result;
}

/**
 * Deletes the index entry `key` of a session gone (counted in `orphans`), or a delete marker
 * (`entry` false); a failure is the session's, for the next run.
 */
async function orphaned(log: LogContext, key: string, id: string, result: SweepResult, entry = true): Promise<void> {
  try {
    await log.store.delete(key);
    if (entry) result.orphans += 1;
  } catch (error) {
    result.failed.push({ id, error });
  }
}

/** Whether `head`, of the incarnation an index entry names, is still expired by its config and newest record. */
function expiredNow(log: LogContext, head: Head, now: number): boolean {
  const expiry = expiryOf(
    lastActivityOf(head.config, head.newest),
    head.config.expires_after_days ?? log.sessionTtlDays,
  );
  return expiry !== null && expiry <= now;
}
