import type { ResponseItem } from 'openai/resources/responses/responses';
import { z } from 'zod';
import type { StoredItem } from '../items.ts';
import type { LogScope } from '../session/keys.ts';
import { compactionItem } from './compaction.ts';
import { OpenAIApiError } from './errors.ts';
import type { Facade } from './facade.ts';
import { parseCompactionId } from './ids.ts';
import { withinPageBytes } from './item-pages.ts';
import { listedItems, pageAfter, placeOf } from './listed-items.ts';
import { itemsBetween } from './sessions.ts';
import { getResponse, readResponse } from './stored-responses.ts';

/**
 * GET /v1/responses/{id}/input_items: the items of the response's input, as the request sent
 * them. A request with `previous_response_id` or `conversation` sent the items the response
 * stored; one that resent its conversation's whole history (lib/openai/history-index.ts), or
 * the items since previous_response_id's response (lib/openai/resent-after.ts), sent those
 * too, which its response names (`tailgate.resent`, lib/openai/create-response.ts): the stored
 * items it resent, with the compaction items it sent among them, then the items it
 * stored. A page reads the items it lists (one read of their seqs), and a compaction of the
 * conversation's its summary (SessionLog.contextAt). A stored item is listed with the reasoning
 * it carries before it (lib/openai/listed-items.ts).
 */

const resentSchema = z.object({
  first_seq: z.number().int().positive(),
  last_seq: z.number().int().nonnegative(),
  compactions: z.array(
    z.object({ at: z.number().int().nonnegative(), id: z.string(), encrypted_content: z.string().optional() }),
  ),
});

/** One place of a response's input: a stored item, or a compaction item sent. */
type Slot = { seq: number } | { compaction: { id: string; encrypted_content?: string | undefined } };

export interface InputItemsQuery {
  after?: string | undefined;
  limit?: number | undefined;
  order?: 'asc' | 'desc' | undefined;
}

/**
 * One page of a stored response's input items (`desc` by default, as OpenAI's): each stored one
 * with the reasoning it carries (lib/openai/listed-items.ts).
 */
export async function inputItemsPage(facade: Facade, id: string, query: InputItemsQuery) {
  const [{ ref, scope, input }, kept] = await Promise.all([readResponse(facade, id), getResponse(facade, id)]);
  const resent = resentSchema.safeParse(kept.tailgate?.resent);
  const slots: Slot[] = resent.success ? resentSlots(resent.data) : [];
  slots.push(...input.map((item) => ({ seq: item.seq })));
  const descending = (query.order ?? 'desc') === 'desc';
  if (descending) slots.reverse();
  const limit = query.limit ?? 20;
  const place = query.after === undefined ? undefined : placeOf(query.after, ref.sessionId, descending);
  // A page after an item id starts at its slot too, so that its entries show the id is one of them.
  const within = place !== undefined;
  const at = query.after === undefined ? -1 : slots.findIndex(named(query.after, place?.seq));
  const refused = () =>
    new OpenAIApiError(
      400,
      'invalid_request',
      `after: '${query.after}' is not an input item of response '${id}'`,
      'after',
    );
  if (at === -1 && query.after !== undefined) throw refused();
  // Within a slot's entries (an item's, a reasoning item's) the page starts at that slot.
  const start = within ? at : at + 1;
  const slice = slots.slice(start, start + (within ? limit + 1 : limit));
  const entries = await pageItems(facade, scope, slice, input);
  const page = pageAfter(
    entries.flatMap((each) => (descending ? each.reverse() : each)),
    query.after,
    within,
    limit,
  );
  if (!page) throw refused();
  const data = withinPageBytes(page.data);
  return {
    object: 'list' as const,
    data,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
    has_more: start + slice.length < slots.length || page.more || data.length < page.data.length,
  };
}

/**
 * The resent history's places, oldest first: its stored items, each compaction item before the
 * item it preceded (in the order sent; one after the last item ends them, one past it is left
 * out). Linear in the items and the compaction items.
 */
export function resentSlots(resent: z.infer<typeof resentSchema>): Slot[] {
  const count = Math.max(0, resent.last_seq - resent.first_seq + 1);
  const before = new Map<number, Slot[]>();
  for (const compaction of resent.compactions) {
    const sent = before.get(compaction.at);
    if (sent) sent.push({ compaction });
    else before.set(compaction.at, [{ compaction }]);
  }
  const slots: Slot[] = [];
  for (let at = 0; at <= count; at++) {
    for (const slot of before.get(at) ?? []) slots.push(slot);
    if (at < count) slots.push({ seq: resent.first_seq + at });
  }
  return slots;
}

/** Whether a place is the one `after` names: an item of the session (or its reasoning) at `seq`, or a compaction. */
function named(after: string, seq: number | undefined): (slot: Slot) => boolean {
  return (slot) => ('seq' in slot ? seq !== undefined && seq === slot.seq : slot.compaction.id === after);
}

/** The entries of a page's slots, each ascending: stored items read by seq (the stored input's are read already). */
async function pageItems(
  facade: Facade,
  scope: LogScope,
  page: readonly Slot[],
  input: readonly StoredItem[],
): Promise<ResponseItem[][]> {
  const sessionId = scope.id;
  const known = new Map(input.map((item) => [item.seq, item]));
  const wanted = page.flatMap((slot) => ('seq' in slot && !known.has(slot.seq) ? [slot.seq] : []));
  if (wanted.length > 0) {
    const read = await itemsBetween(facade, sessionId, Math.min(...wanted), Math.max(...wanted) + 1);
    for (const item of read) known.set(item.seq, item);
  }
  return Promise.all(
    page.map(async (slot): Promise<ResponseItem[]> => {
      if ('seq' in slot) {
        const item = known.get(slot.seq);
        if (!item) throw new Error(`input item ${slot.seq} of session ${sessionId} is missing`);
        return listedItems(item, scope);
      }
      const { id, encrypted_content: summary } = slot.compaction;
      if (summary !== undefined) return [compactionItem(id, summary)];
      const startSeq = parseCompactionId(id)?.startSeq ?? 0;
      const stored = await facade.services.sessions.contextAt(sessionId, startSeq);
      return [compactionItem(id, stored?.summary ?? '')];
    }),
  );
}
