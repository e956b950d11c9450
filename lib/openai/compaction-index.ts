import type { Facade } from './facade.ts';
import { indexHistory, type HistoryEntry } from './history-index.ts';
import type { InputAnchor } from './responses.ts';

/**
 * A compaction's entries in the history index (lib/openai/history-index.ts), for a client that
 * drops what came before a compaction item (OpenAI's advice) and sends that item first.
 */

/**
 * Where the history index keeps a compaction's conversation as it stood when the compaction was
 * made (an empty history after the compaction item): a request that sends that compaction item
 * (its id and summary) first, and only new items after it, continues the conversation. The
 * caller only, of the loop's fields: the compaction was made by a response or by
 * `responses.compact`, which sends none of them.
 */
export function compactionScope(facade: Facade, anchor: InputAnchor): string {
  return JSON.stringify([facade.caller ?? '', 'compaction', anchor.id, anchor.summary]);
}

/**
 * Indexes the conversation a compaction item belongs to, as it stood when the compaction was
 * made (`ended`: its turn and items then), for a client that sends that item first and drops
 * what came before it (compactionScope).
 */
export function indexCompaction(
  facade: Facade,
  session: { id: string; created_at: string },
  ended: Pick<HistoryEntry, 'generation' | 'turn' | 'items'>,
  compaction: InputAnchor,
): Promise<void> {
  return indexHistory(facade, session, { ...ended, scope: compactionScope(facade, compaction) }, [], undefined);
}
