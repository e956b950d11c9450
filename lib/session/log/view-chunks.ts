import { CorruptObjectError } from '../../errors.ts';
import { randomHex } from '../../hash.ts';
import { toBytes, type StoredObject } from '../../store/object-store.ts';
import { viewChunkKey, type LogScope } from '../keys.ts';
import type { LogItem } from '../records.ts';
import { storedView, storedViewChunk } from '../view-check.ts';
import { rememberIndexSoon } from './key-shards.ts';
import { logCursor } from '../unit-cursor.ts';
import { itemSize, keepCopy, keepPrefix, listBytes, listParts, slotBytes, takeListBytes } from './item-bytes.ts';
import type { LogView } from '../view-records.ts';
import type { LogContext } from './context.ts';

/**
 * A view's tail as it is stored: most of it in a chunk, an immutable object that the views
 * after it name again for as long as what they hold before its end stays nearly the same, and
 * the rest in the view itself (docs/STORAGE.md, **Views in chunks**). So a view of a long
 * history costs what changed since its chunk was written, not the whole tail again.
 */

/**
 * A view names its base's chunk while it holds at most an eighth of the chunk's bytes beside it
 * (or of LogContext.viewChunkBytes).
 */
const CHUNK_SHARE = 8;
/** A view names its base's chunk while it leaves at most this share of the chunk's bytes unused. */
const UNUSED_SHARE = 16;

/** The chunk a view names, as its writer or reader holds it. */
export interface ViewChunk {
  key: string;
  record: number;
  id: string;
  /** Its items, in seq order: the same objects the view's tail holds where it keeps them. */
  items: readonly LogItem[];
  bytes: number;
}

/** The chunk of each view this process wrote or read (null: none); see chunkOfView. */
const chunks = new WeakMap<LogView, ViewChunk | null>();

/** The chunk `view` names (null: none), when this process wrote or read it. */
export function chunkOfView(view: LogView): ViewChunk | null | undefined {
  return chunks.get(view);
}

/**
 * How `view` is stored: the chunk it names (`write`: a new one, to be stored before it), the
 * seqs of that chunk's items its tail does not hold as they are (`drop`), and the items it
 * holds itself (`inline`: those after the chunk, and in its range those new or changed since).
 * `prior`: the chunk of the view it was built from, `base` (its items' bytes are taken from
 * that view's tail's where this process built them, item-bytes.ts). A new chunk holds the tail
 * before its window (messages and pinned calls, which later views change least).
 */
export interface ViewLayout {
  chunk: ViewChunk | null;
  write: boolean;
  drop: number[];
  inline: LogItem[];
}

export function layoutView(
  scope: LogScope,
  view: LogView,
  prior: ViewChunk | null | undefined,
  minBytes: number,
  base?: LogView | null,
): ViewLayout {
  if (!view.tail) return { chunk: null, write: false, drop: [], inline: [] };
  const items = view.tail.items as readonly LogItem[];
  // Its items' bytes, from those of the tail it was built from where this process built them.
  const list = listBytes(items, base?.tail?.items as readonly LogItem[] | undefined);
  if (prior) {
    const { drop, inline, unused } = againstChunk(prior, items);
    // What the view holds beside the chunk, and what a read of it fetches beyond its tail.
    const own = slotBytes(listBytes(inline, items, false)) + drop.length * 8;
    if (own <= Math.max(minBytes, prior.bytes) / CHUNK_SHARE && unused <= prior.bytes / UNUSED_SHARE)
      return { chunk: prior, write: false, drop, inline };
  }
  const windowStart = view.tail.window_start;
  // The first item of the window (seqs ascend), and the bytes of the items before it.
  let split = 0;
  for (let high = items.length; split < high; ) {
    const middle = (split + high) >>> 1;
    if (items[middle]!.seq < windowStart) split = middle + 1;
    else high = middle;
  }
  const bytes = list.starts[split]!;
  if (bytes < minBytes) {
    const inline = [...items];
    keepCopy(list, inline);
    return { chunk: null, write: false, drop: [], inline };
  }
  const chunked = items.slice(0, split);
  keepPrefix(list, chunked);
  // 8 random hex characters: two writers of one record never share a chunk.
  const id = randomHex(4);
  // Its body's length without building it (chunkBody does, once, for the put): `bytes` counts
  // each item and the comma or bracket after it; the brackets and brace around them add 2.
  const key = viewChunkKey(scope, view.record, id);
  const chunk = { key, record: view.record, id, items: chunked, bytes: chunkHead(view.record).length + bytes + 2 };
  return { chunk, write: true, drop: [], inline: items.slice(split) };
}

/**
 * The drop and inline parts of a tail of `items` stored against `chunk` (see ViewLayout), and
 * the bytes of the chunk's items the tail does not take from it (`unused`).
 */
function againstChunk(
  chunk: ViewChunk,
  items: readonly LogItem[],
): { drop: number[]; inline: LogItem[]; unused: number } {
  const drop: number[] = [];
  const inline: LogItem[] = [];
  let unused = 0;
  let at = 0;
  for (const [index, held] of chunk.items.entries()) {
    // Mostly the same objects in the same places: compared without reading either (a long
    // history's tail is tens of thousands of items scattered over the heap).
    if (items[at] === held) {
      at += 1;
      continue;
    }
    while (at < items.length && items[at]!.seq < held.seq) inline.push(items[at++]!);
    const item = items[at];
    if (item?.seq === held.seq) at += 1;
    if (item?.seq === held.seq && sameItem(item, held)) continue;
    unused += itemSize(held, chunk.items[index - 1]) + 1;
    if (item?.seq === held.seq) inline.push(item);
    else drop.push(held.seq);
  }
  inline.push(...items.slice(at));
  return { drop, inline, unused };
}

function sameItem(a: LogItem, b: LogItem): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

/**
 * The tail a stored view holds: its chunk's items but those dropped or given again inline,
 * and its inline items, in seq order (as long as each part is; the reader checks the order).
 */
export function assembleTail(
  chunk: readonly LogItem[],
  drop: readonly number[],
  inline: readonly LogItem[],
): LogItem[] {
  const dropped = new Set(drop);
  const items: LogItem[] = [];
  let at = 0;
  for (const held of chunk) {
    while (at < inline.length && inline[at]!.seq < held.seq) items.push(inline[at++]!);
    if (inline[at]?.seq === held.seq) items.push(inline[at++]!);
    else if (!dropped.has(held.seq)) items.push(held);
  }
  for (; at < inline.length; at++) items.push(inline[at]!);
  return items;
}

/** Records `chunk` as the one `view` names. */
export function rememberChunk(view: LogView, chunk: ViewChunk | null): void {
  chunks.set(view, chunk);
}

/**
 * The chunk `head` names, from the view this process holds of the same session when that names
 * it too, else read and checked; 'gone' when it was deleted. `key`: the view's key.
 */
async function readChunk(
  log: LogContext,
  scope: LogScope,
  key: string,
  head: LogView,
): Promise<ViewChunk | null | 'gone'> {
  const named = head.tail?.chunk;
  if (!named) return null;
  const chunkKey = viewChunkKey(scope, named.record, named.id);
  const sibling = log.viewCache?.sessionView(key);
  const held = sibling ? chunks.get(sibling) : undefined;
  if (held?.key === chunkKey) return held;
  const object = await log.store.get(chunkKey);
  if (!object) return 'gone';
  const items = storedViewChunk(chunkKey, object.body, named.record);
  if (items.length !== named.count)
    throw new CorruptObjectError(chunkKey, `holds ${items.length} items, its view says ${named.count}`);
  return { key: chunkKey, record: named.record, id: named.id, items, bytes: object.body.byteLength };
}

/**
 * A view, parsed and checked, its tail whole (its chunk read, or taken from the view of the
 * session this process holds when that names it too); 'gone' when it was deleted, or its chunk
 * was and a newer view is listed (then a reader lists again); null when it is of another
 * version than VIEW_VERSION, or its chunk is gone with no newer view listed (then the log is
 * read past it, which is always exact).
 */
export async function readView(
  log: LogContext,
  scope: LogScope,
  key: string,
  record: number,
  prefetched?: Promise<StoredObject | null>,
): Promise<LogView | 'gone' | null> {
  const cached = log.viewCache?.get(key);
  if (cached) return cached.policy === log.viewPolicy.version ? cached : null;
  const object = await (prefetched ?? log.store.get(key));
  if (!object) return 'gone';
  const head = storedView(key, object.body, log.viewPolicy.version);
  if (!head) return null;
  if (head.record !== record) throw new CorruptObjectError(key, `holds the view of record ${head.record}`);
  const chunk = await readChunk(log, scope, key, head);
  if (chunk === 'gone') return (await newerViewListed(log, scope, record)) ? 'gone' : null;
  let view = head;
  if (head.tail) {
    const { chunk: _named, drop = [], ...tail } = head.tail;
    const items = chunk ? assembleTail(chunk.items, drop, tail.items as LogItem[]) : tail.items;
    checkTail(key, items, tail.from_seq, head.last_seq);
    view = { ...head, tail: { ...tail, items } };
  }
  rememberChunk(view, chunk);
  log.viewCache?.set(key, view, object.body.byteLength + (chunk?.bytes ?? 0));
  rememberIndexSoon(log, scope, key, view.keys);
  return view;
}

/** Whether the newest records list a view newer than `record` (then a reader should list again). */
export async function newerViewListed(log: LogContext, scope: LogScope, record: number): Promise<boolean> {
  const cursor = logCursor(log.store, scope, { pageLimit: 100 });
  await cursor.next();
  return cursor.views.some((listed) => listed.record > record);
}

/** A view's tail: seqs ascending, none after the view's end. */
function checkTail(key: string, items: readonly { seq: number }[], fromSeq: number, lastSeq: number): void {
  let previous = fromSeq - 1;
  for (const item of items) {
    if (item.seq <= previous || item.seq > lastSeq)
      throw new CorruptObjectError(key, `tail holds seq ${item.seq} out of order`);
    previous = item.seq;
  }
}

/**
 * The bytes of a view stored as `layout` says: JSON.stringify(view), its tail's items but
 * those `layout.inline` holds in its chunk (named, with the seqs it `drop`s), as parts to put
 * (a Body: never joined here). A view's tail is most of it and mostly the previous view's
 * items, the same objects: their bytes are taken from those of the tail it was built from
 * (item-bytes.ts), so a view costs the serialization of what is new and the store's one copy
 * or write of its inline items' bytes.
 */
export function viewBody(view: LogView, layout: ViewLayout): Uint8Array[] {
  const { tail, created_at, ...rest } = view;
  // `repeated` as its own JSON, which a map extending its base's makes from the base's.
  const marked = JSON.stringify({ ...rest, aggregates: { ...rest.aggregates, repeated: REPEATED_MARK } });
  const at = marked.indexOf(REPEATED_MARK_JSON);
  const repeated = rest.aggregates.repeated.json();
  const head = `${marked.slice(0, at)}${repeated}${marked.slice(at + REPEATED_MARK_JSON.length, -1)},"tail":`;
  const end = toBytes(`,"created_at":${JSON.stringify(created_at)}}`);
  if (!tail) return [toBytes(`${head}null`), end];
  const { chunk, drop, inline } = layout;
  const named = chunk
    ? `"chunk":${JSON.stringify({ record: chunk.record, id: chunk.id, count: chunk.items.length })},${
        drop.length > 0 ? `"drop":${JSON.stringify(drop)},` : ''
      }`
    : '';
  return [
    toBytes(`${head}{"from_seq":${tail.from_seq},"window_start":${tail.window_start},${named}"items":`),
    ...listParts(listBytes(inline, tail.items as readonly LogItem[], false)),
    CLOSE,
    end,
  ];
}

/**
 * The bytes of a chunk: `{"format":"tailgate.view-chunk.v1","record":…,"items":[…]}` (viewChunkSchema),
 * its items' taken from its view's tail where layoutView cut it from one, as parts to put.
 */
export function chunkBody(chunk: Pick<ViewChunk, 'record' | 'items'>): Uint8Array[] {
  return [toBytes(chunkHead(chunk.record)), ...listParts(takeListBytes(chunk.items)), CLOSE];
}

function chunkHead(record: number): string {
  return `{"format":"tailgate.view-chunk.v1","record":${record},"items":`;
}

const CLOSE = toBytes('}');
/** What stands for `repeated` while the rest of a view's head is serialized (no other value is this string). */
const REPEATED_MARK = '\u0000repeated\u0000';
const REPEATED_MARK_JSON = JSON.stringify(REPEATED_MARK);
