import type { z } from 'zod';
import { CorruptObjectError } from '../errors.ts';
import { decodeUtf8, type ObjectStore } from '../store/object-store.ts';
import { lowerBound } from '../sorted.ts';
import { logItemSchema, validateStored, type LogItem } from './records.ts';
import {
  segmentIndexSchema,
  segmentStateSchema,
  segmentTurnSchema,
  type SegmentIndex,
  type SegmentTurn,
} from './segment-records.ts';
import { resolveStates, type RecordState } from './segment-states.ts';
import { FOOTER_LENGTH, TOOL_BLOCK, type SegmentBase, type SegmentContent } from './segment-build.ts';

export {
  buildSegment,
  segmentParts,
  segmentSeqs,
  TOOL_BLOCK,
  type SegmentBase,
  type SegmentContent,
} from './segment-build.ts';

/**
 * Segments: immutable objects packing many old records. Layout, one JSON value per line:
 *
 *   [states section][turns section][tools section][messages section][index JSON][footer]
 *
 * The footer (33 bytes: `<index offset, 12 digits> <index length, 12 digits> TGSEG1\n`) locates
 * the index. Messages sit last, right before the index, because every tail view needs all of
 * them; tool traffic sits before them and is read from its end only as far as a view needs,
 * or by single lines (through the index's offsets) for the few seqs a strategy must see.
 * The states section (format v2) holds each record's closing state, read only by a fork.
 */

/** The first suffix read of a segment when its tool lines are wanted (index, messages, tail). */
export const FIRST_READ = 64 * 1024;

/**
 * Reads one segment from its end with Range requests: 64 KiB first, then as far back as the
 * caller asks (callers ask for growing runs), keeping one contiguous buffer of the object's
 * tail. Lines outside the buffer are read one range each. Everything read is validated; a
 * mismatch is a CorruptObjectError naming the key.
 */
export class SegmentReader {
  readonly key: string;
  readonly #store: ObjectStore;
  readonly #expected: { firstRecord: number; lastRecord: number; firstSeq: number; lastSeq: number };
  #buffer: Uint8Array = new Uint8Array(0);
  #start = 0;
  #size = 0;
  #index: SegmentIndex | null = null;
  #messages: LogItem[] | null = null;
  #toolSeqs: number[] | null = null;
  #carried: LogItem[] | null = null;

  /** Every message before this segment (seq order), or null when the segment does not carry them. */
  async carriedMessages(): Promise<LogItem[] | null> {
    await this.messages();
    return this.#carried;
  }
  /** Bytes fetched so far (for measurements). */
  bytesRead = 0;

  readonly #firstRead: number;

  /** `firstRead`: bytes of the first suffix read; smaller when only the index and messages are wanted. */
  constructor(
    store: ObjectStore,
    key: string,
    expected: { firstRecord: number; lastRecord: number; firstSeq: number; lastSeq: number },
    firstRead = FIRST_READ,
  ) {
    this.#store = store;
    this.#firstRead = Math.max(FOOTER_LENGTH, firstRead);
    this.key = key;
    this.#expected = expected;
  }

  /** The index; the first call reads the last 64 KiB (or more when the index is larger). */
  async index(): Promise<SegmentIndex> {
    if (this.#index) return this.#index;
    const object = await this.#store.get(this.key, { range: { suffix: this.#firstRead } });
    if (!object) throw new SegmentMissingError(this.key);
    this.bytesRead += object.body.length;
    const body = object.body;
    if (body.length < FOOTER_LENGTH) throw new CorruptObjectError(this.key, 'too short for a segment');
    const footer = this.#text(body.subarray(body.length - FOOTER_LENGTH));
    const match = /^(\d{12}) (\d{12}) TGSEG1\n$/.exec(footer);
    if (!match) throw new CorruptObjectError(this.key, 'no segment footer');
    const indexOffset = Number(match[1]);
    const indexLength = Number(match[2]);
    this.#size = indexOffset + indexLength + FOOTER_LENGTH;
    if (body.length > this.#size) throw new CorruptObjectError(this.key, 'segment footer does not match its size');
    this.#buffer = body;
    this.#start = this.#size - body.length;
    await this.#extendTo(indexOffset);
    const parsed = this.#parse(this.#slice(indexOffset, indexOffset + indexLength), segmentIndexSchema);
    const expected = this.#expected;
    // An empty segment's index once named 1..0 whatever its key's empty range: the key's holds.
    const legacyEmpty = parsed.first_seq === 1 && parsed.last_seq === 0 && expected.lastSeq === expected.firstSeq - 1;
    const index = legacyEmpty ? { ...parsed, first_seq: expected.firstSeq, last_seq: expected.lastSeq } : parsed;
    if (
      index.first_record !== expected.firstRecord ||
      index.last_record !== expected.lastRecord ||
      index.first_seq !== expected.firstSeq ||
      index.last_seq !== expected.lastSeq ||
      index.tools.marks.length !== Math.floor(index.tools.count / TOOL_BLOCK) ||
      index.turns.records.length !== index.turns.ends.length ||
      index.tools.count + index.messages.count !== index.last_seq - index.first_seq + 1 ||
      index.messages.offset + index.messages.length !== indexOffset
    ) {
      throw new CorruptObjectError(this.key, 'segment index does not match its key');
    }
    this.#index = index;
    return index;
  }

  /** Every message item of the segment, in seq order. */
  async messages(): Promise<LogItem[]> {
    if (this.#messages) return this.#messages;
    const index = await this.index();
    await this.#extendTo(index.messages.offset);
    const all = this.#lines(
      this.#slice(index.messages.offset, index.messages.offset + index.messages.length),
      logItemSchema,
    );
    const carriedCount = index.carried ?? 0;
    const carried = all.slice(0, carriedCount);
    const items = all.slice(carriedCount);
    if (
      items.length !== index.messages.count ||
      items.some((item) => item.type !== 'message' || item.seq < index.first_seq || item.seq > index.last_seq) ||
      carried.some(
        (item, i) =>
          item.type !== 'message' || item.seq >= index.first_seq || (i > 0 && item.seq <= carried[i - 1]!.seq),
      )
    ) {
      throw new CorruptObjectError(this.key, 'segment messages do not match its index');
    }
    this.#carried = index.carried === null ? null : carried;
    this.#messages = items;
    const messageSeqs = new Set(items.map((item) => item.seq));
    this.#toolSeqs = [];
    for (let seq = index.first_seq; seq <= index.last_seq; seq++) if (!messageSeqs.has(seq)) this.#toolSeqs.push(seq);
    return items;
  }

  /** The seqs of the tool lines, in order (every seq of the segment that is not a message). */
  async toolSeqs(): Promise<number[]> {
    await this.messages();
    return this.#toolSeqs!;
  }

  /**
   * The tool items at positions [from, to) of the tools section. With `fromEnd`, the tail
   * buffer grows (doubling) to cover them, as a newest-first walk wants; otherwise one
   * range request reads just those lines.
   */
  async tools(from: number, to: number, fromEnd: boolean): Promise<LogItem[]> {
    const index = await this.index();
    const seqs = await this.toolSeqs();
    if (from >= to) return [];
    // Round out to whole blocks: the index marks every TOOL_BLOCK-th line end.
    const firstBlock = Math.floor(from / TOOL_BLOCK);
    const lastBlock = Math.floor((to - 1) / TOOL_BLOCK);
    const start = firstBlock === 0 ? index.tools.offset : index.tools.marks[firstBlock - 1]!;
    const end = lastBlock < index.tools.marks.length ? index.tools.marks[lastBlock]! : index.messages.offset;
    if (fromEnd) await this.#extendTo(start);
    let bytes: Uint8Array;
    if (start >= this.#start) bytes = this.#slice(start, end);
    else bytes = await this.#range(start, end);
    const blockStart = firstBlock * TOOL_BLOCK;
    const items = this.#lines(bytes, logItemSchema);
    const blockEnd = Math.min(index.tools.count, (lastBlock + 1) * TOOL_BLOCK);
    if (
      items.length !== blockEnd - blockStart ||
      items.some((item, i) => item.type === 'message' || item.seq !== seqs[blockStart + i])
    ) {
      throw new CorruptObjectError(this.key, 'segment tool lines do not match its index');
    }
    return items.slice(from - blockStart, to - blockStart);
  }

  /** The model turns at positions [from, to) of the turns section (record order), one range read. */
  async turns(from: number, to: number): Promise<SegmentTurn[]> {
    const index = await this.index();
    const count = index.turns.records.length;
    const low = Math.max(0, from);
    const high = Math.min(count, to);
    if (low >= high) return [];
    const start = low === 0 ? index.turns.offset : index.turns.ends[low - 1]!;
    const turns = this.#lines(await this.#range(start, index.turns.ends[high - 1]!), segmentTurnSchema);
    if (
      turns.length !== high - low ||
      turns.some((turn, offset) => turn.record !== index.turns.records[low + offset])
    ) {
      throw new CorruptObjectError(this.key, 'segment turn lines do not match its index');
    }
    return turns;
  }

  /** The outcome of model turn record `record`, or null when the segment has none. */
  async turn(record: number): Promise<SegmentTurn | null> {
    const index = await this.index();
    const position = index.turns.records.indexOf(record);
    if (position < 0) return null;
    const start = position === 0 ? index.turns.offset : index.turns.ends[position - 1]!;
    const [turn] = this.#lines(await this.#range(start, index.turns.ends[position]!), segmentTurnSchema);
    if (!turn || turn.record !== record)
      throw new CorruptObjectError(this.key, 'segment turn line does not match its index');
    return turn;
  }

  /** Each record's closing state, in record order, one range read (null: a v1 segment has none). */
  async states(): Promise<RecordState[] | null> {
    const index = await this.index();
    if (index.states === undefined) return null;
    const end = index.turns.offset;
    const bytes = this.#start === 0 ? this.#slice(0, end) : await this.#range(0, end);
    const states = resolveStates(this.#lines(bytes, segmentStateSchema), index.first_record);
    if (states?.length !== index.states || index.states !== index.last_record - index.first_record + 1)
      throw new CorruptObjectError(this.key, 'segment states do not match its index');
    return states;
  }

  /**
   * What a segment extending this one needs of it (SegmentBase): its whole bytes, of which
   * only the index, the messages, the states and the unmatched calls are parsed. Null for a
   * v1 segment (no states): it is merged through `content`.
   */
  async base(): Promise<SegmentBase | null> {
    const index = await this.index();
    if (index.states === undefined) return null;
    await this.#extendTo(0);
    const messages = await this.messages();
    const states = await this.states();
    if (!states) return null;
    const seqs = await this.toolSeqs();
    const unmatched: LogItem[] = [];
    for (const seq of index.unmatched) {
      const at = lowerBound(seqs, seq);
      const [call] = seqs[at] === seq ? await this.tools(at, at + 1, true) : [];
      if (call?.type !== 'function_call') throw new CorruptObjectError(this.key, 'an unmatched seq is not a call');
      unmatched.push(call);
    }
    return { index, bytes: this.#slice(0, this.#size), messages, carried: this.#carried, states, unmatched };
  }

  /** Everything in the segment (for merging into a larger one). */
  async content(): Promise<SegmentContent> {
    const index = await this.index();
    await this.#extendTo(0);
    const turns = this.#lines(this.#slice(index.turns.offset, index.tools.offset), segmentTurnSchema);
    const tools = await this.tools(0, index.tools.count, true);
    const items = [...tools, ...(await this.messages())].sort((a, b) => a.seq - b.seq);
    return {
      firstRecord: index.first_record,
      lastRecord: index.last_record,
      items,
      turns,
      carried: await this.carriedMessages(),
      states: await this.states(),
    };
  }

  /** Bytes [start, end) of the object, one range read. */
  async #range(start: number, end: number): Promise<Uint8Array> {
    const object = await this.#store.get(this.key, { range: { offset: start, length: end - start } });
    if (!object) throw new SegmentMissingError(this.key);
    if (object.body.length !== end - start) throw new CorruptObjectError(this.key, 'short range read');
    this.bytesRead += object.body.length;
    return object.body;
  }

  async #extendTo(offset: number): Promise<void> {
    if (offset >= this.#start) return;
    // Exactly what is missing: callers already ask for growing runs of lines, and every
    // byte read beyond the view counts against read amplification.
    const newStart = Math.max(0, offset);
    const length = this.#start - newStart;
    const object = await this.#store.get(this.key, { range: { offset: newStart, length } });
    if (!object) throw new SegmentMissingError(this.key);
    if (object.body.length !== length) throw new CorruptObjectError(this.key, 'short range read');
    this.bytesRead += length;
    const buffer = new Uint8Array(this.#buffer.length + length);
    buffer.set(object.body, 0);
    buffer.set(this.#buffer, length);
    this.#buffer = buffer;
    this.#start = newStart;
  }

  #slice(start: number, end: number): Uint8Array {
    return this.#buffer.subarray(start - this.#start, end - this.#start);
  }

  #text(bytes: Uint8Array): string {
    try {
      return decodeUtf8(bytes);
    } catch {
      throw new CorruptObjectError(this.key, 'not UTF-8');
    }
  }

  #parse<Schema extends z.ZodType>(bytes: Uint8Array, schema: Schema): z.infer<Schema> {
    let value: unknown;
    try {
      value = JSON.parse(this.#text(bytes));
    } catch (error) {
      if (error instanceof CorruptObjectError) throw error;
      throw new CorruptObjectError(this.key, 'segment section is not JSON');
    }
    return validateStored(this.key, value, schema);
  }

  #lines<Schema extends z.ZodType>(bytes: Uint8Array, schema: Schema): z.infer<Schema>[] {
    const text = this.#text(bytes);
    if (text === '') return [];
    if (!text.endsWith('\n')) throw new CorruptObjectError(this.key, 'segment section does not end a line');
    return text
      .slice(0, -1)
      .split('\n')
      .map((line) => {
        let value: unknown;
        try {
          value = JSON.parse(line);
        } catch {
          throw new CorruptObjectError(this.key, 'segment line is not JSON');
        }
        return validateStored(this.key, value, schema);
      });
  }
}

/** A segment listed a moment ago is gone (a concurrent packer merged it): list again. */
export class SegmentMissingError extends Error {
  readonly key: string;
  constructor(key: string) {
    super(`segment ${key} disappeared`);
    this.name = 'SegmentMissingError';
    this.key = key;
  }
}
