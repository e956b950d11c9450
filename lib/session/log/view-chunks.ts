import { CorruptObjectError } from '../../errors.ts';
import { randomHex } from '../../hash.ts';
import { concatBytes, toBytes, type StoredObject } from '../../store/object-store.ts';
import { viewChunkKey, type LogScope } from '../keys.ts';
import type { LogItem } from '../records.ts';
import { storedView, storedViewChunk } from '../view-check.ts';
import { rememberIndex } from './key-shards.ts';
import { logCursor } from '../unit-cursor.ts';
import { elidedOf, storedItemJson, type Elided } from '../view-items.ts';
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
 * `prior`: the chunk of the view it was built from. A new chunk holds the tail before its
 * window (messages and pinned calls, which later views change least).
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
): ViewLayout {
  if (!view.tail) return { chunk: null, write: false, drop: [], inline: [] };
  const items = view.tail.items as readonly LogItem[];
  if (prior) {
    const { drop, inline, unused } = againstChunk(prior, items);
    // What the view holds beside the chunk, and what a read of it fetches beyond its tail.
    const own = inline.reduce((sum, item, index) => sum + itemSize(item, inline[index - 1]) + 1, drop.length * 8);
    if (own <= Math.max(minBytes, prior.bytes) / CHUNK_SHARE && unused <= prior.bytes / UNUSED_SHARE)
      return { chunk: prior, write: false, drop, inline };
  }
  const windowStart = view.tail.window_start;
  let split = 0;
  let bytes = 0;
  for (; split < items.length && items[split]!.seq < windowStart; split++)
    bytes += itemSize(items[split]!, items[split - 1]) + 1;
  if (bytes < minBytes) return { chunk: null, write: false, drop: [], inline: [...items] };
  const chunked = items.slice(0, split);
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
  rememberIndex(log, scope, key, view.keys);
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
 * those `layout.inline` holds in its chunk (named, with the seqs it `drop`s). A view's tail is
 * most of it and mostly the previous view's items, the same objects: each item's bytes are
 * kept (view-chunks.ts), so a view costs a copy of its inline items' bytes.
 */
export function viewBody(view: LogView, layout: ViewLayout): Uint8Array {
  const { tail, created_at, ...rest } = view;
  const head = `${JSON.stringify(rest).slice(0, -1)},"tail":`;
  const end = toBytes(`,"created_at":${JSON.stringify(created_at)}}`);
  if (!tail) return concatBytes([toBytes(`${head}null`), end]);
  const { chunk, drop, inline } = layout;
  const named = chunk
    ? `"chunk":${JSON.stringify({ record: chunk.record, id: chunk.id, count: chunk.items.length })},${
        drop.length > 0 ? `"drop":${JSON.stringify(drop)},` : ''
      }`
    : '';
  return concatBytes([
    toBytes(`${head}{"from_seq":${tail.from_seq},"window_start":${tail.window_start},${named}"items":`),
    itemList(inline),
    toBytes('}'),
    end,
  ]);
}

/**
 * The bytes of a chunk: `{"format":"tailgate.view-chunk.v1","record":…,"items":[…]}` (viewChunkSchema).
 * Its items' bytes are then kept only as their lengths (see itemBytesOf), as layoutView counted them.
 */
export function chunkBody(chunk: Pick<ViewChunk, 'record' | 'items'>): Uint8Array {
  return concatBytes([toBytes(chunkHead(chunk.record)), itemList(chunk.items, chunkItemBytes), CLOSE]);
}

/** An item's bytes for a chunk (see itemBytes), then kept as their length. */
function chunkItemBytes(item: LogItem, previous: LogItem | undefined): Uint8Array {
  const bytes = itemBytes(item, previous);
  itemBytesOf.get(item)!.bytes = bytes.length;
  return bytes;
}

function chunkHead(record: number): string {
  return `{"format":"tailgate.view-chunk.v1","record":${record},"items":`;
}

/** The JSON bytes of an array of items as stored (lib/session/view-items.ts), each one's kept (see itemBytes). */
export function itemList(items: readonly LogItem[], bytesOf = itemBytes): Uint8Array {
  const parts = [OPEN];
  items.forEach((item, index) => {
    if (index > 0) parts.push(COMMA);
    parts.push(bytesOf(item, items[index - 1]));
  });
  parts.push(CLOSE_LIST);
  return concatBytes(parts);
}

const OPEN = toBytes('[');
const COMMA = toBytes(',');
const CLOSE_LIST = toBytes(']');
const CLOSE = toBytes('}');

/**
 * Each view item's stored JSON bytes, kept by the item object with what its stored form leaves
 * out (`elided`, which depends on the item before it): a view's items are mostly the previous
 * view's, the same objects after the same ones, so each is serialized and encoded once, when it
 * first enters a view (again only where the item before it changed).
 * Once it is in a chunk only their length is kept: the views after it hold beside the chunk
 * only what changed, and a long history's chunk (tens of MiB of items) would otherwise be held
 * twice, its bytes beside its items; a new chunk (every eighth of the tail's bytes appended)
 * serializes them again.
 */
const itemBytesOf = new WeakMap<object, { elided: Elided; bytes: Uint8Array | number }>();

/** The length of an item's stored bytes after `previous` (see itemBytesOf). */
function itemSize(item: LogItem, previous: LogItem | undefined): number {
  const kept = itemBytesOf.get(item);
  if (kept?.elided !== elidedOf(item, previous)) return itemBytes(item, previous).length;
  return typeof kept.bytes === 'number' ? kept.bytes : kept.bytes.length;
}

function itemBytes(item: LogItem, previous: LogItem | undefined): Uint8Array {
  const elided = elidedOf(item, previous);
  const kept = itemBytesOf.get(item);
  if (kept?.elided === elided && kept.bytes instanceof Uint8Array) return kept.bytes;
  const bytes = toBytes(storedItemJson(item, elided));
  itemBytesOf.set(item, { elided, bytes });
  return bytes;
}
