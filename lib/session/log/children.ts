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
 * The live forks of session `id`, read from the references `forks/<g>/<child id>.<child g>`
 * its incarnations hold (log/fork-refs.ts), in key order: one listing of up to `limit`
 * references per page, then one get of each child's config. A reference is listed when the
 * child's config still names the child's generation and the child forked this session, at that
 * incarnation (a fork of a fork holds references to every ancestor; a fork of a session whose
 * newest turn was deleted, to both of its incarnations: each shows once, under its parent's).
 * References of the session to itself (log/rewind.ts) and of a deleted incarnation of the id
 * are skipped. A page may so hold fewer forks than `limit`; `next_after` goes on after it.
 * With `idPrefix`, only the forks of the current incarnation whose ids begin with it are listed.
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
  const page = await log.store.list(listed, {
    limit: options.limit,
    ...(options.after !== undefined ? { startAfter: `${prefix}${options.after}` } : {}),
  });
  const references = page.objects.map((object) => object.key.slice(prefix.length));
  const rows = await mapLimit(references, PARALLEL_GETS, async (reference): Promise<ForkRow | null> => {
    const slash = reference.lastIndexOf('/');
    const generation = slash < 0 ? '' : reference.slice(0, slash);
    const [child = '', childGeneration = ''] = reference.slice(slash + 1).split('.');
    if (child === id || !incarnations.has(generation)) return null;
    const fork = await childConfig(log, child);
    // Past the fork's own earlier incarnations (a delete of its newest turn writes one).
    const parent = fork?.fork_of?.find((point) => point.id !== child);
    if (!fork || fork.generation !== childGeneration || parent?.id !== id || parent.generation !== generation)
      return null;
    return { id: child, seq: parent.seq, created_at: fork.created_at };
  });
  const hasMore = page.truncated && references.length > 0;
  return {
    forks: rows.filter((row) => row !== null),
    has_more: hasMore,
    next_after: hasMore ? references[references.length - 1]! : null,
  };
}

async function childConfig(log: LogContext, id: string): Promise<SessionConfig | null> {
  const key = sessionConfigKey(log.keyPrefix, id);
  const object = await log.store.get(key);
  return object ? parseStored(key, object.body, sessionConfigSchema) : null;
}
