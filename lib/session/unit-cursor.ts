import type { ListResult, ObjectInfo, ObjectStore } from '../store/object-store.ts';
import { parseRecordsEntry, RECORD_BOUND } from './keys.ts';

/** One readable piece of the log, as a listing resolves it: a record, or a segment. */
export type LogUnit =
  | {
      kind: 'record';
      record: number;
      key: string;
      doneKey: string | null;
      viewKey: string | null;
      leaseKey: string | null;
    }
  | {
      kind: 'segment';
      key: string;
      size: number;
      firstRecord: number;
      lastRecord: number;
      firstSeq: number;
      lastSeq: number;
    };

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
  /** Every view (`.view`) in the pages listed so far, newest first. */
  readonly views: { record: number; key: string }[] = [];
  readonly #store: ObjectStore;
  readonly #prefix: string;
  readonly #listPrefix: string;
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
    options: { pageLimit?: number; below?: number; listPrefix?: string; firstPage?: Promise<ListResult> } = {},
  ) {
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
      if (!group) return null;
      const unit = this.#resolve(group);
      if (unit) return unit;
    }
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
    const page = await (first ??
      this.#store.list(this.#listPrefix, {
        limit: this.#pageLimit,
        ...(this.#cursor ? { cursor: this.#cursor } : {}),
      }));
    this.lists += 1;
    let passed = false;
    for (const object of page.objects) {
      if (!object.key.startsWith(this.#prefix)) {
        // Other generations: newer ones list before ours, older ones after (then we are done).
        if (object.key > this.#prefix) passed = true;
        continue;
      }
      const name = object.key.slice(this.#prefix.length);
      const entry = parseRecordsEntry(name);
      if (entry?.kind === 'view') this.views.push({ record: entry.record, key: object.key });
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
    let recordKey: string | null = null;
    let doneKey: string | null = null;
    let viewKey: string | null = null;
    let leaseKey: string | null = null;
    const segments: Extract<LogUnit, { kind: 'segment' }>[] = [];
    for (const object of group.entries) {
      const entry = parseRecordsEntry(object.key.slice(this.#prefix.length));
      if (!entry) continue;
      // A tombstone: the record (or completion) is in a segment.
      if ((entry.kind === 'record' || entry.kind === 'done') && object.size === 0) continue;
      if (entry.kind === 'record') recordKey = object.key;
      else if (entry.kind === 'done') doneKey = object.key;
      else if (entry.kind === 'view') viewKey = object.key;
      else if (entry.kind === 'lease') leaseKey = object.key;
      else segments.push({ ...entry, kind: 'segment', key: object.key, size: object.size });
    }
    const present = (...keys: (string | null)[]) => keys.filter((key): key is string => key !== null);
    const discard = (segmentKeys: string[]) => {
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
    if (recordKey) {
      this.#low = record;
      this.#coveredBySegment = false;
      return { kind: 'record', record, key: recordKey, doneKey, viewKey, leaseKey };
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
