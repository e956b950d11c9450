import { ancestorScope, forkMarkerKey, sessionConfigKey, sessionPrefix, type ForkPoint } from '../keys.ts';
import { parseStored, sessionConfigSchema } from '../records.ts';
import type { LogContext } from './context.ts';

/**
 * The references forks hold on their ancestors' objects (docs/STORAGE.md, "Forks"). A fork
 * puts `forks/<generation>/<child id>.<child generation>` create-only under every incarnation
 * its history reads, before its config exists; a delete's sweep keeps every generation with a
 * live reference, and a fork's delete removes its references and sweeps each ancestor again,
 * so the last fork gone takes the shared objects with it.
 */

/**
 * The generations of session `id` that a live fork reads (`shared`). A reference is live while
 * the fork's config names that generation, or for a lease after it was written (a fork still
 * before its config: it gives up when it took longer than half of that). The session's own
 * references (log/rewind.ts) land only with an if-match on its config, so they are live only
 * while it names them; the generation such a reference was written for, during a lease after
 * it, is `pending`: kept while the session exists.
 */
export async function sharedGenerations(
  log: LogContext,
  id: string,
): Promise<{ shared: Set<string>; pending: Set<string> }> {
  const prefix = `${sessionPrefix(log.keyPrefix, id)}forks/`;
  const shared = new Set<string>();
  const pending = new Set<string>();
  const now = log.clock().getTime();
  let cursor: string | undefined;
  for (;;) {
    const page = await log.store.list(prefix, { limit: 1000, ...(cursor ? { cursor } : {}) });
    for (const object of page.objects) {
      const [generation = '', name = ''] = object.key.slice(prefix.length).split('/');
      const [child = '', childGeneration = ''] = name.split('.');
      const recent = now - object.uploaded.getTime() < log.leaseMs;
      if (recent && child === id) pending.add(childGeneration);
      if (shared.has(generation)) continue;
      if ((recent && child !== id) || (await namesGeneration(log, child, childGeneration))) shared.add(generation);
    }
    if (!page.truncated || !page.cursor) return { shared, pending };
    cursor = page.cursor;
  }
}

/** Whether session `id`'s config names incarnation `generation` now (one get). */
export async function namesGeneration(log: LogContext, id: string, generation: string): Promise<boolean> {
  const key = sessionConfigKey(log.keyPrefix, id);
  const object = await log.store.get(key);
  return object !== null && parseStored(key, object.body, sessionConfigSchema).generation === generation;
}

/** The references a fork puts (or removes) under its ancestors. */
export function forkMarkers(log: LogContext, chain: readonly ForkPoint[], child: string, generation: string): string[] {
  return chain.map((point) => forkMarkerKey(ancestorScope(log.keyPrefix, point), child, generation));
}
