import { InvalidRequestError } from '../errors.ts';
import { randomHex } from '../hash.ts';
import { idSchema } from '../items.ts';

/**
 * Object keys of a session. Every key is built from an id validated with `idSchema` (or from
 * hex digests, numbers and generations the log computes itself), so no caller-supplied text
 * can escape the session's prefix (no `/`, no `..`). docs/STORAGE.md describes each object.
 *
 * Layout under `<keyPrefix>sessions/<id>/`:
 * - `session.json`: the config (create-only; changed only by update, with If-Match). It names
 *   the session's `generation`: every incarnation of an id gets a new one, and every other
 *   object of the log lives under it, so late writes for a deleted incarnation never show in
 *   a re-created one.
 * - `turn/<generation>/<inverted record>`: one record per model turn, append or compaction
 *   (create-only: the commit point). Inverted numbers (10^12 - n, 12 digits) make an
 *   ascending list newest first; generations are inverted times, so the newest incarnation
 *   lists first too.
 * - `turn/<generation>/<inverted record>.done`: the completion of a model turn (create-only).
 * - `turn/<generation>/<inverted record>.lease`: the renewed lease of an open model turn.
 * - `turn/<generation>/<inverted last>-<first>-<first seq>-<last seq>.seg`: an immutable
 *   segment packing records first..last, beside the records so one list returns both.
 * - `turn/<generation>/<inverted record>.view`: the view of the history up to that record.
 * - `keys/<generation>/<inverted record>-<prefix>`: a shard of the repeat index, named by its view.
 * - `keys/<generation>/<inverted record>-repeated-<seq>`: the entries of a view's `repeated`
 *   older than `seq`, named by the views that leave them out (lib/session/log/older-repeated.ts).
 * - `tail/<generation>/<inverted record>-<id>`: a chunk of views' tails, written with the view of
 *   that record and named by it and the views after it (immutable).
 * - `blob/<generation>/<sha256>`: payloads above the out-of-line threshold.
 * - `idem/<generation>/<sha256 of the idempotency key>`: the record that owns a key.
 * - `context/<generation>/<inverted base record>`: a compaction's summary (create-only).
 * - `queue/<generation>/<sha256>`: an input queued while a turn ran (create-only).
 * - `queue_cleared/<generation>/<sha256>-<ms>`: who deletes the stale tombstone of a withdrawn
 *   input uploaded at `<ms>` (create-only; lib/session/log/queue-withdraw.ts).
 * - `queue_taking/<generation>/latest`: the queued input a pickup marked last (lib/session/log/queue-taking.ts).
 * - `events/<generation>/<turn>/<batch>`: a turn's event journal, batch by batch (create-only).
 * - `turn/<generation>/-charge-<id>`: what a model call whose turn's record never landed spent.
 * - `spent/<generation>/<turn>`: what a turn closed by someone else spent (create-only; empty:
 *   nothing known, put by the write that stopped waiting for it); `spent/<generation>/compact-<record>`:
 *   the summary of a manual compaction whose claim (record `record`) another writer passed over.
 * - `forks/<generation>/<child id>.<child generation>`: a fork's reference to this
 *   incarnation's objects (create-only): a delete keeps a generation some live fork reads.
 * - `inbox/`, `inbox_removed/`, `inbox_unreadable/`: owned by lib/inbox/, addressed by id (any
 *   client may write a notice straight into the bucket).
 *
 * Outside it, `<keyPrefix>queues/<id>` marks a session an input was queued in (queueMarkerKey).
 *
 * A config without a generation (written before generations existed) keeps the older layout:
 * the same keys without the `<generation>/` level.
 */

/** Where one incarnation of a session keeps its log. */
export interface LogScope {
  keyPrefix: string;
  id: string;
  /** '' for a session written before generations existed. */
  generation: string;
  /**
   * A fork's history before its own first record: the incarnations it was forked from,
   * nearest first, each read up to `record` (seq `seq`). Absent: not a fork.
   */
  ancestors?: readonly ForkPoint[];
  /** The generations of this id's history that a delete of its newest turn wrote (records.ts). */
  rewound?: readonly string[];
  /** The generations the ids of a flattened history name (records.ts `named`), nearest first. */
  named?: readonly { generation: string; seq: number }[];
  /** The generation this incarnation started with (records.ts), when its config names it. */
  incarnation?: string;
  /** Older generations of this incarnation whose queued inputs are still taken up (records.ts). */
  queuedIn?: readonly string[];
}

/** Where a fork's history continues: an incarnation of another session, up to a record. */
export interface ForkPoint {
  id: string;
  generation: string;
  /** The last record of that incarnation that belongs to the fork's history. */
  record: number;
  /** The last seq of that record (its completion's outputs included). */
  seq: number;
}

/** The scope of an ancestor a fork reads (its objects, never its own ancestors). */
export function ancestorScope(keyPrefix: string, point: ForkPoint): LogScope {
  return { keyPrefix, id: point.id, generation: point.generation };
}

/** A new generation: `g` + the inverted time in ms (13 digits) + 8 random hex characters. */
export function newGeneration(now: Date): string {
  const inverted = String(10_000_000_000_000 - now.getTime()).padStart(13, '0');
  return `g${inverted}${randomHex(4)}`;
}

export const generationSchemaPattern = /^g\d{13}[0-9a-f]{8}$/;

/** Records are numbered below this bound; their keys use `RECORD_BOUND - n`. */
export const RECORD_BOUND = 1_000_000_000_000;
const WIDTH = 12;

/** Validates an id and returns it; throws InvalidRequestError for anything else. */
export function validateId(id: string): string {
  const parsed = idSchema.safeParse(id);
  if (!parsed.success)
    throw new InvalidRequestError(`invalid session id: ${parsed.error.issues[0]?.message ?? 'bad id'}`);
  return parsed.data;
}

/** `<keyPrefix>sessions/<id>/`: every object of the session lives under it. */
export function sessionPrefix(keyPrefix: string, id: string): string {
  return `${keyPrefix}sessions/${validateId(id)}/`;
}

/**
 * `<keyPrefix>sessions/<id>/openai/<created ms>/<turn>.json`: the response object the facade kept
 * of a turn (lib/openai/stored-responses.ts), under the creation time of the session's
 * incarnation (a session created again never reads the objects of the one deleted).
 */
export function responseObjectKey(
  keyPrefix: string,
  session: { id: string; created_at: string },
  turn: number,
): string {
  return `${sessionPrefix(keyPrefix, session.id)}openai/${Date.parse(session.created_at)}/${turn}.json`;
}

/**
 * `<keyPrefix>sessions/<id>/openai/chat-aborted.json`: the latest chat completion under the
 * session that an `abort` notice refused (lib/openai/aborted-retry.ts), one object per session
 * id, its incarnation's creation time in its body; deleted with the session.
 */
export function chatAbortKey(keyPrefix: string, id: string): string {
  return `${sessionPrefix(keyPrefix, id)}openai/chat-aborted.json`;
}

/** `<keyPrefix>sessions/<id>/inbox/`: the pending notices (lib/inbox/), addressed by id. */
export function inboxPrefix(keyPrefix: string, id: string): string {
  return `${sessionPrefix(keyPrefix, id)}inbox/`;
}

/** `<keyPrefix>sessions/<id>/inbox_removed/`: delivered and withdrawn notices (lib/inbox/). */
export function inboxRemovedPrefix(keyPrefix: string, id: string): string {
  return `${sessionPrefix(keyPrefix, id)}inbox_removed/`;
}

/** `<keyPrefix>sessions/<id>/inbox_unreadable/`: notices set aside as undeliverable (lib/inbox/). */
export function inboxUnreadablePrefix(keyPrefix: string, id: string): string {
  return `${sessionPrefix(keyPrefix, id)}inbox_unreadable/`;
}

/** `<keyPrefix>sessions/<id>/session.json`: its presence means the session exists. */
export function sessionConfigKey(keyPrefix: string, id: string): string {
  return `${sessionPrefix(keyPrefix, id)}session.json`;
}

export function scoped(scope: LogScope, kind: string): string {
  return `${sessionPrefix(scope.keyPrefix, scope.id)}${kind}/${scope.generation ? `${scope.generation}/` : ''}`;
}

/** What turn `turn` of `scope`, closed by someone else, spent (lib/session/log/unbilled.ts). */
export function spentKey(scope: LogScope, turn: number): string {
  return `${scoped(scope, 'spent')}${pad(checkRecordNumber(turn))}`;
}

/** What the manual compaction whose claim is record `record` of `scope` summarized, its claim passed over. */
export function claimSpentKey(scope: LogScope, record: number): string {
  return `${scoped(scope, 'spent')}compact-${pad(checkRecordNumber(record))}`;
}

/**
 * What turn `turn` spent, closed by someone else (spentKey), for the turn whose record or
 * segment is at `recordsKey` (a key under recordsPrefix): the generation that wrote it, an
 * ancestor's or an earlier one's too (a fork's history, a session a delete of its newest turn
 * took back).
 */
export function spentKeyBeside(recordsKey: string, turn: number): string {
  const at = recordsKey.lastIndexOf('/turn/');
  if (at < 0) throw new RangeError('not a key of a log record');
  const name = recordsKey.slice(at + '/turn/'.length);
  const slash = name.indexOf('/');
  return `${recordsKey.slice(0, at)}/spent/${slash < 0 ? '' : name.slice(0, slash + 1)}${pad(checkRecordNumber(turn))}`;
}

/** Where the forks of one incarnation leave their references (`forks/<generation>/`). */
export function forkMarkersPrefix(scope: LogScope): string {
  return scoped(scope, 'forks');
}

/** The reference of fork `childId` (incarnation `childGeneration`) to the incarnation `scope`. */
export function forkMarkerKey(scope: LogScope, childId: string, childGeneration: string): string {
  if (!generationSchemaPattern.test(childGeneration)) throw new RangeError('fork markers name a generation');
  return `${forkMarkersPrefix(scope)}${validateId(childId)}.${childGeneration}`;
}

/** The prefixes of every object of one incarnation an import writes (all but the config and the inbox). */
export function generationPrefixes(scope: LogScope): string[] {
  return ['turn', 'keys', 'tail', 'blob', 'idem', 'context', 'import'].map((kind) => scoped(scope, kind));
}

/** Every generation's records: a listing of it shows the newest generation first. */
export function recordsListPrefix(keyPrefix: string, id: string): string {
  return `${sessionPrefix(keyPrefix, id)}turn/`;
}

/** The prefix under which one generation's records, completions and segments list newest first. */
export function recordsPrefix(scope: LogScope): string {
  return scoped(scope, 'turn');
}

function pad(value: number): string {
  return String(value).padStart(WIDTH, '0');
}

function checkRecordNumber(record: number): number {
  if (!Number.isSafeInteger(record) || record < 1 || record >= RECORD_BOUND)
    throw new RangeError(`record number out of range: ${record}`);
  return record;
}

/**
 * `turn/<g>/-queued`: put by every enqueue once its entry landed (and by a delete of the newest
 * turn writing `<g>`, when the generation it leaves had it raised), emptied (if-match) by a
 * pickup that found the queue empty. Its name lists before every record of the generation, so a claim's
 * listing of the records shows it (docs/STORAGE.md "Queued inputs").
 */
export function queueSignalKey(scope: LogScope): string {
  return `${recordsPrefix(scope)}${QUEUE_SIGNAL}`;
}

/** The name of the queue's signal under a generation's records (queueSignalKey). */
export const QUEUE_SIGNAL = '-queued';

/**
 * `turn/<g>/-charge-<id>`: what a model call whose turn's record never landed spent, listed before every record
 * (charges.ts); `id`: random hex (`<id>.carried`, a charge being carried on, `<id>.pending`, its copy, list as none).
 */
export const CHARGE_PREFIX = '-charge-';
export function chargeKey(scope: LogScope, id: string): string {
  return `${recordsPrefix(scope)}${CHARGE_PREFIX}${id}`;
}

/** The key of record `record` (a model turn, an append or a compaction). */
export function recordKey(scope: LogScope, record: number): string {
  return `${recordsPrefix(scope)}${pad(RECORD_BOUND - checkRecordNumber(record))}`;
}

/** The key of the completion of model turn record `record`. */
export function doneKey(scope: LogScope, record: number): string {
  return `${recordKey(scope, record)}.done`;
}

/** The renewed lease of open model turn record `record`. */
export function leaseKey(scope: LogScope, record: number): string {
  return `${recordKey(scope, record)}.lease`;
}

/** The view of the history up to record `record` (written by `pack`). */
export function viewKey(scope: LogScope, record: number): string {
  return `${recordKey(scope, record)}.view`;
}

/** The key of a segment packing records `firstRecord..lastRecord` (seqs `firstSeq..lastSeq`). */
export function segmentKey(
  scope: LogScope,
  range: { firstRecord: number; lastRecord: number; firstSeq: number; lastSeq: number },
): string {
  const first = pad(checkRecordNumber(range.firstRecord));
  return `${recordKey(scope, range.lastRecord)}-${first}-${pad(range.firstSeq)}-${pad(range.lastSeq)}.seg`;
}

/**
 * The shards of the repeat index written with the view of record `record`, in one object: the
 * call keys seen up to the end of that record, shard after shard (lib/session/log/key-shards.ts).
 */
export function keySetKey(scope: LogScope, record: number): string {
  return `${scoped(scope, 'keys')}${pad(RECORD_BOUND - checkRecordNumber(record))}-set`;
}

/**
 * One version of a shard of the repeat index, the call keys starting with `prefix` in the set of
 * record `record` (keySetKey): the name the processes' caches keep it by (a set's shards were
 * separate objects of this name before view version 7).
 */
export function keyShardKey(scope: LogScope, record: number, prefix: string): string {
  if (!/^[0-9a-f]{0,6}$/.test(prefix)) throw new RangeError('key shard prefixes are hex');
  return `${scoped(scope, 'keys')}${pad(RECORD_BOUND - checkRecordNumber(record))}-${prefix || 'all'}`;
}

/** A chunk of views' tails, written with the view of `record` (`id`: 8 hex characters of its own). */
export function viewChunkKey(scope: LogScope, record: number, id: string): string {
  if (!/^[0-9a-f]{8}$/.test(id)) throw new RangeError('view chunk ids are 8 hex characters');
  return `${scoped(scope, 'tail')}${pad(RECORD_BOUND - checkRecordNumber(record))}-${id}`;
}

/**
 * The entries of `repeated` with a seq below `beforeSeq` in the aggregates of record `record`'s
 * view, written by the pack that wrote that view (lib/session/log/older-repeated.ts).
 */
export function olderRepeatedKey(scope: LogScope, record: number, beforeSeq: number): string {
  if (!Number.isSafeInteger(beforeSeq) || beforeSeq < 1) throw new RangeError('a split seq is a positive integer');
  return `${scoped(scope, 'keys')}${pad(RECORD_BOUND - checkRecordNumber(record))}-repeated-${beforeSeq}`;
}

/** What a key under `recordsPrefix` names, or null for a key this log did not write. */
export type RecordsEntry =
  | { kind: 'record'; record: number }
  | { kind: 'done'; record: number }
  | { kind: 'view'; record: number }
  | { kind: 'lease'; record: number }
  | { kind: 'segment'; firstRecord: number; lastRecord: number; firstSeq: number; lastSeq: number };

const recordPattern = /^(\d{12})(\.done|\.view|\.lease)?$/;
const segmentPattern = /^(\d{12})-(\d{12})-(\d{12})-(\d{12})\.seg$/;

/** Parses the part of a key after `recordsPrefix`. */
export function parseRecordsEntry(name: string): RecordsEntry | null {
  const record = recordPattern.exec(name);
  if (record) {
    const number = RECORD_BOUND - Number(record[1]);
    if (number < 1) return null;
    const kind =
      record[2] === '.done' ? 'done' : record[2] === '.view' ? 'view' : record[2] === '.lease' ? 'lease' : 'record';
    return { kind, record: number };
  }
  const segment = segmentPattern.exec(name);
  if (segment) {
    const lastRecord = RECORD_BOUND - Number(segment[1]);
    const firstRecord = Number(segment[2]);
    const firstSeq = Number(segment[3]);
    const lastSeq = Number(segment[4]);
    if (firstRecord < 1 || lastRecord < firstRecord || firstSeq < 1 || lastSeq < firstSeq - 1) return null;
    return { kind: 'segment', firstRecord, lastRecord, firstSeq, lastSeq };
  }
  return null;
}

/** The key of an out-of-line payload, by the SHA-256 of its UTF-8 bytes. */
export function blobKey(scope: LogScope, sha256: string): string {
  if (!/^[0-9a-f]{64}$/.test(sha256)) throw new RangeError('blob keys are SHA-256 hex digests');
  return `${scoped(scope, 'blob')}${sha256}`;
}

/** The key that claims an idempotency key (by the SHA-256 of the key). */
export function idempotencyKey(scope: LogScope, keyHash: string): string {
  if (!/^[0-9a-f]{64}$/.test(keyHash)) throw new RangeError('idempotency keys are stored by SHA-256 hex digest');
  return `${scoped(scope, 'idem')}${keyHash}`;
}

/** Where the session's queued inputs are (the busy policy `enqueue`). */
export function queuedPrefix(scope: LogScope): string {
  return scoped(scope, 'queue');
}

/** A queued input, by the SHA-256 its turn is claimed under (its Idempotency-Key's, or a random one). */
export function queuedKey(scope: LogScope, keyHash: string): string {
  if (!/^[0-9a-f]{64}$/.test(keyHash)) throw new RangeError('queued inputs are stored by SHA-256 hex digest');
  return `${queuedPrefix(scope)}${keyHash}`;
}

/** The queued input of the generation a pickup marked last (lib/session/log/queue-taking.ts). */
export function queueTakingKey(scope: LogScope): string {
  return `${scoped(scope, 'queue_taking')}latest`;
}

/** Who deletes the stale tombstone under `queuedKey(scope, keyHash)` uploaded at `at` (its ms, see above). */
export function tombstoneClearKey(scope: LogScope, keyHash: string, at: string): string {
  return `${scoped(scope, 'queue_cleared')}${queuedKey(scope, keyHash).slice(queuedPrefix(scope).length)}-${at}`;
}

/**
 * `<keyPrefix>queues/<id>`: the marker of a session an input was queued in (outside its prefix,
 * so one listing finds every such session): put before each queued input, removed by the
 * periodic sweep once the queue is empty (log/queue-markers.ts).
 */
export function queueMarkersPrefix(keyPrefix: string): string {
  return `${keyPrefix}queues/`;
}

export function queueMarkerKey(keyPrefix: string, id: string): string {
  return `${queueMarkersPrefix(keyPrefix)}${validateId(id)}`;
}

/** The event journal of turn `turn` (a streamed or background turn's batches, in order). */
export function journalPrefix(scope: LogScope, turn: number): string {
  return `${scoped(scope, 'events')}${pad(checkRecordNumber(turn))}/`;
}

/** Batch `index` (from 1) of a turn's event journal (create-only). */
export function journalKey(scope: LogScope, turn: number, index: number): string {
  return `${journalPrefix(scope, turn)}${pad(checkRecordNumber(index))}`;
}

/** The summary of a compaction computed at record `baseRecord` (create-only). */
export function contextKey(scope: LogScope, baseRecord: number): string {
  return `${contextPrefix(scope)}${pad(RECORD_BOUND - checkRecordNumber(baseRecord))}`;
}

/** Where one incarnation's compactions list, newest base record first. */
export function contextPrefix(scope: LogScope): string {
  return scoped(scope, 'context');
}
