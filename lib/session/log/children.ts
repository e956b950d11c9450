import { mapLimit } from '../../store/object-store.ts';
import { sessionConfigKey, sessionPrefix } from '../keys.ts';
import { parseStored, sessionConfigSchema, type SessionConfig } from '../records.ts';
import { PARALLEL_GETS, type LogContext } from './context.ts';
import { readConfig } from './head.ts';

/** A live fork of a session as GET /v1/sessions/{id}/forks shows it. */
export interface ForkRow {
  id: string;
  /** The last seq the fork shares with the session (the fork's `forked_from.seq`). */
  seq: number;
  created_at: string;
}

/**
 * The most one page reads: MAX_LISTINGS listings of references (the first of `limit` keys, the
 * others of LISTED_KEYS, the store's largest page) and MAX_CONFIG_READS configs (twice the
 * largest `limit`). A session holds a reference to itself per delete of its newest turn, kept
 * while the incarnation it is under lives, so as many as it had such deletes: a page reads past
 * 4,000 of those and past 200 references read and skipped (of deleted forks, of forks of forks),
 * no more, so that one request's store calls stay bounded whatever a session holds (a page at
 * the bound holds fewer forks, and `next_after` goes on from there).
 */
const MAX_LISTINGS = 5;
const LISTED_KEYS = 1000;
const MAX_CONFIG_READS = 200;

/**
 * The live forks of session `id`, read from the references `forks/<g>/<child id>.<child g>`
 * its incarnations hold (log/fork-refs.ts), in key order, and a get of each child's config. A
 * reference is listed when the child's config still names the child's generation and the child
 * forked this session, at that incarnation (a fork of a fork holds references to every ancestor;
 * a fork of a session whose newest turn was deleted, to both of its incarnations: each shows
 * once, under its parent's). References of the session to itself (log/rewind.ts) and of a
 * deleted incarnation of the id are skipped without a read. A page reads on (listing after
 * listing) until it holds `limit` forks or the references end, so it holds fewer only at the end
 * or once it read what MAX_LISTINGS and MAX_CONFIG_READS allow; `next_after` (the last
 * reference it read) goes on after it. With `idPrefix`, only the forks of the current
 * incarnation whose ids begin with it are listed.
 */
export async function listForks(
  log: LogContext,
  id: string,
  options: { limit: number; after?: string; idPrefix?: string },
): Promise<{ forks: ForkRow[]; has_more: boolean; next_after: string | null }> {
  const { config } = await readConfig(log, id);
  const incarnations = new Set([config.generation ?? '']);
  for (const point of config.fork_of ?? []) if (point.id === id) incarnations.add(point.generation);
  // A flattened history's generations (log/flatten.ts): forks of them fork this session's history.
  for (const point of config.named ?? []) incarnations.add(point.generation);
  const prefix = `${sessionPrefix(log.keyPrefix, id)}forks/`;
  const generation = config.generation ? `${config.generation}/` : '';
  const listed = options.idPrefix === undefined ? prefix : `${prefix}${generation}${options.idPrefix}`;
  /** A reference's parts, or null when it is skipped without a read (not a fork of an incarnation). */
  const parse = (reference: string) => {
    const slash = reference.lastIndexOf('/');
    const [child = '', childGeneration = ''] = reference.slice(slash + 1).split('.');
    const at = slash < 0 ? '' : reference.slice(0, slash);
    return child === id || !incarnations.has(at) ? null : { child, childGeneration, at };
  };
  const forks: ForkRow[] = [];
  let listedAfter = options.after;
  let pending: string[] = [];
  let ended = false;
  let last: string | undefined;
  let listings = 0;
  let reads = 0;
  const skipFree = () => {
    while (pending.length > 0 && parse(pending[0]!) === null) last = pending.shift();
  };
  while (forks.length < options.limit) {
    skipFree();
    if (pending.length === 0) {
      if (ended || listings >= MAX_LISTINGS) break;
      const page = await log.store.list(listed, {
        limit: listings === 0 ? options.limit : LISTED_KEYS,
        ...(listedAfter !== undefined ? { startAfter: `${prefix}${listedAfter}` } : {}),
      });
      listings += 1;
      pending = page.objects.map((object) => object.key.slice(prefix.length));
      ended = !page.truncated || pending.length === 0;
      listedAfter = pending.at(-1) ?? listedAfter;
      continue;
    }
    // The next references, up to as many to read as forks are missing (and reads are left).
    const room = Math.min(options.limit - forks.length, MAX_CONFIG_READS - reads);
    if (room <= 0) break;
    let taken = 0;
    let batch = 0;
    while (batch < pending.length && (taken < room || parse(pending[batch]!) === null)) {
      if (parse(pending[batch]!) !== null) taken += 1;
      batch += 1;
    }
    const references = pending.splice(0, batch);
    reads += taken;
    const rows = await mapLimit(references, PARALLEL_GETS, (reference) => forkOf(log, id, parse(reference)));
    for (const row of rows) if (row) forks.push(row);
    last = references.at(-1);
  }
  skipFree();
  const hasMore = (pending.length > 0 || !ended) && last !== undefined;
  return { forks, has_more: hasMore, next_after: hasMore ? last! : null };
}

/** The fork a reference names, when it is a live fork of session `id` at that incarnation. */
async function forkOf(
  log: LogContext,
  id: string,
  reference: { child: string; childGeneration: string; at: string } | null,
): Promise<ForkRow | null> {
  if (!reference) return null;
  const { child, childGeneration, at } = reference;
  const fork = await childConfig(log, child);
  // Past the fork's own earlier incarnations (a delete of its newest turn writes one).
  const parent = fork?.fork_of?.find((point) => point.id !== child);
  if (!fork || fork.generation !== childGeneration || parent?.id !== id || parent.generation !== at) return null;
  return { id: child, seq: parent.seq, created_at: fork.created_at };
}

async function childConfig(log: LogContext, id: string): Promise<SessionConfig | null> {
  const key = sessionConfigKey(log.keyPrefix, id);
  const object = await log.store.get(key);
  return object ? parseStored(key, object.body, sessionConfigSchema) : null;
}
