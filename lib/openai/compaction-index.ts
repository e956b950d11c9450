import type { ClientItem, Item } from '../items.ts';
import { logUnlessGone } from '../log-unless-gone.ts';
import type { CompactedTurn } from '../turn/index.ts';
import { turnCompactionOutput } from './compaction.ts';
import type { IndexFacade } from './facade.ts';
import { indexHistory, keptHash, type HistoryEntry } from './history-index.ts';
import { parseCompactionId } from './ids.ts';
import type { InputAnchor } from './request-input.ts';
import { isOutput, itemsBetween } from './sessions.ts';

/**
 * A compaction's entries in the history index (lib/openai/history-index.ts), for a client that
 * drops what came before a compaction item (OpenAI's advice) and sends that item first.
 */

/**
 * Where the history index keeps a compaction's conversation as it stood when the compaction was
 * made (the empty history after the compaction item, or the items it kept): a request that
 * sends that compaction item (its id and summary) first, then those, continues the
 * conversation. The caller only, of the loop's fields: the compaction was made by a response or
 * by `responses.compact`, which sends none of them.
 */
export function compactionScope(facade: IndexFacade, anchor: InputAnchor): string {
  return JSON.stringify([facade.caller ?? '', 'compaction', anchor.id, anchor.summary]);
}

/**
 * Indexes the conversation a compaction item belongs to, as it stood when the compaction was
 * made (`ended`: its turn and items then), for a client that sends that item first and drops
 * what came before it (compactionScope): under the empty history, and when the compaction kept
 * items (its conversation lists them after its item: one read of them, beside that write), for
 * a client that resends them after the item, in one more write. A resend is matched up to its
 * last model output: the kept items up to their last one are a history of their own, and those
 * after it (appended after the last response; all of them when none is one) are named by the
 * entry of the history before them (HistoryEntry.kept_after), so a resend holding them next
 * continues too (when none is one, the empty history's entry is written again, naming them).
 */
export async function indexCompaction(
  facade: IndexFacade,
  session: { id: string; created_at: string },
  ended: Pick<HistoryEntry, 'generation' | 'turn' | 'items'>,
  compaction: InputAnchor,
): Promise<void> {
  const at = { ...ended, scope: compactionScope(facade, compaction) };
  const empty = indexHistory(facade, session, at, [], undefined);
  const kept = await keptItems(facade, session.id, ended.items, compaction.id).catch((error: unknown) => {
    logUnlessGone(facade.services.log, 'tailgate: could not index the items a compaction kept', error);
    return [];
  });
  const outputs = kept.findLastIndex(isOutput) + 1;
  const after = kept.slice(outputs);
  const keptAfter =
    after.length > 0 ? { items: after.length, hash: await keptHash(facade, at.scope, after) } : undefined;
  await Promise.all([
    outputs > 0 || !keptAfter ? empty : empty.then(() => indexHistory(facade, session, at, [], undefined, keptAfter)),
    outputs > 0 && indexHistory(facade, session, at, kept.slice(0, outputs), undefined, keptAfter),
  ]);
}

/**
 * The items compaction `id` of the session kept, up to its item `last` (what its conversation
 * lists after the compaction item then).
 */
async function keptItems(
  facade: IndexFacade,
  sessionId: string,
  last: number | undefined,
  id: string,
): Promise<ClientItem[]> {
  const start = parseCompactionId(id);
  if (last === undefined || start?.sessionId !== sessionId || start.startSeq > last) return [];
  return (await itemsBetween(facade, sessionId, start.startSeq, last + 1)) as Item[] as ClientItem[];
}

/**
 * Indexes the compaction a background turn made (TurnServices.onBackgroundCompaction: its runner
 * tells it once the turn completed, as a foreground response's create indexes its own): its
 * item is the one the response's output ends with, the summary as the turn stored it (one get).
 */
export async function indexTurnCompaction(facade: IndexFacade, compacted: CompactedTurn): Promise<void> {
  const { session, response } = compacted;
  const [item] = await turnCompactionOutput(facade, session.id, response.turn, response.context);
  if (item?.type !== 'compaction') return;
  const ended = { generation: compacted.generation, turn: response.turn, items: response.output.at(-1)?.seq };
  await indexCompaction(facade, session, ended, { id: item.id, summary: item.encrypted_content });
}
