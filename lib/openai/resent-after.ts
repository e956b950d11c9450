import type { ClientItem } from '../items.ts';
import type { Facade } from './facade.ts';
import { asStored, canonical } from './history-index.ts';
import { itemsBetween } from './sessions.ts';

/**
 * A tool loop under a fixed `previous_response_id` (the AI SDK's `generateText` with
 * `providerOptions.openai.previousResponseId` and tools) sends that same id on every step, with
 * every item since it: the first step's input, the response's output, the tool outputs, and so
 * on. The id then names an older response than the conversation's newest, which would branch
 * each step into a conversation of its own. A request whose input begins with exactly the items
 * its conversation stored after that response, up to and including the newest response's
 * output (a completed response: nothing appended after it), continues the newest response
 * instead, storing only the items after them, as a resent whole history does (./history-index.ts).
 */

/** The newest turn to continue and how many of `items` it already holds, or undefined (a branch). */
export async function resentAfter(
  facade: Facade,
  sessionId: string,
  afterTurn: number,
  items: readonly ClientItem[],
): Promise<{ turn: number; known: number } | undefined> {
  const { sessions } = facade.services;
  const session = await sessions.get(sessionId);
  const turn = session.counts.turns;
  if (turn <= afterTurn) return undefined;
  const [older, newest] = await Promise.all([
    sessions.getTurn(sessionId, afterTurn),
    sessions.getTurn(sessionId, turn),
  ]);
  const from = (older.output?.last_seq ?? older.input?.last_seq ?? 0) + 1;
  if (newest.status !== 'completed' || newest.output?.last_seq !== session.counts.items) return undefined;
  const known = session.counts.items - from + 1;
  const sent = known > 0 && known < items.length ? asStored(facade, items.slice(0, known)) : undefined;
  if (!sent) return undefined;
  const stored = await itemsBetween(facade, sessionId, from, session.counts.items + 1);
  const same = (list: readonly ClientItem[]) => JSON.stringify(list.map((item) => canonical(item)));
  return stored.length === known && same(stored as ClientItem[]) === same(sent) ? { turn, known } : undefined;
}
