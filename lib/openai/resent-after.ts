import type { ClientItem } from '../items.ts';
import type { Facade } from './facade.ts';
import { MAX_FAILED_TURNS, refusedForGood } from './failed-steps.ts';
import { asStored, canonical } from './history-items.ts';
import { namesCompaction, parseCompactionId } from './ids.ts';
import type { RequestInput } from './request-input.ts';
import { branchIdPrefix, itemsBetween } from './sessions.ts';
import { keptOfTurn } from './stored-responses.ts';

/**
 * A tool loop under a fixed `previous_response_id` (the AI SDK's `generateText` with
 * `providerOptions.openai.previousResponseId` and tools) sends that same id on every step, with
 * every item since it: the first step's input, the response's output, the tool outputs, and so
 * on. The id then names an older response than the conversation's newest, which would branch
 * each step into a conversation of its own. A request whose input begins with exactly the items
 * its conversation stored after that response, up to and including the newest response's
 * output (a completed response: nothing appended after it), continues the newest response
 * instead, storing only the items after them, as a resent whole history does (./history-index.ts),
 * and its response names the items resent (`tailgate.resent`: its input_items list them, ./input-items.ts).
 * The compaction items those responses output are among the items resent (the AI SDK sends each
 * back where it got it, after that response's other output): each is the conversation's own, a
 * compaction it stored since that response, and stands for nothing new (it is not stored again,
 * and the next prompt is the conversation's: the summary, the items it kept, then the new ones),
 * wherever among the resent items it was sent. One that is not (another conversation's, an edited
 * summary, one made before that response) makes the input no resend (a branch, which starts from it).
 * Only after a response of the same loop: one whose request named that same response in the
 * same scope (the caller, metadata, user...: its tag, ./sessions.ts loopTag, kept with its
 * object). Another end user's request that resends the same items is not continued there.
 */

/** A request's input as resentAfter compares it: its items, compaction items left out, and those. */
export type ResentInput = Pick<RequestInput, 'history' | 'compactions'>;

/**
 * The turn to continue after, how many of the input's items (`history`) the conversation already
 * holds and the seq of the last of them, or undefined (a branch). `newest` says that turn is the
 * conversation's newest; when not, the turns after it are failed attempts of a streamed step or an `abort`
 * notice's refusal (endedBefore), which the rest of the items may retry (./failed-steps.ts;
 * ./aborted-retry.ts: refused again). That turn's response must be kept with the loop's `tag`
 * (a response without a kept object, or of another loop, is not continued: a branch).
 */
export async function resentAfter(
  facade: Facade,
  sessionId: string,
  afterTurn: number,
  input: ResentInput,
  tag: string,
  /** A keyed retry's: the turn its key took, whose request went on after the turn before it. */
  keyedAt?: number,
): Promise<{ turn: number; known: number; lastSeq: number; newest: boolean } | undefined> {
  const items = input.history;
  // At least one item resent and one added: a single item is a branch, nothing read for it.
  if (items.length < 2) return undefined;
  const { sessions } = facade.services;
  const session = await sessions.get(sessionId);
  const { turns, items: stored } = session.counts;
  const upTo = keyedAt === undefined ? turns : Math.min(keyedAt - 1, turns);
  if (upTo <= afterTurn) return undefined;
  const [older, { turn, ended }] = await Promise.all([
    sessions.getTurn(sessionId, afterTurn),
    endedBefore(facade, sessionId, afterTurn, upTo),
  ]);
  const newest = turn === turns;
  const from = (older.output?.last_seq ?? older.input?.last_seq ?? 0) + 1;
  const end = ended.output?.last_seq;
  if (ended.status !== 'completed' || end === undefined || (newest && end !== stored)) return undefined;
  const known = end - from + 1;
  const sent = known > 0 && known < items.length ? asStored(facade, items.slice(0, known)) : undefined;
  if (!sent) return undefined;
  const [held, kept] = await Promise.all([
    itemsBetween(facade, sessionId, from, end + 1),
    keptOfTurn(facade, sessionId, turn),
  ]);
  const same = (list: readonly ClientItem[]) => JSON.stringify(list.map((item) => canonical(item)));
  const ours = kept?.loop === tag && kept.ref.outputSeq === ended.output?.first_seq;
  if (!ours || held.length !== known || same(held as ClientItem[]) !== same(sent)) return undefined;
  // Its compaction items: made since that response (its context then started at `since`).
  const since = older.receipt?.context_start_seq ?? 0;
  const placed = input.compactions.every((compaction) => compaction.at <= known);
  return placed && (await ownCompactions(facade, sessionId, input.compactions, since))
    ? { turn, known, lastSeq: end, newest }
    : undefined;
}

/**
 * The turn a resend may continue after, of those after `afterTurn` up to the newest (`turns`):
 * the newest, or the one before a turn refused for good (an `abort` notice's, a cancel's:
 * ./failed-steps.ts refusedForGood), or before the failed attempts of a streamed step (no output;
 * at most MAX_FAILED_TURNS), which the caller judges as retries of it (lib/openai/failed-steps.ts).
 */
export async function endedBefore(
  facade: Facade,
  sessionId: string,
  afterTurn: number,
  turns: number,
): Promise<{ turn: number; ended: TurnRead }> {
  const { sessions } = facade.services;
  let [turn, ended] = [turns, await sessions.getTurn(sessionId, turns)];
  const attempt = (record: TurnRead) =>
    refusedForGood(record) ? turn === turns : record.status === 'failed' && record.output === null;
  while (attempt(ended) && turn - 1 > afterTurn && turns - turn < MAX_FAILED_TURNS) {
    turn -= 1;
    ended = await sessions.getTurn(sessionId, turn);
  }
  return { turn, ended };
}

/**
 * Whether every compaction item `sent` is one of the session's own: its id names the session and
 * a compaction of it, sent with that compaction's summary. With `since`, one that started the
 * session's context after that seq (one listing of its compactions and a read of each since it,
 * however many items were sent: SessionLog.contextsAfter); without, the session's current
 * compaction (one read).
 */
export async function ownCompactions(
  facade: Facade,
  sessionId: string,
  sent: ResentInput['compactions'],
  since?: number,
): Promise<boolean> {
  const named = sent.map(({ id, summary }) => ({ start: id === null ? undefined : parseCompactionId(id), summary }));
  if (named.some(({ start }) => start?.sessionId !== sessionId || start.startSeq <= (since ?? 0))) return false;
  if (named.length === 0) return true;
  const { sessions } = facade.services;
  const current = since === undefined ? await sessions.currentContext(sessionId) : undefined;
  const stored = current === undefined ? await sessions.contextsAfter(sessionId, since!) : current ? [current] : [];
  const byStart = new Map(stored.map((context) => [context.start_seq, context]));
  return named.every(({ start, summary }) => {
    const context = byStart.get(start!.startSeq);
    return context !== undefined && namesCompaction(start!, context) && context.summary === summary;
  });
}

/**
 * Which list of the input a request to `sessionId` stores after the `known` items it resent:
 * `history` (the items as the client holds them, compaction items left out) past a resend, or
 * when every compaction item it sent is the conversation's current one (ownCompactions: one
 * read), which stands for nothing new; else `items`, a summary for what a compaction item replaced.
 */
export async function storedList(
  facade: Facade,
  sessionId: string,
  input: ResentInput,
  known: number,
): Promise<'history' | 'items'> {
  if (known > 0) return 'history';
  const sentBack =
    input.compactions.length > 0 &&
    input.history.length > 0 &&
    (await ownCompactions(facade, sessionId, input.compactions));
  return sentBack ? 'history' : 'items';
}

/**
 * A loop under a fixed `previous_response_id` that names an older response than its
 * conversation's newest branches on its first step, into a fork of the conversation at that
 * response, and its next steps send that id again with every item since: the items the fork
 * stored. Such a step goes on in that fork, as resentAfter continues a conversation: the one
 * live fork its own scope made at that response with the same first item (its loop's `tag`,
 * ./sessions.ts loopTag: the caller, metadata, user...; named by its id's head, branchIdPrefix,
 * and checked as resentAfter checks it) whose items since it are the input's head, up to its
 * newest response's output.
 * Another caller's or user's branch at that response is never continued, whatever it holds.
 * Undefined when none or several are (a new branch), or when the scope made more than
 * MAX_LOOP_BRANCHES there (what is read stays bounded: a page of forks, lib/session/log/children.ts
 * listForks, then resentAfter's reads of each fork listed).
 */
export async function branchResentAfter(
  facade: Facade,
  sessionId: string,
  afterTurn: number,
  input: ResentInput,
  tag: string,
): Promise<{ sessionId: string; turn: number; known: number; lastSeq: number; newest: boolean } | undefined> {
  if (input.history.length < 2) return undefined;
  const { sessions } = facade.services;
  const older = await sessions.getTurn(sessionId, afterTurn);
  const point = older.output?.last_seq ?? older.input?.last_seq ?? 0;
  const idPrefix = branchIdPrefix(tag);
  const page = await sessions.listForks(sessionId, { limit: MAX_LOOP_BRANCHES, idPrefix });
  if (page.has_more) return undefined;
  const candidates = page.forks.filter((fork) => fork.seq === point).map((fork) => fork.id);
  const found = await Promise.all(
    candidates.map(async (id) => {
      const resent = await resentAfter(facade, id, afterTurn, input, tag).catch(() => undefined);
      return resent ? { sessionId: id, ...resent } : [];
    }),
  );
  const matches = found.flat();
  return matches.length === 1 ? matches[0] : undefined;
}

type TurnRead = Awaited<ReturnType<Facade['services']['sessions']['getTurn']>>;

/** The branches one loop scope made at one response, starting with one item, that a step of it looks among. */
const MAX_LOOP_BRANCHES = 20;
