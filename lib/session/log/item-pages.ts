import type { PromptItem, StoredItem } from '../../items.ts';
import { ancestorScope, blobKey, type LogScope } from '../keys.ts';
import { mapLimit } from '../../store/object-store.ts';
import { readPayload } from '../payloads.ts';
import type { LogItem } from '../records.ts';
import { unitTop } from '../unit-cursor.ts';
import { PARALLEL_GETS, type LogContext } from './context.ts';
import { carriedItems, readHead, readRecord, segmentRange, withFreshListing } from './head.ts';

/**
 * Pages of a session's items newest first (GET .../items), and the payloads stored out of line
 * that a page, a prompt or an export fills in.
 */

/** A page of items holds about this many bytes at most (at least one item). */
export const MAX_PAGE_BYTES = 4 * 1024 * 1024;

/** See SessionLog.hydrate. */
export async function hydrate(log: LogContext, scope: LogScope, items: PromptItem[]): Promise<PromptItem[]> {
  const hydrated = [...items];
  // Only the outputs stored out of line are read: a long prompt's other items cost no step each.
  const stored: number[] = [];
  items.forEach((item, index) => {
    if (item.type === 'function_call_output' && item.output_ref) stored.push(index);
  });
  await mapLimit(stored, PARALLEL_GETS, async (index) => {
    const item = items[index];
    if (item?.type !== 'function_call_output' || !item.output_ref) return;
    const { output_ref: ref, ...rest } = item;
    hydrated[index] = { ...rest, output: await readPayload(log.store, await payloadKey(log, scope, ref.sha256), ref) };
  });
  return hydrated;
}

/**
 * Where a payload is: under the session's own incarnation, or for a fork, where one of its
 * ancestors' segments put it (a head per incarnation until one holds it).
 */
export async function payloadKey(log: LogContext, scope: LogScope, sha256: string): Promise<string> {
  const own = blobKey(scope, sha256);
  if (!scope.ancestors) return own;
  for (const key of [own, ...scope.ancestors.map((point) => blobKey(ancestorScope(log.keyPrefix, point), sha256))])
    if (await log.store.head(key)) return key;
  return own;
}

/** See SessionLog.listItems. */
export async function listItems(
  log: LogContext,
  id: string,
  options: { before?: number; limit: number },
): Promise<{ items: StoredItem[]; has_more: boolean; next_before: number | null }> {
  const { limit, before } = options;
  const { items, scope } = await withFreshListing(async () => {
    const { newest, cursor, scope } = await readHead(log, id, 100);
    const upper = before === undefined ? Number.POSITIVE_INFINITY : before - 1;
    const page: LogItem[] = [];
    let bytes = 0;
    let lowest = Number.POSITIVE_INFINITY;
    const full = () => page.length >= limit || bytes >= MAX_PAGE_BYTES;
    const take = (items: readonly LogItem[]) => {
      for (let index = items.length - 1; index >= 0 && !full(); index--) {
        const item = items[index]!;
        if (item.seq > upper || item.seq >= lowest) continue;
        const size = itemBytes(item);
        if (page.length > 0 && bytes + size > MAX_PAGE_BYTES) {
          bytes = MAX_PAGE_BYTES;
          break;
        }
        page.push(item);
        bytes += size;
      }
      if (items.length > 0) lowest = Math.min(lowest, items[0]!.seq);
    };
    if (newest) {
      take(carriedItems(newest));
      cursor.skipTo(newest.record.recent?.[0]?.record ?? newest.record.record);
    }
    for (let unit = !full() && newest ? await cursor.next() : null; unit && !full(); unit = await cursor.next()) {
      const wanted = limit - page.length;
      if (unit.kind === 'record') {
        const { record, done } = await readRecord(log, unit);
        take([...record.items, ...(done?.items ?? [])]);
        continue;
      }
      const top = Math.min(unitTop(unit), lowest - 1);
      if (unit.firstSeq > upper || top < unit.firstSeq) continue;
      const high = Math.min(upper, top);
      const low = Math.max(unit.firstSeq, high - wanted + 1);
      lowest = Math.min(lowest, high + 1);
      take(await segmentRange(log, unit, low, high));
      lowest = low;
    }
    return { items: page, scope };
  });
  const hydrated = (await hydrate(log, scope, items)) as StoredItem[];
  const lowest = hydrated.length > 0 ? hydrated[hydrated.length - 1]!.seq : null;
  const hasMore = lowest !== null && lowest > 1;
  return { items: hydrated, has_more: hasMore, next_before: hasMore ? lowest : null };
}

/** About how many bytes an item takes in a page (its JSON, with its whole output). */
function itemBytes(item: LogItem): number {
  const json = JSON.stringify(item).length;
  return item.type === 'function_call_output' && item.output_ref ? json + item.output_ref.length : json;
}
