import type { StoredItem } from '../items.ts';
import { MAX_PAGE_BYTES } from '../session/session-log.ts';
import type { Facade } from './facade.ts';

/**
 * The byte cap of the OpenAI-compatible item lists (conversation items, a response's
 * input_items): a page holds about MAX_PAGE_BYTES of items, as the native item pages
 * (`GET /v1/sessions/{id}/items`) do, and at least one. A page cut by bytes says
 * `has_more: true`, and its last id is the cursor of the next.
 */

/** Bytes an item counts for in a page: its JSON as answered. */
function bytesOf(item: unknown): number {
  return JSON.stringify(item).length;
}

/** The leading entries of `items` within about MAX_PAGE_BYTES (at least one). */
export function withinPageBytes<Item>(items: readonly Item[]): Item[] {
  let bytes = 0;
  for (let index = 0; index < items.length; index++) {
    bytes += bytesOf(items[index]);
    if (index > 0 && bytes > MAX_PAGE_BYTES) return items.slice(0, index);
  }
  return [...items];
}

/**
 * Items `from <= seq < to`, ascending or descending, as many from the start of that order as
 * fit in about MAX_PAGE_BYTES (at least one). No more than about a page is held at a time:
 * each read is a native page, itself capped by bytes.
 */
export async function itemsWithinPage(
  services: Pick<Facade['services'], 'sessions'>,
  sessionId: string,
  range: { from: number; to: number },
  ascending: boolean,
): Promise<StoredItem[]> {
  const taken: StoredItem[] = [];
  let bytes = 0;
  /** Takes `items` (in the page's order) until the budget is spent; false once it is. */
  const take = (items: readonly StoredItem[]): boolean => {
    for (const item of items) {
      const size = bytesOf(item);
      if (taken.length > 0 && bytes + size > MAX_PAGE_BYTES) return false;
      taken.push(item);
      bytes += size;
    }
    return true;
  };
  const list = (before: number, limit: number) => services.sessions.listItems(sessionId, { before, limit });
  if (!ascending) {
    for (let before = range.to; before > range.from; ) {
      const page = await list(before, Math.min(1000, before - range.from));
      const items = page.items.filter((item) => item.seq >= range.from);
      if (!take(items) || page.next_before === null || items.length === 0) break;
      before = page.next_before;
    }
    return taken;
  }
  // A native page holds the newest items of what it is asked for, so the oldest are read
  // in windows from `start`, narrowed (by the items' average size) until one comes whole.
  let start = range.from;
  let window = Math.min(1000, range.to - range.from);
  while (start < range.to && window > 0) {
    const page = await list(start + window, window);
    if (page.items.length === 0) break;
    if (page.items.length < window) {
      const average = page.items.reduce((sum, item) => sum + bytesOf(item), 0) / Math.max(1, page.items.length);
      const wanted = Math.floor((MAX_PAGE_BYTES - bytes) / Math.max(1, average));
      window = Math.max(1, Math.min(window - 1, wanted));
      continue;
    }
    if (!take([...page.items].reverse())) break;
    start += window;
    window = Math.min(1000, range.to - start);
  }
  return taken;
}
