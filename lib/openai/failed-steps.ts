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
 * items stored again, as a retry under `conversation` stores them). Unless `keyed` (whose key
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
): Promise<{ aborted?: true } | undefined> {
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
    if (turn.status !== status || turn.output !== null || turn.input?.first_seq !== next) return undefined;
    next = turn.input.last_seq + 1;
  }
  if (next !== session.counts.items + 1 || (since.items === undefined && !aborted)) return undefined;
  if (added === undefined) return {};
  const stored = await itemsBetween(facade, session.id, turns[0]!.input!.first_seq, next);
  const sent = asStored(facade, added);
  if (!sent) return undefined;
  const wanted = (length: number) => JSON.stringify(sent.slice(0, length).map(canonical));
  const holds = turns.every((turn, index) => {
    const input = stored.filter((item) => item.seq >= turn.input!.first_seq && item.seq <= turn.input!.last_seq);
    const exact = aborted && index === count - 1;
    return (
      (exact ? input.length === added.length : input.length <= added.length) &&
      JSON.stringify(input.map((item) => canonical(item as ClientItem))) === wanted(input.length)
    );
  });
  if (!holds) return undefined;
  return aborted ? { aborted: true } : {};
}
