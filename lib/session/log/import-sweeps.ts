import { IMPORTED_IN_META } from '../export-format.ts';
import {
  generationPrefixes,
  inboxRemovedPrefix,
  inboxUnreadablePrefix,
  sessionConfigKey,
  type LogScope,
} from '../keys.ts';
import type { LogContext } from './context.ts';

/** What an import deletes: its own objects once it gave up, and what a stopped delete of its id left. */

/**
 * Deletes the delivery records (`inbox_removed/`) and the notices set aside (`inbox_unreadable/`)
 * a delete of session `id` stopped before its sweep left, as that sweep would have: an import
 * before its config, so that no record of a session gone holds a name of its notices (409) or
 * shows as one of its own, nor a notice it set aside shows as set aside by the import's session.
 * Each page is deleted only when the config, read after listing it, is absent: a session's
 * records and set-aside notices are written once its config exists (an import's too), so none
 * listed is a live one's. A config found stops it, nothing more deleted: the id is taken, and the
 * import's create is refused. Costs a listing of each when nothing is left.
 */
export async function clearLeftRecords(log: LogContext, id: string): Promise<void> {
  for (const prefix of [inboxRemovedPrefix(log.keyPrefix, id), inboxUnreadablePrefix(log.keyPrefix, id)])
    if (!(await clearLeftUnder(log, id, prefix))) return;
}

/** Deletes what is under `prefix` while session `id` has no config, page by page; false once one is found. */
async function clearLeftUnder(log: LogContext, id: string, prefix: string): Promise<boolean> {
  for (;;) {
    const page = await log.store.list(prefix, { limit: 1000 });
    if (page.objects.length === 0) return true;
    if (await log.store.head(sessionConfigKey(log.keyPrefix, id))) return false;
    await log.store.delete(page.objects.map((object) => object.key));
    if (!page.truncated) return true;
  }
}

/** Deletes the delivery records of `id` an import of `generation` wrote (their IMPORTED_IN_META), and no other. */
export async function sweepImportedRecords(log: LogContext, id: string, generation: string): Promise<void> {
  const prefix = inboxRemovedPrefix(log.keyPrefix, id);
  let cursor: string | undefined;
  do {
    const page = await log.store.list(prefix, { limit: 1000, ...(cursor ? { cursor } : {}) });
    const own: string[] = [];
    for (const { key } of page.objects)
      if ((await log.store.head(key))?.metadata[IMPORTED_IN_META] === generation) own.push(key);
    if (own.length > 0) await log.store.delete(own);
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor !== undefined);
}

/** Deletes every object of an incarnation no config names (a failed import's), and nothing else. */
export async function sweepGeneration(log: LogContext, scope: LogScope): Promise<void> {
  for (const prefix of generationPrefixes(scope)) {
    for (;;) {
      const page = await log.store.list(prefix, { limit: 1000 });
      if (page.objects.length > 0) await log.store.delete(page.objects.map((object) => object.key));
      if (!page.truncated) break;
    }
  }
}
