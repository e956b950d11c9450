import { NotFoundError } from '../../errors.ts';
import type { LogContext } from './context.ts';
import { deleteSession } from './config-object.ts';
import type { Head } from './head.ts';
import { expiryOf } from './listing.ts';
import { indexPrefix, lastActivityOf, parseIndexKey, type IndexEntry } from './session-index.ts';

/**
 * Retention: sessions idle longer than their `expires_after_days`, or SESSION_TTL_DAYS, are
 * deleted. The sweep walks the session index (one list call per 1,000 sessions, never the
 * bucket), reads the head of each session its index entry says has expired (the entry may lag
 * a turn behind), and deletes those still expired through the ordinary delete protocol.
 */

export interface SweepResult {
  /** Index entries read. */
  checked: number;
  /** Sessions deleted. */
  deleted: string[];
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
  const result: SweepResult = { checked: 0, deleted: [], failed: [], more: false };
  let cursor: string | undefined;
  do {
    const page = await log.store.list(prefix, cursor === undefined ? {} : { cursor });
    for (const info of page.objects) {
      const entry = parseIndexKey(log.keyPrefix, info.key);
      if (!entry || seen.has(entry.position)) continue;
      result.checked += 1;
      const expiry = expiryOf(entry.lastActivityMs, entry.expiresAfterDays ?? log.sessionTtlDays);
      if (expiry === null || expiry > now) continue;
      seen.add(entry.position);
      if (result.deleted.length + result.failed.length >= maxDeletes) return { ...result, more: true };
      try {
        // Checked on the head the delete reads itself: the incarnation it deletes, as it is then.
        if (await deleteSession(log, entry.id, (head) => expiredNow(log, entry, head, now)))
          result.deleted.push(entry.id);
      } catch (error) {
        // Gone already: another process's sweep, or a client's delete, took it since the listing.
        if (error instanceof NotFoundError) continue;
        // One session that cannot be read or deleted does not keep the others.
        result.failed.push({ id: entry.id, error });
      }
    }
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor !== undefined);
  return result;
}

/** Whether `head` is the incarnation an index entry names, and still expired by its config and newest record. */
function expiredNow(log: LogContext, entry: IndexEntry, head: Head, now: number): boolean {
  // Another incarnation of the id: its own entry decides.
  if (Date.parse(head.config.created_at) !== entry.createdMs) return false;
  const expiry = expiryOf(
    lastActivityOf(head.config, head.newest),
    head.config.expires_after_days ?? log.sessionTtlDays,
  );
  return expiry !== null && expiry <= now;
}
