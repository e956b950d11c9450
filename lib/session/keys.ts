import { InvalidRequestError } from '../errors.ts';
import { idSchema } from '../items.ts';

/**
 * Object keys of a session. Every key is built from an id validated with `idSchema` (or from
 * hex digests and numbers the log computes itself), so no caller-supplied text can escape the
 * session's prefix (no `/`, no `..`).
 *
 * Layout under `<keyPrefix>sessions/<id>/`:
 * - `session.json`: the config (create-only; changed only by update, with If-Match).
 * - `turn/<inverted record>`: one record per model turn or append (create-only: the commit
 *   point). Inverted numbers (10^12 - n, 12 digits) make an ascending list newest first.
 * - `turn/<inverted record>.done`: the completion of a model turn (create-only).
 * - `turn/<inverted last>-<first>-<first seq>-<last seq>.seg`: an immutable segment packing
 *   records first..last. Kept beside the records so one list returns both, newest first.
 * - `turn/<inverted record>.view`: the view of the history up to that record (create-only,
 *   immutable): what a turn reads instead of walking segments (records.ts `viewSchema`).
 * - `blob/<sha256>`: payloads above the out-of-line threshold.
 * - `idem/<sha256 of the idempotency key>`: the record that owns an idempotency key.
 * - `context/<inverted base record>`: a compaction's summary (create-only: the claim, so two
 *   compactions from the same state store one). Records carry the latest one.
 * - `inbox/`, `inbox_removed/`: owned by lib/inbox/.
 */

/** Records are numbered below this bound; their keys use `RECORD_BOUND - n`. */
export const RECORD_BOUND = 1_000_000_000_000;
const WIDTH = 12;

/** Validates an id and returns it; throws InvalidRequestError for anything else. */
export function validateId(id: string): string {
  const parsed = idSchema.safeParse(id);
  if (!parsed.success) throw new InvalidRequestError(`invalid session id: ${parsed.error.issues[0]?.message ?? 'bad id'}`);
  return parsed.data;
}

/** `<keyPrefix>sessions/<id>/`: every object of the session lives under it. */
export function sessionPrefix(keyPrefix: string, id: string): string {
  return `${keyPrefix}sessions/${validateId(id)}/`;
}

/** `<keyPrefix>sessions/<id>/session.json`: its presence means the session exists. */
export function sessionConfigKey(keyPrefix: string, id: string): string {
  return `${sessionPrefix(keyPrefix, id)}session.json`;
}

/** The prefix under which records, completions and segments are listed newest first. */
export function recordsPrefix(keyPrefix: string, id: string): string {
  return `${sessionPrefix(keyPrefix, id)}turn/`;
}

function pad(value: number): string {
  return String(value).padStart(WIDTH, '0');
}

function checkRecordNumber(record: number): number {
  if (!Number.isSafeInteger(record) || record < 1 || record >= RECORD_BOUND) throw new RangeError(`record number out of range: ${record}`);
  return record;
}

/** The key of record `record` (a model turn or an append). */
export function recordKey(keyPrefix: string, id: string, record: number): string {
  return `${recordsPrefix(keyPrefix, id)}${pad(RECORD_BOUND - checkRecordNumber(record))}`;
}

/** The key of the completion of model turn record `record`. */
export function doneKey(keyPrefix: string, id: string, record: number): string {
  return `${recordKey(keyPrefix, id, record)}.done`;
}

/** The key of a segment packing records `firstRecord..lastRecord` (seqs `firstSeq..lastSeq`). */
/** The view of the history up to record `record` (written by `pack`). */
export function viewKey(keyPrefix: string, id: string, record: number): string {
  return `${recordKey(keyPrefix, id, record)}.view`;
}

export function segmentKey(
  keyPrefix: string,
  id: string,
  range: { firstRecord: number; lastRecord: number; firstSeq: number; lastSeq: number },
): string {
  return `${recordKey(keyPrefix, id, range.lastRecord)}-${pad(checkRecordNumber(range.firstRecord))}-${pad(range.firstSeq)}-${pad(range.lastSeq)}.seg`;
}

/** What a key under `recordsPrefix` names, or null for a key this log did not write. */
export type RecordsEntry =
  | { kind: 'record'; record: number }
  | { kind: 'done'; record: number }
  | { kind: 'view'; record: number }
  | { kind: 'segment'; firstRecord: number; lastRecord: number; firstSeq: number; lastSeq: number };

const recordPattern = /^(\d{12})(\.done|\.view)?$/;
const segmentPattern = /^(\d{12})-(\d{12})-(\d{12})-(\d{12})\.seg$/;

/** Parses the part of a key after `recordsPrefix`. */
export function parseRecordsEntry(name: string): RecordsEntry | null {
  const record = recordPattern.exec(name);
  if (record) {
    const number = RECORD_BOUND - Number(record[1]);
    if (number < 1) return null;
    return { kind: record[2] === '.done' ? 'done' : record[2] === '.view' ? 'view' : 'record', record: number };
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
export function blobKey(keyPrefix: string, id: string, sha256: string): string {
  if (!/^[0-9a-f]{64}$/.test(sha256)) throw new RangeError('blob keys are SHA-256 hex digests');
  return `${sessionPrefix(keyPrefix, id)}blob/${sha256}`;
}

/** The key that claims an idempotency key (by the SHA-256 of the key). */
export function idempotencyKey(keyPrefix: string, id: string, keyHash: string): string {
  if (!/^[0-9a-f]{64}$/.test(keyHash)) throw new RangeError('idempotency keys are stored by SHA-256 hex digest');
  return `${sessionPrefix(keyPrefix, id)}idem/${keyHash}`;
}

/** The summary of a compaction computed at record `baseRecord` (create-only). */
export function contextKey(keyPrefix: string, id: string, baseRecord: number): string {
  return `${sessionPrefix(keyPrefix, id)}context/${pad(RECORD_BOUND - checkRecordNumber(baseRecord))}`;
}
