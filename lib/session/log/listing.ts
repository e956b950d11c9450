import { z } from 'zod';
import { sessionUsage, type SessionUsage } from '../../ledger/usage.ts';
import { InvalidRequestError, NotFoundError } from '../../errors.ts';
import type { ObjectInfo } from '../../store/object-store.ts';
import { sessionCounts, type SessionCounts } from '../records.ts';
import { checkInvariant, type LogContext } from './context.ts';
import { readConfig } from './head.ts';
import { markedDeleted, markerStale, parseIndexMarker, type IndexMarker } from './index-markers.ts';
import { compareEntries } from './index-rank.ts';
import {
  indexPosition,
  indexPrefix,
  isIndexPosition,
  parseIndexKey,
  settleEntries,
  type IndexEntry,
} from './session-index.ts';

/**
 * The session listing: one listing of the session index (log/session-index.ts) per page, so
 * a page costs one list call and no get, however many sessions and records there are. The
 * index lists the newest created session first; the cursor (`after`) is a position in it.
 *
 * An entry of a session deleted (a writer's, put past the delete's clean-up) is not listed: the
 * delete's marker at its position names its generation (log/index-markers.ts). A page whose
 * listing holds fewer than `limit` sessions (it met markers, entries left out or two entries of
 * one session) reads on until it holds `limit` or the index ends, within READ_ON_LISTINGS more
 * listings: only a page that met such keys costs more than one list call.
 *
 * A session created before the index existed has no entry until its next turn, append or
 * PATCH. A cursor that is a session id (as cursors were before the index) continues after that
 * session's position, for one config read (a 400 when the session is gone, as for any cursor no
 * listing issued).
 */

/**
 * A page whose first listing (of `limit` keys) holds fewer than `limit` sessions reads on, in
 * listings of READ_ON_KEYS keys, at most READ_ON_LISTINGS of them: past that many keys of
 * markers and entries left out, a page may hold fewer sessions, with `has_more`.
 */
export const READ_ON_KEYS = 1000;
export const READ_ON_LISTINGS = 10;

/** A page holds about this many bytes of rows at most (at least one row). */
export const MAX_LISTING_BYTES = 1024 * 1024;

export interface SessionRow {
  id: string;
  created_at: string;
  metadata: Record<string, unknown>;
  /** false when the metadata did not fit in the index: read the session for it (`metadata` is then {}). */
  metadata_complete: boolean;
  counts: SessionCounts | null;
  /** The usage totals (lib/ledger/usage.ts); null without counts. */
  usage: SessionUsage | null;
  /** When the newest record or completion was written (the creation time without one); null without counts. */
  last_activity_at: string | null;
  /** When the retention sweep may delete the session if it stays idle (null: never). */
  expires_at: string | null;
}

const cursorSchema = z.string().regex(/^[A-Za-z0-9_-]{1,80}$/, 'must be a next_after value or a session id');

export async function listSessions(
  log: LogContext,
  options: { after?: string; limit: number; counts?: boolean; background?: (task: Promise<unknown>) => void },
): Promise<{ sessions: SessionRow[]; has_more: boolean; next_after: string | null }> {
  const limit = checkInvariant(z.number().int().min(1).max(100), options.limit);
  const after =
    options.after === undefined ? undefined : await positionOf(log, checkInvariant(cursorSchema, options.after));
  const prefix = indexPrefix(log.keyPrefix);
  const scan = new PageScan(log, limit);
  // '0' sorts right after '/', and no id holds '/': every entry of `after` is below it, every later one above.
  let page = await log.store.list(prefix, {
    limit,
    ...(after !== undefined ? { startAfter: `${prefix}${after}0` } : {}),
  });
  let more: string | null | undefined = scan.take(page.objects);
  // Short of `limit` sessions (markers, entries left out, two entries of one session, or a
  // store's short page): read on, from where the listing stopped, within READ_ON_LISTINGS.
  for (let readOn = 0; more === undefined && page.truncated && page.cursor && scan.short(); readOn++) {
    if (readOn === READ_ON_LISTINGS) {
      more = scan.boundPosition() ?? null;
      break;
    }
    page = await log.store.list(prefix, { limit: READ_ON_KEYS, cursor: page.cursor });
    more = scan.take(page.objects);
  }
  if (more === undefined && page.truncated) more = scan.lastPosition ?? null;
  const { groups, gone } = scan;
  if (gone.length > 0) options.background?.(log.store.delete(gone));
  // Two entries of one session (a writer stopped between its put and its delete, or writes
  // reordered): the one with the most turns shows; after the response the session is read and
  // its entry written, and the listed ones go (the one shown may be of a config gone since).
  const best = [...groups.values()].map((group) => {
    const top = group.reduce((a, b) => (compareEntries(b, a) > 0 ? b : a));
    const keys = group.map((listed) => listed.info.key);
    if (group.length > 1) options.background?.(settleEntries(log, top.entry.id, top.entry.createdMs, keys));
    return top.entry;
  });
  const sessions: SessionRow[] = [];
  let bytes = 0;
  let cut = false;
  for (const entry of best) {
    const found = row(entry, options.counts ?? true, log.sessionTtlDays);
    const size = JSON.stringify(found).length;
    if (sessions.length > 0 && bytes + size > MAX_LISTING_BYTES) {
      cut = true;
      break;
    }
    sessions.push(found);
    bytes += size;
  }
  const last = cut ? best[sessions.length - 1]!.position : more;
  return last ? { sessions, has_more: true, next_after: last } : { sessions, has_more: false, next_after: null };
}

/**
 * The keys a page met, in index order: the entries it shows (grouped by position), the markers
 * and the keys to delete after the response. It takes keys until it holds `limit` sessions and
 * meets a key of the next position, so the last session it holds has all its keys read.
 */
class PageScan {
  readonly groups = new Map<string, { entry: IndexEntry; info: ObjectInfo }[]>();
  readonly gone: string[] = [];
  readonly #markers = new Map<string, IndexMarker[]>();
  readonly #log: LogContext;
  readonly #limit: number;
  /** The position of the last key taken, and the one before it. */
  lastPosition: string | undefined;
  #previousPosition: string | undefined;

  constructor(log: LogContext, limit: number) {
    this.#log = log;
    this.#limit = limit;
  }

  /** Whether the page holds fewer than `limit` sessions. */
  short(): boolean {
    return this.groups.size < this.#limit;
  }

  /** Takes `objects`; the position the page ends at once it is full with keys after it, else undefined. */
  take(objects: readonly ObjectInfo[]): string | undefined {
    for (const info of objects) {
      // A delete's marker, the first key of its position (log/index-markers.ts): the entries of
      // the generations it names are of a session gone, left out and deleted after the response.
      const marker = parseIndexMarker(this.#log.keyPrefix, info.key);
      const entry = marker ? null : parseIndexKey(this.#log.keyPrefix, info.key);
      const position = marker?.position ?? entry?.position;
      if (position === undefined) continue;
      if (position !== this.lastPosition) {
        if (!this.short()) return this.lastPosition;
        this.#previousPosition = this.lastPosition;
        this.lastPosition = position;
      }
      if (marker) {
        this.#markers.set(position, [...(this.#markers.get(position) ?? []), marker]);
        if (markerStale(this.#log, marker)) this.gone.push(info.key);
      } else if (markedDeleted(entry!, this.#markers.get(position))) {
        this.gone.push(info.key);
      } else {
        const group = this.groups.get(position) ?? [];
        group.push({ entry: entry!, info });
        this.groups.set(position, group);
      }
    }
    return undefined;
  }

  /**
   * Where a page cut short by READ_ON_LISTINGS ends: before the last position read when no entry
   * of it shows (the keys not read of it may hold one, another generation's behind a marker).
   */
  boundPosition(): string | undefined {
    const last = this.lastPosition;
    return last !== undefined && !this.groups.has(last) ? (this.#previousPosition ?? last) : last;
  }
}

function row(entry: IndexEntry, withCounts: boolean, ttlDays: number | null): SessionRow {
  const expiresAt = expiryOf(entry.lastActivityMs, entry.expiresAfterDays ?? ttlDays);
  return {
    id: entry.id,
    created_at: new Date(entry.createdMs).toISOString(),
    metadata: entry.metadata ?? {},
    metadata_complete: entry.metadata !== null,
    counts: withCounts ? sessionCounts(entry.counts) : null,
    usage: withCounts ? sessionUsage(entry.ledger) : null,
    last_activity_at: withCounts ? new Date(entry.lastActivityMs).toISOString() : null,
    expires_at: expiresAt === null ? null : new Date(expiresAt).toISOString(),
  };
}

const DAY_MS = 86_400_000;

/** When a session last active at `lastActivityMs` expires after `days` idle days (null: never). */
export function expiryOf(lastActivityMs: number, days: number | null): number | null {
  return days === null ? null : lastActivityMs + days * DAY_MS;
}

/**
 * The index position a cursor names: itself, or the position of the session a legacy id cursor
 * names. Neither (a cursor no listing issued, or a legacy one whose session is gone): 400
 * `invalid_request` naming `after`, so a client that mangled it does not get the first page again.
 */
async function positionOf(log: LogContext, cursor: string): Promise<string> {
  if (isIndexPosition(cursor)) return cursor;
  try {
    const { config } = await readConfig(log, cursor);
    return indexPosition(config.id, Date.parse(config.created_at));
  } catch (error) {
    if (error instanceof NotFoundError)
      throw new InvalidRequestError(
        `query.after: after must be the next_after of a previous page (or the id of a session): '${cursor}' is neither`,
        { field: 'after' },
      );
    throw error;
  }
}
