import type { ClientItem } from '../items.ts';
import type { SessionRecord } from '../session/fields.ts';
import type { IndexFacade } from './facade.ts';
import { asStored, canonical } from './history-items.ts';
import { itemsBetween } from './sessions.ts';

/** Failed turns after an entry that a resend still continues after (more: a new conversation). */
const MAX_FAILED_TURNS = 8;

/**
 * Whether the request that adds `added` after turn `since.turn` of `session` (whose last item
 * was seq `since.items`; undefined: not compared) retries the turns after it: every one failed
 * (a streamed response that failed stays, its input stored and no output) and each stored as
 * its input the first items the resend adds (`added`; undefined: not compared), the session
 * holding nothing else since: the resend retries that step, so it continues after them (its
 * items stored again, as a retry under `conversation` stores them, unless they answer calls:
 * RetriedSteps.taken). A later attempt may have stored no input (a retake). Unless `keyed` (whose key
 * tells a retry apart), the newest may be a turn an `abort` notice refused, which stored
 * exactly `added`: `{aborted: true}`, the request being a retry of the aborted one (its
 * client's own, of a 409), which is refused again (lib/openai/aborted-retry.ts).
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
  const aborted = !keyed && added !== undefined && turns.at(-1)!.status === 'aborted';
  let next = since.items === undefined ? turns[0]!.input?.first_seq : since.items + 1;
  if (next === undefined) return undefined;
  for (const [index, turn] of turns.entries()) {
    const status = aborted && index === count - 1 ? 'aborted' : 'failed';
    if (turn.status !== status || turn.output !== null) return undefined;
    // A later attempt that took the step again (a retake, below) stored no input.
    if (!turn.input && index > 0 && status === 'failed') continue;
    if (turn.input?.first_seq !== next) return undefined;
    next = turn.input.last_seq + 1;
  }
  if (next !== session.counts.items + 1 || (since.items === undefined && !aborted)) return undefined;
  if (added === undefined) return {};
  const stored = await itemsBetween(facade, session.id, turns[0]!.input!.first_seq, next);
  const sent = asStored(facade, added);
  if (!sent) return undefined;
  const wanted = (length: number) => JSON.stringify(sent.slice(0, length).map(canonical));
  const holds = turns.every((turn, index) => {
    const { first_seq: from, last_seq: to } = turn.input ?? { first_seq: 0, last_seq: -1 };
    const input = stored.filter((item) => item.seq >= from && item.seq <= to);
    const exact = aborted && index === count - 1;
    return (
      (exact ? input.length === added.length : input.length <= added.length) &&
      JSON.stringify(input.map((item) => canonical(item as ClientItem))) === wanted(input.length)
    );
  });
  if (!holds) return undefined;
  if (aborted) return { aborted: true };
  // Outputs answer their calls once: stored by the first attempt (the later ones retakes), they
  // are the history the resend continues, and the step is taken again without storing them twice.
  const first = turns[0]!.input!;
  const taken = stored.filter((item) => item.seq <= first.last_seq);
  const answers = taken.some((item) => item.type === 'function_call_output');
  return answers && turns.every((turn, index) => index === 0 || !turn.input) ? { taken: taken.length } : {};
}

/** What retriedSince finds of the failed attempts of a step a request resends. */
export interface RetriedSteps {
  /** The newest attempt is the turn an `abort` notice refused, with this very input. */
  aborted?: true;
  /**
   * How many items the first attempt stored as its input, which holds a `function_call_output`
   * (the later attempts stored none): the resend holds them first, and they are not stored again
   * (a call is answered once); a resend adding nothing after them takes the step again.
   */
  taken?: number;
}
