import { z } from 'zod';
import { NotFoundError } from '../../errors.ts';
import { idSchema } from '../../items.ts';
import { mapLimit } from '../../store/object-store.ts';
import type { SessionCounts } from '../records.ts';
import { PARALLEL_GETS, parseInput, type LogContext } from './context.ts';
import { countsOf, readConfig, readHead } from './head.ts';

/**
 * The session listing. Sessions are found with one delimited listing of `sessions/` per
 * page (each session is one common prefix, whatever it holds), so a page costs one list
 * call however many objects the sessions have. Object stores list by key only, so the order
 * is by id (UTF-8 byte order), not by time.
 *
 * What a session's row holds is in two objects: its config (id, creation time, metadata)
 * and its newest record (the counts). Finding the newest record takes a small listing of the
 * session's records, so with `counts` (the default) a page also costs per session one get of
 * the config, one list of at most 3 keys and the newest record with its completion (2 gets),
 * 6 sessions at a time; without it, only the config get.
 */

/** A page holds about this many bytes of rows at most (at least one row). */
export const MAX_LISTING_BYTES = 1024 * 1024;

export interface SessionRow {
  id: string;
  created_at: string;
  metadata: Record<string, unknown>;
  counts: SessionCounts | null;
  /** When the newest record or completion was written (the creation time without one); null without counts. */
  last_activity_at: string | null;
}

export async function listSessions(
  log: LogContext,
  options: { after?: string; limit: number; counts?: boolean },
): Promise<{ sessions: SessionRow[]; has_more: boolean; next_after: string | null }> {
  const limit = parseInput(z.number().int().min(1).max(100), options.limit);
  const after = options.after === undefined ? undefined : parseInput(idSchema, options.after);
  const prefix = `${log.keyPrefix}sessions/`;
  // '0' sorts right after '/', and no id holds '/': every key of `after` is below it, every later id above.
  const page = await log.store.list(prefix, {
    delimiter: '/',
    limit,
    ...(after !== undefined ? { startAfter: `${prefix}${after}0` } : {}),
  });
  const ids = (page.prefixes ?? [])
    .map((group) => group.slice(prefix.length, -1))
    .filter((id) => idSchema.safeParse(id).success);
  const rows = await mapLimit(ids, PARALLEL_GETS, async (id) => {
    try {
      return await row(log, id, options.counts ?? true);
    } catch (error) {
      // Deleted since the listing, or a prefix left behind by an interrupted delete.
      if (error instanceof NotFoundError) return null;
      throw error;
    }
  });
  const sessions: SessionRow[] = [];
  let bytes = 0;
  let cut = false;
  for (const found of rows) {
    if (!found) continue;
    const size = JSON.stringify(found).length;
    if (sessions.length > 0 && bytes + size > MAX_LISTING_BYTES) {
      cut = true;
      break;
    }
    sessions.push(found);
    bytes += size;
  }
  const lastId = cut ? sessions.at(-1)!.id : ids.at(-1);
  const hasMore = cut || (page.truncated && lastId !== undefined);
  return { sessions, has_more: hasMore, next_after: hasMore ? lastId! : null };
}

async function row(log: LogContext, id: string, withCounts: boolean): Promise<SessionRow> {
  if (!withCounts) {
    const { config } = await readConfig(log, id);
    return { id, created_at: config.created_at, metadata: config.metadata, counts: null, last_activity_at: null };
  }
  const head = await readHead(log, id, 3);
  const newest = head.newest;
  return {
    id,
    created_at: head.config.created_at,
    metadata: head.config.metadata,
    counts: countsOf(newest),
    last_activity_at: newest ? (newest.done?.completed_at ?? newest.record.created_at) : head.config.created_at,
  };
}
