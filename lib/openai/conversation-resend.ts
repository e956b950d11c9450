import type { ClientItem } from '../items.ts';
import type { Facade } from './facade.ts';
import { canonical } from './history-items.ts';
import type { RequestInput } from './request-input.ts';
import type { TailgateResponse } from './responses.ts';
import { endedBefore } from './resent-after.ts';
import { loopTag } from './sessions.ts';
import { keptOfTurn } from './stored-responses.ts';

/**
 * A tool loop under `conversation` that resends what it sent before (the AI SDK's `generateText`
 * or `streamText` with tools and `providerOptions.openai.conversation`): on every step the SDK
 * leaves out the items the model made (they have ids) but sends again every item it made itself,
 * the step's messages and every tool output so far, then the new tool outputs. Stored as sent,
 * the conversation would hold the messages once per step and a later step would answer a call
 * twice. Each response to a request under `conversation` keeps the tag of its input (how many
 * items it held, and their hash in the loop's scope, ./history-index.ts loopScope: the caller,
 * metadata, user...), never answered; a request whose input begins with exactly the items the
 * conversation's newest response was sent, in the same scope, with nothing appended since and
 * at least one item after them, the first answering one of that response's function calls when
 * it made any, is that loop's next step: only the items after them are stored. Any other input
 * (a client sending only its new items, a request of another scope: another budgeted token's, or
 * another end user's that sends another `user`, `safety_identifier` or `metadata`) is stored as
 * sent. The scope is all that tells two end users of one conversation apart (docs/OPENAI.md).
 */

/** The tag a response under `conversation` keeps: its input's items (compaction items left out) and scope. */
export function conversationTag(sessionId: string, scope: string, items: readonly ClientItem[]): string {
  return `${items.length}:${loopTag(sessionId, JSON.stringify([scope, items.map((item) => canonical(item))]))}`;
}

/**
 * How many of the input's items (`history`) the request resent, as its loop's previous step sent
 * them to a response of the session `read` names: its newest (a completed turn with nothing
 * appended after it), or the one before the failed attempts of the step this request retries, or
 * before its refusal for good, an `abort` notice's or a cancel's (./resent-after.ts endedBefore;
 * the caller judges those turns as for any request under `conversation`: ./failed-steps.ts
 * takenUnder, ./aborted-retry.ts);
 * 0 when it resent none. After a response that made function calls, a step of its loop answers
 * one of them next (the SDK runs the tools, then sends their outputs): a request whose first item
 * after the items that response was sent does not resent none. A request of two items or more,
 * none a compaction item, reads that response's kept object, and nothing else when it is the
 * newest (`read`, the session's head, SessionLog.getWithNewestTurn, says what else it needs);
 * nothing at all when the newest made calls that none of the input's items past its first
 * answers; else also the turns back to that response and the session's config.
 */
export async function resentUnderConversation(
  facade: Facade,
  read: Awaited<ReturnType<Facade['services']['sessions']['getWithNewestTurn']>>,
  input: Pick<RequestInput, 'history' | 'compactions'>,
  scope: string,
): Promise<number> {
  const { history, compactions } = input;
  const { session, newestTurn: newest } = read;
  if (history.length < 2 || compactions.length > 0 || !newest) return 0;
  const completed = newest.status === 'completed';
  // After calls, an item past the first answers one of them: the one after those it resent (no read else).
  const answers = (item: ClientItem) => item.type === 'function_call_output' && newest.calls.includes(item.call_id);
  if (completed && newest.calls.length > 0 && !history.slice(1).some(answers)) return 0;
  const { turn, ended } = completed
    ? { turn: newest.turn, ended: newest }
    : await endedBefore(facade, session.id, 0, newest.turn);
  const head = completed ? { session, scope: read.scope } : undefined;
  const kept = ended.status === 'completed' ? await keptOfTurn(facade, session.id, turn, head) : undefined;
  const appended = turn === newest.turn && ended.output?.last_seq !== session.counts.items;
  if (!kept || appended || kept.ref.outputSeq !== ended.output?.first_seq) return 0;
  const known = Number(kept.loop?.split(':')[0]);
  if (!Number.isInteger(known) || known < 1 || known >= history.length) return 0;
  if (!answersFirst(kept.response.output, history[known]!)) return 0;
  return conversationTag(session.id, scope, history.slice(0, known)) === kept.loop ? known : 0;
}

/** Whether `next` may follow a response's `output` in its loop: an output to one of its calls, if it made any. */
function answersFirst(output: TailgateResponse['output'], next: ClientItem): boolean {
  const calls = output.flatMap((item) => (item.type === 'function_call' ? [item.call_id] : []));
  return calls.length === 0 || (next.type === 'function_call_output' && calls.includes(next.call_id));
}

/**
 * A keyed request under `conversation` whose key took turn `keyTurn` with other items: how many
 * of the input's items the request that took it resent (its response kept this input's tag, and
 * its turn stored the items after them), so that its retry, claiming those items again, is
 * replayed; 0 when it is no such retry. Two reads (the kept object and the turn).
 */
export async function resentByKey(
  facade: Facade,
  sessionId: string,
  keyTurn: number,
  input: Pick<RequestInput, 'history'>,
  scope: string,
): Promise<number> {
  const { history } = input;
  // The key's request is no turn (an append's, a queued input's): nothing was resent.
  if (keyTurn < 1) return 0;
  const [kept, turn] = await Promise.all([
    keptOfTurn(facade, sessionId, keyTurn),
    facade.services.sessions.getTurn(sessionId, keyTurn),
  ]);
  if (kept?.loop !== conversationTag(sessionId, scope, history) || !turn.input) return 0;
  const known = history.length - (turn.input.last_seq - turn.input.first_seq + 1);
  return Math.max(known, 0);
}
