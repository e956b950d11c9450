import type { ListResult, ObjectInfo, ObjectStore } from '../store/object-store.ts';
import {
  ancestorScope,
  CHARGE_PREFIX,
  parseRecordsEntry,
  QUEUE_SIGNAL,
  RECORD_BOUND,
  recordsPrefix,
  type LogScope,
} from './keys.ts';

/** A charge's id (keys.ts chargeKey), as long as a record's `charged` holds one at most. */
const CHARGE_ID = /^[0-9a-f]{1,64}$/;

/** One readable piece of the log, as a listing resolves it: a record, or a segment. */
export type LogUnit =
  | {
      kind: 'record';
      record: number;
      key: string;
      doneKey: string | null;
      viewKey: string | null;
      leaseKey: string | null;
      /** The record as listed (its etag and size), when a listing named it: log/record-cache.ts recallListed. */
      listed?: Pick<ObjectInfo, 'etag' | 'size'>;
    }
  | {
      kind: 'segment';
      key: string;
      size: number;
      firstRecord: number;
      lastRecord: number;
      firstSeq: number;
      lastSeq: number;
      /** A fork's ancestor's segment: the fork's history holds its seqs up to this one only. */
      ceiling?: number;
    };

/** The last seq of a unit that belongs to the log being read (a fork reads an ancestor's segment only so far). */
export function unitTop(unit: Extract<LogUnit, { kind: 'segment' }>): number {
  return Math.min(unit.lastSeq, unit.ceiling ?? Number.POSITIVE_INFINITY);
}

/** An ancestor's records a fork's cursor goes on with: its prefix, read up to `record` (seq `seq`). */
interface Ancestor {
  prefix: string;
  record: number;
  seq: number;
}

interface Group {
  prefix: string;
  entries: ObjectInfo[];
}

/**
 * Walks the records prefix newest first (one list request per page) and resolves it into
 * units that cover each record once: where a segment and the records it packs are both
 * present (a packer crashed or has not deleted them yet), the segment wins; of overlapping
 * segments the one reaching furthest back wins. Everything covered is collected in
 * `leftovers` for the packer to delete. Keys this log did not write are ignored.
 *
 * It may list a wider prefix than its own (`listPrefix`: every generation of a session, the
 * newest first) and then reads only the keys under `prefix`, stopping after them; the first
 * page may be requested before the prefix is known (`firstPage`).
 *
 * A fork's cursor (`ancestors`) goes on, after its own records, with each ancestor's records
 * up to the fork point: only units below it, and segments reaching past it marked with the
 * seq its history ends at (`ceiling`). What it meets there is read-only: no view, leftover or
 * buried record of an ancestor is collected (the ancestor's own packer looks after them).
 */
export class UnitCursor {
  /** Objects a segment made redundant (views, leases, replaced segments): the packer deletes them. */
  readonly leftovers: string[] = [];
  /**
   * Records and completions a segment covers: the packer replaces each with an empty object (a
   * tombstone) instead of deleting it, so the key stays taken and a writer working from an old
   * listing cannot create it again. Tombstones themselves are skipped.
   */
  readonly buried: string[] = [];
  /** List requests made so far. */
  lists = 0;
  /** The first page as listed (or as given): another cursor of the same listing may start from it. */
  firstListed: Promise<ListResult> | undefined;
  /**
   * The log's own queue signal (keys.ts queueSignalKey) as listed, once a page reached it: it
   * lists before the generation's records, so with any of them. Null: not listed.
   */
  queueSignal: ObjectInfo | null = null;
  /** The ids of the log's own charges listed so far (keys.ts chargeKey): they list before its records. */
  readonly charges: string[] = [];
  /** Every view (`.view`) in the pages listed so far, newest first. */
  readonly views: { record: number; key: string; size: number }[] = [];
  readonly #store: ObjectStore;
  #prefix: string;
  #listPrefix: string;
  readonly #ancestors: readonly Ancestor[];
  /** The ancestor being read (0: the log's own records). */
  #hop = 0;
  #ceiling: number | undefined;
  #firstPage: Promise<ListResult> | undefined;
  readonly #pageLimit: number;
  #low: number;
  #cursor: string | undefined;
  #done = false;
  #groups: Group[] = [];
  #carry: Group | null = null;

  /** `below`: only units of records below this number (the walk starts under it). */
  constructor(
    store: ObjectStore,
    prefix: string,
    options: {
      pageLimit?: number;
      below?: number;
      listPrefix?: string;
      firstPage?: Promise<ListResult>;
      ancestors?: readonly Ancestor[];
    } = {},
  ) {
    this.#ancestors = options.ancestors ?? [];
    this.#store = store;
    this.#prefix = prefix;
    this.#listPrefix = options.listPrefix ?? prefix;
    this.#firstPage = options.firstPage;
    this.#pageLimit = options.pageLimit ?? 1000;
    this.#low = options.below ?? Number.POSITIVE_INFINITY;
  }

  /** The next older unit, or null at the start of the log. */
  async next(): Promise<LogUnit | null> {
    for (;;) {
      const group = await this.#nextGroup();
      if (!group) {
        if (!this.#nextAncestor()) return null;
        continue;
      }
      const unit = this.#resolve(group);
      if (unit?.kind === 'segment' && this.#ceiling !== undefined) return { ...unit, ceiling: this.#ceiling };
      if (unit) return unit;
    }
  }

  /** Goes on with the next ancestor's records, below its fork point (false: there is none). */
  #nextAncestor(): boolean {
    const ancestor = this.#ancestors[this.#hop];
    if (!ancestor) return false;
    this.#hop += 1;
    this.#prefix = ancestor.prefix;
    this.#listPrefix = ancestor.prefix;
    this.#cursor = undefined;
    this.#done = false;
    this.#groups = [];
    this.#carry = null;
    this.#low = Math.min(this.#low, ancestor.record + 1);
    this.#coveredBySegment = false;
    this.#ceiling = ancestor.seq;
    return true;
  }

  async #nextGroup(): Promise<Group | null> {
    while (this.#groups.length === 0) {
      if (this.#done) {
        const carry = this.#carry;
        this.#carry = null;
        return carry;
      }
      await this.#page();
    }
    return this.#groups.shift()!;
  }

  async #page(): Promise<void> {
    const first = this.#firstPage;
    this.#firstPage = undefined;
    const listed =
      first ??
      this.#store.list(this.#listPrefix, {
        limit: this.#pageLimit,
        ...(this.#cursor ? { cursor: this.#cursor } : {}),
      });
    this.firstListed ??= listed;
    const page = await listed;
    this.lists += 1;
    let passed = false;
    for (const object of page.objects) {
      if (!object.key.startsWith(this.#prefix)) {
        // Other generations: newer ones list before ours, older ones after (then we are done).
        if (object.key > this.#prefix) passed = true;
        continue;
      }
      const name = object.key.slice(this.#prefix.length);
      if (name === QUEUE_SIGNAL) {
        if (this.#hop === 0) this.queueSignal = object;
        continue;
      }
      if (name.startsWith(CHARGE_PREFIX)) {
        // An id no charge has (keys.ts chargeKey: hex) is passed over: a record's `charged` names it.
        const charge = name.slice(CHARGE_PREFIX.length);
        if (CHARGE_ID.test(charge) && this.#hop === 0) this.charges.push(charge);
        continue;
      }
      const entry = parseRecordsEntry(name);
      if (entry?.kind === 'view' && this.#hop === 0)
        this.views.push({ record: entry.record, key: object.key, size: object.size });
      const groupPrefix = name.slice(0, 12);
      if (this.#carry && this.#carry.prefix === groupPrefix) {
        this.#carry.entries.push(object);
        continue;
      }
      if (this.#carry) this.#groups.push(this.#carry);
      this.#carry = { prefix: groupPrefix, entries: [object] };
    }
    if (page.truncated && page.cursor && !passed) this.#cursor = page.cursor;
    else this.#done = true;
  }

  #resolve(group: Group): LogUnit | null {
    const record = RECORD_BOUND - Number(group.prefix);
    /** The record as listed. */
    let listed: ObjectInfo | undefined;
    let doneKey: string | null = null;
    let viewKey: string | null = null;
    let leaseKey: string | null = null;
    const segments: Extract<LogUnit, { kind: 'segment' }>[] = [];
    for (const object of group.entries) {
      const entry = parseRecordsEntry(object.key.slice(this.#prefix.length));
      if (!entry) continue;
      // A tombstone: the record (or completion) is in a segment.
      if ((entry.kind === 'record' || entry.kind === 'done') && object.size === 0) continue;
      if (entry.kind === 'record') listed = object;
      else if (entry.kind === 'done') doneKey = object.key;
      else if (entry.kind === 'view') viewKey = object.key;
      else if (entry.kind === 'lease') leaseKey = object.key;
      else segments.push({ ...entry, kind: 'segment', key: object.key, size: object.size });
    }
    const recordKey = listed?.key ?? null;
    const present = (...keys: (string | null)[]) => keys.filter((key): key is string => key !== null);
    const discard = (segmentKeys: string[]) => {
      if (this.#hop > 0) return;
      this.leftovers.push(...segmentKeys, ...present(viewKey, leaseKey));
      this.buried.push(...present(recordKey, doneKey));
    };
    segments.sort((a, b) => a.firstRecord - b.firstRecord);
    if (!Number.isFinite(record)) return null;
    if (record >= this.#low) {
      if (this.#coveredBySegment) {
        discard(segments.map((segment) => segment.key));
        return null;
      }
      // Below a starting point given by the caller, a segment may reach over it: return it
      // (the reader clips it to the seqs it has not seen yet).
      const straddling = segments[0];
      if (!straddling || straddling.firstRecord >= this.#low) return null;
      this.#low = straddling.firstRecord;
      this.#coveredBySegment = true;
      return straddling;
    }
    if (segments.length > 0) {
      const [segment, ...covered] = segments;
      discard(covered.map((unit) => unit.key));
      this.#low = segment!.firstRecord;
      this.#coveredBySegment = true;
      return segment!;
    }
    if (listed) {
      this.#low = record;
      this.#coveredBySegment = false;
      return { kind: 'record', record, key: listed.key, doneKey, viewKey, leaseKey, listed };
    }
    return null;
  }

  #coveredBySegment = false;

  /** Skips every record from `below` up (their items are known already). */
  skipTo(below: number): void {
    if (below < this.#low) {
      this.#low = below;
      this.#coveredBySegment = false;
    }
  }
}

/** A cursor over the records of `scope`, going on into a fork's ancestors (see UnitCursor). */
export function logCursor(
  store: ObjectStore,
  scope: LogScope,
  options: { pageLimit?: number; below?: number; listPrefix?: string; firstPage?: Promise<ListResult> } = {},
): UnitCursor {
  const ancestors = (scope.ancestors ?? []).map((point) => ({
    prefix: recordsPrefix(ancestorScope(scope.keyPrefix, point)),
    record: point.record,
    seq: point.seq,
  }));
  return new UnitCursor(store, recordsPrefix(scope), { ...options, ancestors });
}
