import type { ExportNotice } from '../session/export-format.ts';
import { ofIncarnation } from '../session/incarnation.ts';
import { inboxRemovedPrefix, sessionConfigKey } from '../session/keys.ts';
import { putCreateOnly } from '../store/create-only.ts';
import { mapLimit, type ObjectStore, type StoredObject } from '../store/object-store.ts';
import { CONCURRENCY, decodeName, META, postedAtOf, turnSchema, validTime, withMetadata } from './delivery-records.ts';

/**
 * The delivered-notice records of a session in its export (lib/session/export-format.ts):
 * read from `inbox_removed/` page by page, and written back by an import once its config
 * exists, with the metadata `GET .../inbox/delivered` reads.
 */

/** Delivery records read (with their content) at a time. */
const BATCH = 32;
const decoder = new TextDecoder('utf-8', { fatal: false, ignoreBOM: false });

/** The `notice` lines of session `id`, in `stored_as` byte order, a batch at a time. */
export async function* exportDelivered(store: ObjectStore, keyPrefix: string, id: string): AsyncGenerator<string> {
  const prefix = inboxRemovedPrefix(keyPrefix, id);
  let cursor: string | undefined;
  do {
    const page = await store.list(prefix, cursor === undefined ? {} : { cursor });
    const records = page.objects.filter((info) => !info.key.slice(prefix.length).includes('/'));
    for (let start = 0; start < records.length; start += BATCH) {
      const lines = await mapLimit(records.slice(start, start + BATCH), CONCURRENCY, async (listed) => {
        const info = await withMetadata(store, listed);
        const object = await store.get(info.key);
        // Taken back meanwhile (a turn that gave its notices back): no longer delivered.
        if (!object) return '';
        const storedAs = info.key.slice(prefix.length);
        const turn = turnSchema.safeParse(info.metadata[META.turn]);
        const notice: ExportNotice = {
          type: 'notice',
          stored_as: storedAs,
          name: decodeName(info.metadata[META.name]) ?? storedAs,
          posted_at: postedAtOf(info),
          delivered_at: validTime(info.metadata[META.deliveredAt]) ?? info.uploaded.toISOString(),
          turn: turn.success ? turn.data : null,
          content: decoder.decode(object.body),
        };
        return `${JSON.stringify(notice)}\n`;
      });
      yield lines.join('');
    }
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor !== undefined);
}

/** What an import's delivery records met: the keys that hold them, and the names another record held. */
export interface ImportedNotices {
  written: string[];
  taken: string[];
  /**
   * Deletes those of `written` still this import's (their `imported-in` its generation, a head
   * each): not a record another import of the same export under the id wrote there since.
   */
  removeOwn: () => Promise<void>;
}

/**
 * Writes the delivery records of an import (its config exists: they show from now on) of the
 * session's `generation`, create-only: a name a record not of this import holds (a notice delivered
 * meanwhile, or another import's of the same export) is left to it and answered in `taken`; one
 * holding this very record (an earlier attempt's, of the same generation) is ours. A record another
 * import wrote (`imported-in` another generation) while the config names this one is what an import
 * whose session is gone left (its cleanup stopped after deleting its config): written over, if-match.
 * The config, read once, is this one's by its fields: its `generation`, or its `incarnation` once a
 * delete of the newest turn moved it to another generation.
 */
export async function importDelivered(
  store: ObjectStore,
  keyPrefix: string,
  id: string,
  notices: readonly ExportNotice[],
  generation = '',
): Promise<ImportedNotices> {
  const prefix = inboxRemovedPrefix(keyPrefix, id);
  const written: string[] = [];
  const removeOwn = async () => {
    const own = await mapLimit(written, CONCURRENCY, async (key) =>
      (await store.head(key))?.metadata[META.importedIn] === generation ? [key] : [],
    );
    if (own.flat().length > 0) await store.delete(own.flat());
  };
  const done: ImportedNotices = { written, taken: [], removeOwn };
  let current: Promise<boolean> | undefined;
  // Whether the config is of this import's incarnation (read once): then no other import's session exists.
  const configIsOurs = () =>
    (current ??= store
      .get(sessionConfigKey(keyPrefix, id))
      .then((config) => config !== null && ofIncarnation(config.body, generation)));
  await mapLimit(notices, CONCURRENCY, async (notice) => {
    const key = `${prefix}${notice.stored_as}`;
    const metadata: Record<string, string> = {
      [META.name]: encodeURIComponent(notice.name),
      [META.postedAt]: notice.posted_at,
      [META.deliveredAt]: notice.delivered_at,
      ...(notice.turn === null ? {} : { [META.turn]: String(notice.turn) }),
      [META.importedIn]: generation,
    };
    // A delivery's claim names the notice it moved (META.sourceEtag); an import's record does not.
    // Another import's record of the same export is not ours: that import deletes its own when it
    // fails (META.importedIn its generation). A record without it predates the metadata.
    const importedIn = (found: StoredObject) => found.metadata[META.importedIn];
    const leftOver = async (found: StoredObject) =>
      found.metadata[META.sourceEtag] === undefined &&
      importedIn(found) !== undefined &&
      importedIn(found) !== generation &&
      generation !== '' &&
      (await configIsOurs());
    const ours = (found: StoredObject) =>
      found.metadata[META.sourceEtag] === undefined &&
      (importedIn(found) === undefined || importedIn(found) === generation) &&
      found.metadata[META.deliveredAt] === notice.delivered_at &&
      decoder.decode(found.body) === notice.content;
    const options = { contentType: 'text/plain; charset=utf-8', metadata };
    // A record gone since the refusal, or a write over a left one refused (it changed since its read:
    // the import that left it deleted it, still to find its session gone): the name is tried again.
    for (let attempt = 0; attempt < WRITE_OVER_ATTEMPTS; attempt++) {
      const seen: { object?: StoredObject } = {};
      const mine = (object: StoredObject) => {
        seen.object = object;
        return ours(object);
      };
      if (await putCreateOnly(store, key, notice.content, options, mine)) return void done.written.push(key);
      const found = seen.object;
      if (found === undefined) continue;
      if (!(await leftOver(found))) break;
      if (await store.put(key, notice.content, { ...options, ifMatch: found.etag })) return void done.written.push(key);
    }
    done.taken.push(notice.stored_as);
  });
  return done;
}

/** Tries of one name whose record another import left (each a create-only put, then a write over it). */
const WRITE_OVER_ATTEMPTS = 3;
