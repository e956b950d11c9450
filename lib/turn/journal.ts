import { LEASE_EXPIRED, NotFoundError, TurnInProgressError } from '../errors.ts';
import { RECORD_BOUND, type LogScope } from '../session/keys.ts';
import { RecordMissingError } from '../session/log/head.ts';
import { holderScope } from '../session/log/rewind.ts';
import { missingTurn } from '../session/log/turns.ts';
import type { JournalEvent } from '../session/log/journal.ts';
import type { StoredOutcome } from '../session/log/types.ts';
import { afterResponse } from './after-response.ts';
import { doneItem } from './model-call.ts';
import type { OutputItem, TurnEvent, TurnResponse, TurnServices } from './types.ts';

/**
 * Event journals (docs/STORAGE.md, "Event journal"): a streamed or background turn writes the
 * events it emits to object storage in batches, at most one a second (R2 takes one write a
 * second per key; each batch is a key of its own, written once), the last one marked `end`.
 * A reader replays them from any process and follows the turn live
 * (`GET .../turns/{turn}/events`). Nothing is written before the turn's claim has landed
 * (`turn.started` comes first), so the journal adds nothing before the model call.
 */

/** How long events wait before their batch is written: at most one write a second. */
export const JOURNAL_BATCH_MS = 1000;
/** How often a reader following a running turn lists its journal again. */
const FOLLOW_MS = 500;

/** A journaled event as the event route sends it: its number, name and JSON data. */
export type NumberedEvent = JournalEvent;

/**
 * Journals a turn's events: `emit` takes each event as the turn emits it; `close` has what is
 * left written after the response, marked as the end unless `ended` is false (a background
 * turn left open, which another run goes on with). Storage failures are logged, never the
 * turn's; a session found deleted ends the journal unlogged (the turn says so: `drop`).
 * Events before `turn.started` are journaled only when the turn's number is `known` (a
 * background turn's runner knows it: a failure before its model call ends its journal).
 */
export function journalTurn(services: TurnServices, sessionId: string, known?: number): TurnJournal {
  const writer = crypto.randomUUID();
  let turn: number | undefined = known;
  // The generation the turn was claimed in (`claimedIn`), where its batches go.
  let claimed: LogScope | undefined;
  let scope: Promise<LogScope> | undefined;
  let pending: JournalEvent[] = [];
  let count = 0;
  let batches = 0;
  // Added to the events' numbers: after an earlier run's, when this is a turn run again.
  let after = 0;
  // Ended by someone else (a reader that closed the turn as its lease ran out): nothing more is written.
  let ended = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let written: Promise<void> = Promise.resolve();
  const flush = (end: boolean) => {
    clearTimeout(timer);
    timer = undefined;
    // Ended (a session found deleted, or a reader's end): nothing more is written, its scope not even read.
    if (turn === undefined || ended || (pending.length === 0 && !end)) return written;
    const events = pending;
    pending = [];
    const number = turn;
    scope ??= journalTo(services, sessionId, claimed);
    written = written
      .then(async () => {
        const journal = services.sessions.journal();
        const batch = () => ({
          writer,
          events: events.map((event) => ({ ...event, n: event.n + after })),
          ...(end ? { end: true } : {}),
        });
        if (ended || (await journal.write(await scope!, number, ++batches, batch()))) return;
        // Batches of another run of this turn (a background turn a queue delivered again after
        // its runner stopped): this run's go on after them, numbered on from their events. An
        // end there is a reader's that closed the turn: its readers stop at it, so this run
        // writes no more (its turn is closed, its completion refused).
        const earlier = await journal.read(await scope!, number, 0);
        ended = earlier.some((written) => written.end);
        if (ended) return;
        batches = earlier.at(-1)?.index ?? 0;
        after = earlier.flatMap((written) => written.events).reduce((most, event) => Math.max(most, event.n), 0);
        if (!(await journal.write(await scope!, number, ++batches, batch())))
          throw new Error(`batch ${batches} of the journal of turn ${number} is another writer's`);
      })
      .catch((error: unknown) => {
        // The session was deleted (its scope is not found): there is nothing left to journal to.
        if (error instanceof NotFoundError) ended = true;
        else services.log('tailgate: could not write a turn event journal', error);
      });
    return written;
  };
  return {
    emit: (event) => {
      if (event.event === 'turn.started') turn = event.data.turn;
      if (turn === undefined || ended) return;
      pending.push({ n: ++count, event: event.event, data: event.data });
      timer ??= setTimeout(() => void flush(false), JOURNAL_BATCH_MS);
    },
    // The last batch is written after the response (work a turn hands to `background`), so it
    // adds no round trip to the turn's own.
    close: (end = true) => afterResponse(services, () => flush(end)),
    claimedIn: (at) => {
      claimed = at;
    },
    drop: () => {
      clearTimeout(timer);
      pending = [];
      ended = true;
    },
  };
}

/**
 * Where a turn's journal goes: the generation its turn was claimed in (`claimed`), while the
 * session's config still names it. A session deleted (and created again, another generation:
 * a claim that landed after the delete's sweep, log/claimed-after-delete.ts) is NotFoundError,
 * so that no batch lands in the session created again under the id, nor after the sweep.
 */
async function journalTo(services: TurnServices, sessionId: string, claimed: LogScope | undefined): Promise<LogScope> {
  const current = await services.sessions.scope(sessionId);
  if (!claimed) return current;
  if (current.generation !== claimed.generation)
    throw new NotFoundError(`session ${sessionId} not found`, { id: sessionId });
  return claimed;
}

/**
 * A turn's journal as journalTurn writes it. `drop` is for a turn whose session was deleted:
 * the events not written yet go, and nothing more is written (the delete swept the journal).
 */
export interface TurnJournal {
  emit: (event: TurnEvent) => void;
  close: (ended?: boolean) => void;
  /** Where the turn is claimed (TurnOptions.onClaimed): its batches go there. */
  claimedIn: (scope: LogScope) => void;
  drop: () => void;
}

/**
 * Where turn `turn`'s journal is: under the incarnation holding the turn (a turn before a delete
 * of the newest turn is in an earlier generation, a fork's turn before the fork point in its
 * parent's), found by the turn's first seq; the session's own for any other.
 */
async function journalScope(services: TurnServices, sessionId: string, turn: number): Promise<LogScope> {
  const scope = await services.sessions.scope(sessionId);
  if (!scope.ancestors?.length) return scope;
  const found = await services.sessions.getTurn(sessionId, turn).catch((error: unknown) => {
    if (error instanceof NotFoundError) return null;
    throw error;
  });
  const seq = found?.input?.first_seq ?? found?.output?.first_seq;
  return seq === undefined ? scope : holderScope(scope, seq);
}

/**
 * Whether turn `turn` is the session's open turn whose lease ran out by the log's clock (its
 * owner died): then it is closed now, as the next writer would close it (failed,
 * `lease_expired`; the session log's `onLeaseClosed` writes the session's listing row again and
 * takes up the inputs queued behind it, after the response), and its outcome returned.
 * 'open' while the lease runs. Otherwise how it was closed, when a close raced this one (an
 * owner completing late, whose last batch is still to come), or null.
 */
async function closedByLease(
  services: TurnServices,
  sessionId: string,
  turn: number,
): Promise<StoredOutcome | 'open' | null> {
  try {
    return await services.sessions.closeIfExpired(sessionId, turn);
  } catch (error) {
    if (error instanceof TurnInProgressError) return 'open';
    // Its close packed since it was read: closed, as getTurn then tells.
    if (error instanceof RecordMissingError) return null;
    throw error;
  }
}

/**
 * A turn's receipt as `GET .../turns/{turn}` answers it: an open turn whose lease ran out by the
 * log's clock (its owner died) is closed first, as a reader of its events closes it (failed,
 * `lease_expired`, the inputs queued behind it then taken up), so a client that polls a turn
 * whose runner died sees it end instead of `in_progress` until the session's next writer. A
 * close that fails is logged, not the read's answer: the receipt is read again (as it stood,
 * for the next read). A turn closed by someone else shows what it stored spent, once it did.
 */
export async function turnAsItStands(services: TurnServices, sessionId: string, turn: number) {
  const found = await services.sessions.getTurn(sessionId, turn, { spent: true });
  if (found.status !== 'queued' && found.status !== 'in_progress') return found;
  const closed = await closedByLease(services, sessionId, turn).catch((error: unknown) => {
    services.log(`tailgate: a read could not close turn ${turn} of session ${sessionId}`, error);
    return null;
  });
  return closed === 'open' ? found : services.sessions.getTurn(sessionId, turn, { spent: true });
}

/**
 * A page of receipts (`GET .../turns`) as it stands: its newest row, when open, as turnAsItStands
 * tells it (closed first once its lease ran out), so a listing never shows a dead owner's turn running.
 */
export async function turnsAsTheyStand<Page extends { turns: { turn: number; status: string }[] }>(
  services: TurnServices,
  sessionId: string,
  page: Page,
): Promise<Page> {
  const open = page.turns[0];
  if (open?.status !== 'queued' && open?.status !== 'in_progress') return page;
  const { receipt: _, ...stands } = await turnAsItStands(services, sessionId, open.turn);
  return { ...page, turns: [stands, ...page.turns.slice(1)] };
}

/** An event that ends a journal, numbered when its batch is written. */
type Ending = Omit<NumberedEvent, 'n'>;

/**
 * The events a live owner would have ended a turn's journal with, for a reader that ends it: for
 * a completed turn (`response`: its stored answer, its 200 body) an `output_item.done` for each
 * of its items the journal's last run did not finish (`run.finished`: their seqs), then
 * `turn.completed` with it, as lib/turn/stream-turn.ts journals them (the text deltas the owner
 * never journaled are not known: the items carry the whole text); none when the run journaled
 * its `turn.completed` already (in a batch before the end its owner never wrote). Otherwise the
 * `error` event of how the turn failed, if it did.
 */
function endingEvents(
  error: StoredOutcome['error'] | null,
  response: TurnResponse | null,
  run: { finished: Set<number>; completed: boolean },
): Ending[] {
  if (response) {
    if (run.completed) return [];
    const items = response.output.filter((item) => !run.finished.has(item.seq));
    return [
      ...items.map((item) => ({ event: 'output_item.done', data: { item: doneItem(item) } })),
      { event: 'turn.completed', data: response },
    ];
  }
  return error ? [{ event: 'error', data: { error } }] : [];
}

/**
 * Ends the journal of a turn whose owner wrote no end, for the reader that found it so: its
 * `ending` events (endingEvents), numbered after `last` (every event journaled, and every event
 * the reader's client saw), in an `end` batch put create-only after the last batch read
 * (`read`), so its numbers are no one else's and every reader ends the same way. Null when that
 * batch index is taken: an owner alive after all wrote it, and the reader reads on.
 */
async function endJournal(
  services: TurnServices,
  scope: LogScope,
  turn: number,
  read: number,
  last: number,
  ending: Ending[],
): Promise<NumberedEvent[] | null> {
  const events = ending.map((event, index) => ({ n: last + 1 + index, ...event }));
  const batch = { writer: crypto.randomUUID(), events, end: true };
  return (await services.sessions.journal().write(scope, turn, read + 1, batch)) ? events : null;
}

/**
 * At most how many events an owner streams live past its journal before it dies (a second's
 * worth of deltas between batches, many times over): a reader's Last-Event-ID further past the
 * journal is taken as past every event, not as the number its end follows.
 */
export const MAX_UNJOURNALED = 100_000;

/**
 * A turn's journaled events after number `after`, then, while the turn runs, the ones it
 * writes, until its last. A turn whose owner died ends with what was written, then an `error`
 * event with how the turn failed: an open one once its lease ran out by the log's clock (this
 * reader closes it, `lease_expired`), one someone else closed so at once, however lately, and
 * one closed otherwise (a cancel, whose live owner writes its last batch right after) a lease
 * after that close.
 * One whose owner died after its completion, before its last batch, ends a lease after that
 * completion as its owner would have ended it: `turn.completed` with the stored answer.
 * A streamed or background turn closed before any batch (its owner died before its first, or a
 * cancel of a queued one) ends the same way, whoever closed it (its record says it is one): a
 * background turn no runner took over, or one closed as its lease ran out, at once, any other a
 * lease after its close.
 * A closed turn without a journal (neither streamed nor in the background), one this reader
 * closed too, or one that completed without a batch: NotFoundError.
 */
export async function* journalEvents(
  services: TurnServices,
  sessionId: string,
  turn: number,
  after: number,
  signal?: AbortSignal,
): AsyncGenerator<NumberedEvent> {
  const { sessions } = services;
  const noJournal = () =>
    new NotFoundError(
      `turn ${turn} of session ${sessionId} has no event journal (only streamed and background turns journal ` +
        `their events); GET /v1/sessions/${sessionId}/turns/${turn} tells how it ended`,
      { id: sessionId, turn },
    );
  // Past what a record's number holds: no session has such a turn.
  if (turn >= RECORD_BOUND) throw missingTurn(sessionId, turn);
  const scope = await journalScope(services, sessionId, turn);
  const journal = sessions.journal();
  // The last batch read (a batch whose write failed leaves its index out), event read, and event sent.
  let read = 0;
  let last = 0;
  let sent = after;
  // The last event read: how the turn ended, once its journal did (its end batch may carry none).
  let final: NumberedEvent | undefined;
  // The journal's last run (from its last turn.started): the items it finished, and whether it completed.
  let lastRun = { finished: new Set<number>(), completed: false };
  let closedAt: number | undefined;
  // For a closed turn without a batch: whether it has a journal however it ended (a streamed or
  // background turn: its record says so), and whether a writer may have journaled to it.
  let run: 'never' | 'taken' | null | undefined;
  // Whether the turn has a journal: a batch read, or its record says so (a plain JSON turn has
  // none, whoever closed it, this reader too when its lease ran out).
  const journaled = async () => {
    if (read > 0) return true;
    if (run === undefined) run = await sessions.journalRun(sessionId, turn);
    return run !== null;
  };
  // Sends the events of `batches` past the last sent; true at the end (a batch marked so).
  function* take(batches: { events: NumberedEvent[]; end?: boolean | undefined }[]) {
    for (const batch of batches) {
      for (const event of batch.events) {
        last = Math.max(last, event.n);
        final = event;
        if (event.event === 'turn.started') lastRun = { finished: new Set(), completed: false };
        if (event.event === 'turn.completed') lastRun.completed = true;
        if (event.event === 'output_item.done') lastRun.finished.add((event.data as { item: OutputItem }).item.seq);
        if (event.n > sent) {
          sent = event.n;
          yield event;
        }
      }
      // A reader past every event (its client saw, live, events a dead owner never journaled,
      // and another reader ended the journal below them) still learns how the turn ended.
      if (batch.end) {
        if (sent > last && final) yield final;
        return true;
      }
    }
    return false;
  }
  // Closed here, its lease having run out: what its owner wrote is read once more, then it ends.
  let expired: StoredOutcome | undefined;
  for (;;) {
    const batches = await journal.read(scope, turn, read);
    read = batches.at(-1)?.index ?? read;
    if (yield* take(batches)) return;
    // Its end, unless the owner's batch took its place (then read on): numbered after every
    // event journaled and every event this reader's client saw (a dead owner streamed events
    // live that it never journaled), so the client resuming after them gets it.
    // A number past what an owner could have streamed unjournaled is no client's: it does not
    // number the end every reader gets (it is given that end as a reader past every event).
    // An end written at once after a close of the lease (`live`) is numbered past all an owner
    // could have streamed: one alive after all (its clock behind the closer's) streams on to
    // its own client until it learns of the close, under numbers this reader cannot know; that
    // client, cut off, resumes after them and gets this end, not nothing.
    const end = async (ending: Ending[], live = false) => {
      const from = live ? last + MAX_UNJOURNALED : Math.max(last, Math.min(sent, last + MAX_UNJOURNALED));
      const events = await endJournal(services, scope, turn, read, from, ending);
      return events && { events, end: true };
    };
    if (batches.length === 0 && expired && !(await journaled())) throw noJournal();
    const ending = batches.length === 0 && expired ? await end(endingEvents(expired.error, null, lastRun), true) : null;
    if (ending) return void (yield* take([ending]));
    if (batches.length === 0 && !expired) {
      const open = closedAt === undefined ? await closedByLease(services, sessionId, turn) : null;
      const closed = open === 'open' ? null : (open ?? (await sessions.getTurn(sessionId, turn)));
      // Closed as its lease ran out, by this reader or anyone else: its owner is dead by the
      // clock every closer goes by, so no last batch of its is due; one alive after all has its
      // completion refused, and its batch either lands first (read on) or is refused by the end.
      if (closed?.status === 'failed' && closed.error?.code === LEASE_EXPIRED) {
        expired = { status: 'failed', error: closed.error };
        continue;
      }
      if (closed && closed.status !== 'queued' && closed.status !== 'in_progress') {
        // Closed otherwise. Its owner writes its last batch right after (one closed by someone
        // else, a cancel, learns it within a third of the lease); one that died never does: its
        // end is written a lease after the close, however long before this reader came that was.
        closedAt ??= Date.now();
        // A streamed or background turn has a journal however it ended: one whose owner died
        // before its first batch ends a lease after a close not of its lease; a background
        // turn closed before a runner took it over (a cancel of a queued turn) at once, as a
        // cancelled running turn's does. Any other (a plain JSON turn) has none, its record
        // says, and never gets one, whoever closed it: no batch is waited for.
        if (!(await journaled())) throw noJournal();
        // Completed with no batch (its process died right after, or every journal write failed):
        // its end would carry no event; its receipt tells how it ended.
        const unjournaled = closed.status === 'completed' && read === 0;
        const completedAt = 'completed_at' in closed ? Date.parse(closed.completed_at ?? '') : Number.NaN;
        const closeAt = Math.min(closedAt, completedAt || closedAt);
        const due = run === 'never' || Date.now() - closeAt >= services.config.turnLeaseMs;
        if (unjournaled && due) throw noJournal();
        // Completed with batches: its owner died between its completion and its last batch.
        const answer = due && closed.status === 'completed' ? await sessions.completedResponse(sessionId, turn) : null;
        const ending = endingEvents(closed.error ?? null, answer as TurnResponse | null, lastRun);
        const ended = (read > 0 || run) && due ? await end(ending) : null;
        if (ended) return void (yield* take([ended]));
      }
    }
    if (signal?.aborted) return;
    await new Promise((resolve) => setTimeout(resolve, FOLLOW_MS));
  }
}
