import { z } from 'zod';
import { NotFoundError, SessionExistsError, StorageError, TailgateError } from '../../errors.ts';
import { SessionDeletedError } from '../../session-deleted.ts';
import { putCreateOnly } from '../../store/create-only.ts';
import { sha256Hex } from '../../hash.ts';
import { decodeUtf8 } from '../../store/object-store.ts';
import { exportNoticeSchema, type ExportNotice } from '../export-format.ts';
import { scoped, type LogScope } from '../keys.ts';
import { parseStored, type SessionConfig } from '../records.ts';
import { toSessionRecord } from './config-object.ts';
import type { LogContext } from './context.ts';
import { countsOf, ledgerOf, readHead, readNewest, scopeOf } from './head.ts';
import { writeIndexEntry } from './session-index.ts';
import type { SessionRecord } from './types.ts';

/**
 * What an import writes after its commit point (the delivered-notice records, not under a
 * generation, and the index entry), kept before it in `import/<g>/pending` with the SHA-256 of
 * the export, and deleted once written: a session whose import stopped after its config was
 * created keeps it, and the same export sent again writes the rest and is answered as the first
 * import would have been (docs/STORAGE.md, "Import").
 */

/** `import/<g>/pending`: under the generation, swept with it (keys.ts generationPrefixes). */
function importPendingKey(scope: LogScope): string {
  return `${scoped(scope, 'import')}pending`;
}

/**
 * `import/<g>/started`: an import's first write, so a sweep that keeps what imports in flight
 * wrote (log/sweep.ts, `keepImports`) tells its generation from a deleted session's; deleted with
 * the pending object.
 */
export function importMarkKey(scope: LogScope): string {
  return `${scoped(scope, 'import')}started`;
}

/** Writes an import's mark, before anything else of its generation. */
export async function markImport(log: LogContext, scope: LogScope): Promise<void> {
  await putNew(log, importMarkKey(scope), JSON.stringify({ format: 'tailgate.import.v1' }));
}

/** An import's pending object and its mark: what goes once nothing finishes the import. */
function importKeys(scope: LogScope): string[] {
  return [importPendingKey(scope), importMarkKey(scope)];
}

const pendingSchema = z.object({
  format: z.literal('tailgate.import.v1'),
  export_sha256: z.string(),
  notices: z.array(exportNoticeSchema),
  /** The import's last record (0: it wrote none): a newer one means the session was written since. */
  record: z.number().int().nonnegative(),
  /** The SHA-256 of the config the import created: another config means it was written since (a PATCH). */
  config_sha256: z.string().optional(),
});

/** What an import has left to write once its config exists. */
export type PendingImport = z.infer<typeof pendingSchema>;

/** What an import's log writing leaves for after it: the notices and its last record (0: none). */
export type WrittenLog = Pick<PendingImport, 'notices' | 'record'>;

/** The SHA-256 a pending object holds of a config's bytes (`config_sha256`). */
export function configSha256(body: string | Uint8Array): string {
  return sha256Hex(body);
}

/** Writes what remains to do after the config, before it (create-only: the generation is new). */
export async function stagePending(log: LogContext, scope: LogScope, pending: Omit<PendingImport, 'format'>) {
  await putNew(log, importPendingKey(scope), JSON.stringify({ format: 'tailgate.import.v1', ...pending }));
}

/** A create-only put under the new generation: nothing else writes there, so a refusal is a fault. */
export async function putNew(log: LogContext, key: string, body: string): Promise<void> {
  const written = await putCreateOnly(
    log.store,
    key,
    body,
    { contentType: 'application/json' },
    (object) => decodeUtf8(object.body) === body,
  );
  if (!written) throw new StorageError(`import: ${key} was written by someone else`);
}

/**
 * What the delivered-notice records' writer met (lib/inbox/transfer.ts): keys it holds, names others
 * held, and the delete of those it holds still its own (not another import's of the same export since).
 */
export interface NoticesWritten {
  written: string[];
  taken: string[];
  removeOwn: () => Promise<void>;
}

/** Writes an import's delivered-notice records, create-only (lib/inbox/transfer.ts importDelivered). */
export type WriteNotices = (config: SessionConfig, notices: ExportNotice[]) => Promise<NoticesWritten>;

/**
 * Writes the delivered notices and the index entry of an imported session whose config exists,
 * then deletes its pending object: the session is whole. A failure of the notices is thrown
 * (the pending object kept); the index entry and the delete are best effort. The config is read
 * after the notices: a session deleted meanwhile (or another incarnation of the id) gets its
 * records deleted again, as its delete's sweep may have listed before them (under another
 * incarnation, only those still this import's: one imported since from the same export holds
 * its own under the same names), and is 404 `not_found`; a name a record delivered meanwhile
 * holds (the session used before the import was whole) is 409 `session_exists`, that record
 * kept, the pending object deleted.
 */
export async function finishImport(
  log: LogContext,
  config: SessionConfig,
  notices: ExportNotice[],
  writeNotices: WriteNotices,
): Promise<SessionRecord> {
  const scope = scopeOf(log.keyPrefix, config);
  const { written, taken, removeOwn } = await writeNotices(config, notices);
  const head = await readHead(log, config.id).catch((error: unknown) => {
    if (error instanceof NotFoundError) return null;
    throw error;
  });
  if (!head || !sameIncarnation(head.config, config)) {
    // Under a session created since, a record of the same export there may be its own import's.
    if (head) await removeOwn();
    else if (written.length > 0) await log.store.delete(written);
    throw new SessionDeletedError(config.id, 'its import');
  }
  // A delete of the newest turn since (a turn taken on the session meanwhile) moved it to another
  // generation of this incarnation: still the import's session, as it stands now.
  const current = head.config;
  const pendingKeys = importKeys(scope);
  if (taken.length > 0) {
    await log.store.delete(pendingKeys).catch(() => undefined);
    throw new SessionExistsError(config.id);
  }
  try {
    await writeIndexEntry(log, current, head.newest);
  } catch {
    // The session exists: without its index entry it is listed from its next turn, append or PATCH.
  }
  // Left, a retry of the same export writes the notices again, as it would have found them.
  await log.store.delete(pendingKeys).catch(() => undefined);
  return toSessionRecord(current, countsOf(head.newest), ledgerOf(head.newest));
}

/**
 * Whether `read` is of the incarnation an import created as `created`: its generation, or one a
 * delete of the newest turn moved it to since (which keeps `incarnation`, the generation it began with).
 */
export function sameIncarnation(read: SessionConfig, created: SessionConfig): boolean {
  if (read.generation === created.generation) return true;
  const began = created.incarnation ?? created.generation;
  return began !== undefined && read.incarnation === began && read.created_at === created.created_at;
}

/**
 * An import of an id whose session exists: when that session's own import stopped after its
 * config (its pending object stands), nothing was written to the session since (its newest
 * record is still the import's last one, its config, `configBody`, still the one the import
 * created) and `exportSha256` (read to the body's end) is the export it came from, its rest is
 * written and it is answered; else 409 `session_exists`. A pending object of a session written
 * since (an import answered whose delete of it failed, or a session used, or PATCHed, without
 * the retry) is deleted then: the session is no longer the export's, and nothing finishes it;
 * so is one a delete of the newest turn left under the generation the session began with.
 */
export async function resumeImport(
  log: LogContext,
  config: SessionConfig,
  configBody: Uint8Array,
  exportSha256: () => Promise<string>,
  writeNotices: WriteNotices,
): Promise<SessionRecord> {
  const scope = scopeOf(log.keyPrefix, config);
  const key = importPendingKey(scope);
  const object = await log.store.get(key);
  if (!object) {
    // A delete of the newest turn moved the session off the generation it began with, where an
    // import's pending object is: left there, nothing finishes it now (blind: one call, no read).
    if (config.incarnation !== undefined && config.incarnation !== scope.generation)
      await log.store.delete(importKeys({ ...scope, generation: config.incarnation })).catch(() => undefined);
    throw new SessionExistsError(config.id);
  }
  const pending = parseStored(key, object.body, pendingSchema);
  const { newest } = await readNewest(log, scope);
  const patched = pending.config_sha256 !== undefined && pending.config_sha256 !== configSha256(configBody);
  if (patched || (newest?.record.record ?? 0) !== pending.record) {
    await log.store.delete(importKeys(scope)).catch(() => undefined);
    throw new SessionExistsError(config.id);
  }
  if ((await exportSha256()) !== pending.export_sha256)
    throw new TailgateError(
      'session_exists',
      `session ${config.id} already exists; its import from another export did not finish: ` +
        'send that export again to finish it, or delete the session and import this one',
      { id: config.id, import_unfinished: true },
    );
  return finishImport(log, config, pending.notices, writeNotices);
}
