import type { ResponseItem } from 'openai/resources/responses/responses';
import type { StoredItem } from '../items.ts';
import type { LogScope } from '../session/keys.ts';
import { itemGeneration } from '../session/log/rewind.ts';
import { itemId, parseItemId, parseReasoningId, type ItemKind } from './ids.ts';
import { reasoningOutput } from './output-items.ts';
import { storedItem } from './responses.ts';

/**
 * A stored item in the item lists (a conversation's items, a response's `input_items`): the
 * reasoning it carries first, as reasoning items under the ids a response's output gives them
 * (`rs_<session>_<seq>_<n>`, lib/openai/output-items.ts), then the item, each id naming the
 * generation holding the item when a delete wrote it (lib/openai/ids.ts). An item counts for one
 * place in a list's paging, so a page is its places' entries, cut to the page's limit, and a
 * cursor may name any entry (where one item's entries begin again: placeOf).
 */

/**
 * The entries of a stored item of the session `scope` reads (its current incarnation), in the
 * list's order (`descending`: the item, then its reasoning from the last).
 */
export function listedItems(item: StoredItem, scope: LogScope, descending = false): ResponseItem[] {
  const reasoning = 'reasoning' in item ? (item.reasoning ?? []) : [];
  const base = storedItemId(scope, 'reasoning', item.seq);
  const entries: ResponseItem[] = [
    ...reasoning.map((each, index) => reasoningOutput(each, `${base}_${index + 1}`)),
    storedItem(item, storedItemId(scope, item.type, item.seq)),
  ];
  return descending ? entries.reverse() : entries;
}

/**
 * The id of the item of kind `kind` at `seq` of the session `scope` reads (its current
 * incarnation; `reasoning`: the base of its reasoning's ids), naming the generation that holds
 * it when a delete of the newest turn wrote that one (itemGeneration).
 */
export function storedItemId(scope: LogScope, kind: ItemKind, seq: number): string {
  return itemId(kind, scope.id, seq, itemGeneration(scope, seq));
}

/**
 * Where a list goes on after the entry `after` of a session's items: the seq whose entries the
 * next page starts in, and whether that seq's entries up to `after` are left out first (`within`):
 * a reasoning item's seq (its item and the other reasoning of it may follow), and in descending
 * order an item's own (its reasoning follows it). Undefined when `after` names no entry of the
 * session's items (a compaction item's id is for the caller).
 */
export function placeOf(
  after: string,
  sessionId: string,
  descending: boolean,
): { seq: number; within: boolean } | undefined {
  const reasoning = parseReasoningId(after);
  if (reasoning) return reasoning.sessionId === sessionId ? { seq: reasoning.seq, within: true } : undefined;
  const item = parseItemId(after);
  if (item?.sessionId !== sessionId) return undefined;
  return { seq: item.seq, within: descending };
}

/**
 * A page's entries after the cursor `after` (those up to it left out, when `within`), then cut to
 * `limit`: the entries and whether more came after them. Undefined when `within` and `after` is not
 * among the entries (a reasoning id the item does not have).
 */
export function pageAfter(
  entries: readonly ResponseItem[],
  after: string | undefined,
  within: boolean,
  limit: number,
): { data: ResponseItem[]; more: boolean } | undefined {
  let start = 0;
  if (within && after !== undefined) {
    start = entries.findIndex((entry) => entry.id === after) + 1;
    if (start === 0) return undefined;
  }
  const rest = entries.slice(start);
  return { data: rest.slice(0, limit), more: rest.length > limit };
}
