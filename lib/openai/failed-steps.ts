import type { ClientItem } from '../items.ts';
import { interruptedBy } from '../session/log/lease.ts';
import type { SessionRecord } from '../session/fields.ts';
import type { IndexFacade } from './facade.ts';
import { asStored, canonical } from './history-items.ts';
import { itemsBetween } from './sessions.ts';

/** Failed turns after an entry that a resend still continues after (more: a new conversation). */
export const MAX_FAILED_TURNS = 8;

/**
 * Whether the request that adds `added` after turn `since.turn` of `session` (whose last item
 * was seq `since.items`; undefined: not compared) retries the turns after it: every one failed
 * (a streamed response that failed stays, its input stored and no output) and each stored as
 * its input the first items the resend adds (`added`; undefined: not compared), the session
 * holding nothing else since: the resend retries that step, so it continues after them (its
 * items stored again, as a retry under `conversation` stores them, unless they answer calls:
 * RetriedSteps.taken, each later attempt having stored what followed them, or nothing: a
 * retake). Unless `keyed` (whose key tells a retry apart), the newest may be a turn refused for
 * good (refusedForGood: an `abort` notice's, a cancel's), which stored exactly `added` (a retake:
 * after the others, they stored all of it): `{refused: true}`, the request being a retry of the
 * refused one (its client's own, of a 409), which is refused again (lib/openai/aborted-retry.ts).
 */
export async function retriedSince(
  facade: IndexFacade,
  session: SessionRecord,
  since: { turn: number; items?: number | undefined },
  added: readonly ClientItem[] | undefined,
  keyed = false,
): Promise<RetriedSteps | undefined> {
  const { sessions } = facade.services;
  const count = session.counts.turns - since.turn;
  if (count < 1 || count > MAX_FAILED_TURNS) return undefined;
  const turns = await Promise.all(
    Array.from({ length: count }, (_, index) => sessions.getTurn(session.id, since.turn + index + 1)),
  );
  const refused = !keyed && added !== undefined && refusedForGood(turns.at(-1)!);
  let next = since.items === undefined ? turns[0]!.input?.first_seq : since.items + 1;
  if (next === undefined) return undefined;
  for (const [index, turn] of turns.entries()) {
    if ((turn.status !== 'failed' && !(refused && index === count - 1)) || turn.output !== null) return undefined;
    // A later attempt that took the step again (a retake, below) stored no input.
    if (!turn.input && index > 0) continue;
    if (turn.input?.first_seq !== next) return undefined;
    next = turn.input.last_seq + 1;
  }
  if (next !== session.counts.items + 1 || (since.items === undefined && !refused)) return undefined;
  if (added === undefined) return {};
  const stored = await itemsBetween(facade, session.id, turns[0]!.input!.first_seq, next);
  const sent = asStored(facade, added);
  if (!sent) return undefined;
  const inputs = turns.map(({ input }) =>
    input ? stored.filter((item) => item.seq >= input.first_seq && item.seq <= input.last_seq) : [],
  );
  // Outputs answer their calls once: when the first attempt's input answers calls, a later one
  // stored only the items the resend holds after those before it (none: a retake), and they are
  // the history the resend continues, taken again without storing them twice. Else each attempt
  // stored the first items the resend adds.
  const answers = inputs[0]!.some((item) => item.type === 'function_call_output');
  let held = 0;
  for (const input of inputs) {
    const from = answers ? held : 0;
    const same = (item: (typeof input)[number], index: number) =>
      JSON.stringify(canonical(item as ClientItem)) === JSON.stringify(canonical(sent[from + index]!));
    if (from + input.length > sent.length || !input.every(same)) return undefined;
    held = from + input.length;
  }
  // A refused attempt stored exactly what the resend adds (a retake of them: nothing after them).
  if (refused) return held === sent.length ? { refused: true } : undefined;
  return answers ? { taken: held } : {};
}

/**
 * Whether a closed turn, as its receipt reads (SessionLog.getTurn), refused its request for good:
 * an `abort` notice's (`aborted`) or a cancel's (`cancelled`), not an `interrupt`'s (whose retry
 * is wanted: its 409 says no `x-should-retry: false`). Its unkeyed retry is refused again. Not a
 * background turn's (`background`): its create was answered at once, so nothing retries it by
 * itself, and the same input sent again is the user's own request, run again.
 */
export function refusedForGood(turn: {
  status: string;
  error: { code: string; details?: unknown } | null;
  background?: true;
}): boolean {
  if (turn.background) return false;
  return turn.status === 'aborted' || (turn.status === 'cancelled' && !interruptedBy(turn.error ?? undefined));
}

/** What retriedSince finds of the failed attempts of a step a request resends. */
export interface RetriedSteps {
  /** The newest attempt is a turn refused for good (refusedForGood), with this very input. */
  refused?: true;
  /**
   * How many items the failed attempts stored as their input, the first's holding a
   * `function_call_output` (each later one what came after those before it, none for a retake):
   * the resend holds them first, and they are not stored again (a call is answered once); a
   * resend adding nothing after them takes the step again.
   */
  taken?: number;
}

/**
 * A request naming `session`'s conversation, whose newest turn failed, that adds `items`: how
 * many of them the failed attempts of its step stored (RetriedSteps.taken), when it retries a
 * step answering calls, the turns after the newest that did not fail being those attempts (up
 * to MAX_FAILED_TURNS); undefined otherwise (its items are stored as any request's).
 */
export async function takenUnder(
  facade: IndexFacade,
  session: SessionRecord,
  items: readonly ClientItem[],
): Promise<number | undefined> {
  const { sessions } = facade.services;
  let turn = session.counts.turns;
  let before: Awaited<ReturnType<typeof sessions.getTurn>> | undefined;
  for (; turn > 0 && session.counts.turns - turn <= MAX_FAILED_TURNS; turn--) {
    before = await sessions.getTurn(session.id, turn);
    if (before.status !== 'failed' || before.output !== null) break;
  }
  if (turn === session.counts.turns || (turn > 0 && before?.status === 'failed')) return undefined;
  const seq = turn > 0 ? (before!.output?.last_seq ?? before!.input?.last_seq ?? 0) : 0;
  return (await retriedSince(facade, session, { turn, items: seq }, items))?.taken;
}

/**
 * How many of `sent`, the items a request naming the conversation `read` holds adds, the failed
 * attempts of the step it retries stored (takenUnder), when its newest turn failed; undefined
 * otherwise. (A fence left by a delete of that turn cut short by its process's death, an append
 * of no items, may stand after it: a step answering calls looks past it.)
 */
export async function takenUnderConversation(
  facade: IndexFacade,
  read: { session: SessionRecord; newestTurn: { status: string | null } | null },
  sent: readonly ClientItem[],
): Promise<number | undefined> {
  const { session, newestTurn } = read;
  const failedBefore =
    newestTurn?.status === 'failed' ||
    (newestTurn === null && session.counts.turns > 0 && sent.some((item) => item.type === 'function_call_output'));
  return failedBefore ? takenUnder(facade, session, sent) : undefined;
}
