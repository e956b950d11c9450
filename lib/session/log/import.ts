import { InvalidRequestError, NotFoundError, SessionExistsError, TailgateError } from '../../errors.ts';
import { putCreateOnly } from '../../store/create-only.ts';
import { toBytes } from '../../store/object-store.ts';
import { ofIncarnation } from '../incarnation.ts';
import {
  exportCompactionSchema,
  exportNoticeSchema,
  parseExportItem,
  parseExportLine,
  type ExportHeader,
  type ExportNotice,
} from '../export-format.ts';
import { type AttachmentLimits, hasInlineMedia, storeAttachments, withoutMedia } from '../attachments.ts';
import { blobKey, contextKey, recordKey, sessionConfigKey, validateId, type LogScope } from '../keys.ts';
import { MAX_OPEN_CALLS, type ContextStart, type LogItem, type LogRecord, type SessionConfig } from '../records.ts';
import { trackCall } from './open-calls.ts';
import { deleteSession, newIncarnation } from './config-object.ts';
import type { LogContext } from './context.ts';
import { readConfig, scopeOf } from './head.ts';
import {
  configSha256,
  finishImport,
  markImport,
  putNew,
  resumeImport,
  sameIncarnation,
  stagePending,
  type WriteNotices,
  type WrittenLog,
} from './import-pending.ts';
import { clearLeftRecords, sweepGeneration, sweepImportedRecords } from './import-sweeps.ts';
import { carryAfter, packScope, writeSegment } from './packer.ts';
import { PendingWrites } from './pending-writes.ts';
import { heldView, writeViewIfDue } from './view-writer.ts';
import type { PackOptions, SessionRecord } from './types.ts';
import type { LogView } from '../view-records.ts';

/**
 * Importing a session from its export (lib/session/export-format.ts) as the log would hold it
 * after its appends were packed, through the packer's code (log/packer.ts): the items go
 * straight into segments of about `segmentTargetBytes`, one record number each, with large
 * outputs out of line (`writeSegment`); the last chunk goes into an append record. Every
 * VIEW_EVERY_RECORDS records a view is made in memory from the one before and the items since
 * (`heldView`), and only the last record's view is stored, made so from the one before it. Everything
 * is written under a new generation that no config names, so nothing is visible until
 * `session.json` is created, create-only, at the end. A refused line, a taken id or a failed
 * write deletes what was written and stores nothing.
 */

/** One line of the stream after the header: its number (the header is line 1) and parsed JSON. */
export interface ImportLine {
  line: number;
  value: unknown;
  /** The line's UTF-8 bytes, without its line end (a view of the stream's chunk, not a copy). */
  raw: Uint8Array;
}

export interface ImportOptions {
  /** The session's config (checked by the caller); `id` is the id it is stored under. */
  header: Omit<ExportHeader, 'type' | 'format'>;
  /** The lines in batches (lib/transfer.ts, ndjsonLines). */
  lines: AsyncIterable<ImportLine[]>;
  /** One item above this many UTF-8 bytes (as JSON, without seq and created_at) is a 413. */
  maxItemBytes: number;
  /** A delivered notice whose content is above this many UTF-8 bytes is a 413. */
  maxNoticeBytes: number;
  /** What the session's strategies need of a view (the packer's options). */
  pack: PackOptions;
  /** Images and files of the items are checked against these and stored again (lib/session/attachments.ts). */
  attachmentLimits: AttachmentLimits;
  /** Writes the delivered-notice records once the config exists (they are not under a generation). */
  afterCreate: WriteNotices;
  /** The export's SHA-256 (log/import-pending.ts), once `lines` are read to their end (it reads the rest). */
  exportSha256: () => Promise<string>;
}

/**
 * Records between the views held in memory: the items since the last one (16 segments) are held
 * until the next one is made of them, and a view is as large as the prompt, so making one for
 * every segment would make an import's time grow with the square of its length (bench/transfer.ts
 * measures the held items as the import's live heap).
 */
export const VIEW_EVERY_RECORDS = 16;
/** An item's `created_at` as the service writes them (and an export holds them). */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})$/;

/** The delivered-notice records an import holds until the config exists (JSON bytes). */
export const MAX_IMPORT_NOTICE_BYTES = 8 * 1024 * 1024;

/**
 * How far past this clock an imported session's creation time may be (another machine's clock):
 * the inbox delivers a session the notices posted since its creation, with this tolerance.
 */
const CREATED_AHEAD_MS = 5_000;

/** See SessionLog.importSession. */
export async function importSession(log: LogContext, options: ImportOptions): Promise<SessionRecord> {
  const { header } = options;
  const id = validateId(header.id);
  // Later, every notice posted until then would be left as stale; before 1970, the session would
  // have no place in the session listing (its key holds 13 digits of inverted creation time).
  const created = Date.parse(header.created_at);
  if (!(created >= 0 && created <= log.clock().getTime() + CREATED_AHEAD_MS))
    throw new InvalidRequestError(`line 1.created_at: ${header.created_at} is not between 1970 and now`, {
      field: 'line 1.created_at',
    });
  const configKey = sessionConfigKey(log.keyPrefix, id);
  const existing = await readConfig(log, id).catch((error: unknown) => {
    if (error instanceof NotFoundError) return null;
    throw error;
  });
  // Its own import stopped after its config: the same export finishes it (log/import-pending.ts).
  if (existing)
    return resumeImport(log, existing.config, existing.info.body, options.exportSha256, options.afterCreate);
  const config: SessionConfig = {
    format: 'tailgate.session.v1',
    id,
    ...newIncarnation(log.clock()),
    created_at: header.created_at,
    updated_at: log.clock().toISOString(),
    instructions: header.instructions,
    model: header.model,
    strategies: header.strategies,
    strategy_config: header.strategy_config,
    tools: header.tools,
    metadata: header.metadata,
    ...(header.expires_after_days !== undefined ? { expires_after_days: header.expires_after_days } : {}),
    ...(header.on_busy !== undefined ? { on_busy: header.on_busy } : {}),
    // An export without a budget takes the deployment's default, as a session created here does.
    ...(header.budget !== undefined || log.defaultBudget ? { budget: header.budget ?? log.defaultBudget! } : {}),
  };
  const scope = scopeOf(log.keyPrefix, config);
  let wrote: WrittenLog;
  try {
    await markImport(log, scope);
    wrote = await writeLog(log, scope, options);
    const body = JSON.stringify(config);
    const sums = { export_sha256: await options.exportSha256(), config_sha256: configSha256(body) };
    await stagePending(log, scope, { ...sums, ...wrote });
    // Delivery records and set-aside notices a delete of the id stopped before its sweep left (none while a
    // session of it exists).
    await clearLeftRecords(log, id);
    const written = await putCreateOnly(log.store, configKey, body, { contentType: 'application/json' }, (object) =>
      ofIncarnation(object.body, config.generation!),
    );
    if (!written) throw new SessionExistsError(id);
  } catch (error) {
    // Nothing names the generation: its objects go (a crash leaves them to the next delete of the id).
    await sweepGeneration(log, scope).catch(() => undefined);
    throw error;
  }
  try {
    return await finishImport(log, config, wrote.notices, options.afterCreate);
  } catch (error) {
    // Deleted meanwhile, or used by another client before it was whole: not this import's to delete.
    if (error instanceof NotFoundError || error instanceof SessionExistsError) throw error;
    // Its own generation alone: a session deleted and created again under the id meanwhile is another's;
    // deleted meanwhile, what its delete left of this generation and its delivery records (landed
    // after that delete's sweep listed), not what another import writes before its config.
    // So is one a delete of its newest turn moved to another generation of its incarnation.
    const own = (head: { config: SessionConfig }) => sameIncarnation(head.config, config);
    const sweepOwn = async () => {
      await sweepGeneration(log, scope);
      await sweepImportedRecords(log, id, scope.generation);
    };
    await deleteSession(log, id, own, false)
      .catch((gone: unknown) => (gone instanceof NotFoundError ? sweepOwn() : undefined))
      .catch(() => undefined);
    throw error;
  }
}

/** Checks every line and writes the log: the notices, for after the config, and its last record (0: none). */
async function writeLog(log: LogContext, scope: LogScope, options: ImportOptions): Promise<WrittenLog> {
  const writes = new PendingWrites();
  try {
    return await writeChunks(log, scope, options, writes);
  } catch (error) {
    // What is still in flight lands before the caller deletes the generation.
    await writes.settle();
    throw error;
  }
}

async function writeChunks(
  log: LogContext,
  scope: LogScope,
  options: ImportOptions,
  writes: PendingWrites,
): Promise<WrittenLog> {
  const recordBytes = Math.max(1, log.segmentTargetBytes);
  const pending = new Set<string>();
  const notices: ExportNotice[] = [];
  const noticeNames = new Set<string>();
  let noticeBytes = 0;
  let chunk: LogItem[] = [];
  // The line each item of the chunk was read from, when a segment may hold it as it came.
  let lines: (Uint8Array | undefined)[] = [];
  let chunkBytes = 0;
  // Every item since the last view: the next view is made of them and the last one.
  let held: LogItem[] = [];
  let seq = 0;
  let toolCalls = 0;
  let record = 0;
  let context: ContextStart | null = null;
  // The messages before the next segment, as a segment carries them (log/packer.ts).
  let carried: LogItem[] | null = [];
  // The newest view, held in memory: only the last one is stored (log/view-writer.ts, heldView).
  let prior: LogView | null = null;
  const flush = async (final: boolean) => {
    record += 1;
    const firstSeq = seq - chunk.length + 1;
    const messages = chunk.filter((item) => item.type === 'message');
    const counts = { items: seq, turns: 0, tool_calls: toolCalls };
    const closing: LogRecord = {
      format: 'tailgate.record.v1',
      record,
      kind: 'append',
      created_at: log.clock().toISOString(),
      first_seq: firstSeq,
      items: chunk,
      counts,
      open_calls: [...pending],
    };
    if (!final) {
      const states = [{ record, counts, context: null, open_calls: closing.open_calls }];
      const content = { firstRecord: record, lastRecord: record, items: chunk, turns: [], carried, states, lines };
      await writes.add(() => writeSegment(log, scope, content, firstSeq));
      carried = carryAfter(carried, messages);
      if (record % VIEW_EVERY_RECORDS === 0) {
        // A view reads the log below its record when what it holds falls short.
        await writes.drain();
        prior = await heldView(log, scope, { record: closing, done: null }, prior, held, options.pack.requirement);
        held = [];
      }
      chunk = [];
      lines = [];
      chunkBytes = 0;
      return;
    }
    await writes.drain();
    if (context) {
      context = { ...context, base_record: record };
      await putNew(log, contextKey(scope, record), JSON.stringify({ format: 'tailgate.context.v1', ...context }));
    }
    // The usage totals go on from the exported ones, so the session's budget keeps counting.
    const ledger = options.header.ledger;
    const body: LogRecord = { ...closing, ...(context ? { context } : {}), ...(ledger ? { ledger } : {}) };
    await putNew(log, recordKey(scope, record), JSON.stringify(body));
    await writeViewIfDue(log, scope, { ...options.pack, refresh: true }, held, prior);
    await packScope(log, scope, options.pack);
  };
  for await (const batch of options.lines) {
    for (const { line, value, raw } of batch) {
      const type = typeof value === 'object' && value !== null ? (value as { type?: unknown }).type : undefined;
      if (type === 'notice') {
        const notice = parseExportLine(line, value, exportNoticeSchema);
        const size = toBytes(notice.content).length;
        if (size > options.maxNoticeBytes)
          throw new TailgateError(
            'payload_too_large',
            `line ${line}: the notice is ${size} bytes; one notice may hold at most ${options.maxNoticeBytes}`,
            { line, size, limit: options.maxNoticeBytes },
          );
        noticeBytes += toBytes(JSON.stringify(notice)).length;
        if (noticeBytes > MAX_IMPORT_NOTICE_BYTES)
          throw new TailgateError(
            'payload_too_large',
            `line ${line}: the delivered notices pass ${MAX_IMPORT_NOTICE_BYTES} bytes, the most one import takes`,
            { line, limit: MAX_IMPORT_NOTICE_BYTES },
          );
        if (noticeNames.has(notice.stored_as))
          throw new InvalidRequestError(`line ${line}.stored_as: ${notice.stored_as} comes twice`, {
            field: `line ${line}.stored_as`,
          });
        noticeNames.add(notice.stored_as);
        notices.push(notice);
        continue;
      }
      if (notices.length > 0) throw outOfOrder(line, 'after the delivered notices');
      if (type === 'compaction') {
        if (context) throw outOfOrder(line, 'after the compaction (an export has one at most)');
        const { type: _type, ...compaction } = parseExportLine(line, value, exportCompactionSchema);
        checkCompaction(line, compaction.start_seq, seq);
        context = { ...compaction, base_record: 1 };
        continue;
      }
      if (context) throw outOfOrder(line, 'after the compaction');
      let item = parseExportItem(line, value) as LogItem;
      if (!ISO_TIME.test(item.created_at))
        throw new InvalidRequestError(
          `line ${line}.created_at: ${JSON.stringify(item.created_at)} is not an ISO time`,
          {
            field: `line ${line}.created_at`,
          },
        );
      let stored: Uint8Array | undefined = raw;
      if (hasInlineMedia([item])) {
        stored = undefined;
        const blobKeyOf = (sha256: string) => blobKey(scope, sha256);
        [item] = (await storeAttachments(
          log.store,
          [item],
          { ...options.attachmentLimits, restoring: true },
          blobKeyOf,
          () => `line ${line}`,
        )) as [LogItem];
      }
      if (item.seq !== seq + 1)
        throw new InvalidRequestError(`line ${line}.seq: ${item.seq} where ${seq + 1} was expected`, {
          field: `line ${line}.seq`,
        });
      // The item without seq and created_at is shorter than its line: measured only when the line is long.
      const size = raw.length > options.maxItemBytes ? bareBytes(item) : raw.length;
      if (size > options.maxItemBytes)
        throw new TailgateError(
          'payload_too_large',
          `line ${line}: the item is ${size} bytes; one item may hold at most ${options.maxItemBytes}`,
          { line, size, limit: options.maxItemBytes },
        );
      if (chunkBytes >= recordBytes) await flush(false);
      // A model's call may take the call_id of a call still open (the turn keeps it open once,
      // log/claim.ts), so an export may hold one: taken as the turn took it. Outputs are checked.
      if (item.type === 'function_call') pending.add(item.call_id);
      else trackCall(pending, item, () => `line ${line}`);
      if (pending.size > MAX_OPEN_CALLS) pending.delete(pending.values().next().value!);
      seq += 1;
      if (item.type === 'function_call') toolCalls += 1;
      chunk.push(item);
      // The schema keeps such a line whole (strict objects of strings and numbers): it parses to the item.
      lines.push(hasStringPayload(item) ? stored : undefined);
      held.push(item);
      chunkBytes += size;
    }
  }
  // A session of no items may still have counted turns (its only turn deleted): its record carries the usage.
  if (seq > 0 || options.header.ledger) await flush(true);
  return { notices, record };
}

/** Whether an item's content or output is a string (not content parts, whose objects the schema may strip). */
function hasStringPayload(item: LogItem): boolean {
  if (item.type === 'message') return typeof item.content === 'string';
  return item.type === 'function_call' || typeof item.output === 'string';
}

/** The UTF-8 bytes of an item's JSON without its seq, created_at and media (as MAX_ITEM_BYTES counts). */
function bareBytes(item: LogItem): number {
  const { seq: _seq, created_at: _createdAt, ...bare } = item;
  return toBytes(JSON.stringify(bare, withoutMedia)).length;
}

function outOfOrder(line: number, where: string): InvalidRequestError {
  return new InvalidRequestError(
    `line ${line}: out of order ${where}; an export is the header, the items, the compaction, then the notices`,
    { field: `line ${line}` },
  );
}

function checkCompaction(line: number, start: number, lastSeq: number): void {
  const problem =
    lastSeq === 0
      ? 'a compaction needs items before it'
      : start > lastSeq + 1
        ? `start_seq ${start} is past the last item (${lastSeq})`
        : null;
  if (problem) throw new InvalidRequestError(`line ${line}: ${problem}`, { field: `line ${line}` });
}
