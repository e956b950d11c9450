import { NotFoundError } from '../errors.ts';
import type { LogScope } from '../session/keys.ts';
import { journalEvents, type TurnEvent } from '../turn/index.ts';
import { OpenAIApiError, openaiFailure } from './errors.ts';
import type { Facade } from './facade.ts';
import { parseResponseId } from './ids.ts';
import { storedItemId } from './listed-items.ts';
import type { ResponseEventWriter } from './response-events.ts';
import type { TailgateResponse } from './responses.ts';
import { endedResponse } from './settled-response.ts';
import { responseEventStream } from './sse.ts';

/**
 * A stored response's Responses events from its turn's event journal (lib/turn/journal.ts):
 * the journal replayed from the start through the one event writer, so each event has the
 * same sequence_number on every replay, and only those after `after` are sent. A background
 * response's (./background-response.ts) and a streamed foreground one's (./resumed-response.ts)
 * are mapped so; `end` writes the stream's terminal event once the journal ended.
 */

/** A journaled turn event as `journalEvents` reads it. */
interface Journaled {
  n: number;
  event: string;
  data: unknown;
}

/**
 * The events of the response `opening` (its response.created and response.in_progress carry
 * it), after `after`, followed live to the end, its items under the ids of its session's
 * incarnation `scope` (lib/openai/listed-items.ts); a client that goes away stops it. `end` gets
 * the writer and the journal's last event (undefined: a turn without a journal, one closed
 * before it started that was packed, in a segment written before segments said `journaled`,
 * before anyone read its events: lib/turn/journal.ts).
 * A turn the queue delivered again has a run after another in its journal (each from its
 * `turn.started`): an earlier run's item not done yet is done `incomplete` when the later run
 * starts, and a later run's items start from the response's first again, under the same ids
 * (those response.completed has: the places they are stored at). A reader follows one run's
 * items: one from before the runs' first event (`after` before it) the last run the journal
 * holds when it starts, the earlier runs' events numbered but not sent; one that resumes
 * inside a run (`after` in its events, its item done events included) that run. Once the run
 * it follows ended (a later run starts) with an item added that the reader holds (sent, or at
 * most `after`), the later runs' events are numbered but not sent either: their items are the
 * same ones again (ids, call ids), so a stream never adds an `output_index` or an item twice;
 * the reader gets the item it was in done `incomplete`, then the terminal event, whose
 * response has the output as a retrieve does. One whose run ended with no item follows the next.
 * A storage error while reading it is read past once (from the last event read); a second, or
 * one in `end`, ends the stream without a terminal event (the client resumes with
 * `starting_after`): the response did not fail. A session (or turn) deleted meanwhile ends it
 * with response.failed naming that (`not_found`), as a foreground stream ends.
 */
export function journaledResponseEvents(
  facade: Facade,
  opening: TailgateResponse,
  scope: LogScope,
  after: number,
  end: (writer: ResponseEventWriter, last: TurnEvent | undefined, unkept: () => void) => Promise<void>,
): Response {
  const ref = parseResponseId(opening.id)!;
  const stop = new AbortController();
  const stream = responseEventStream((index, item) => storedItemId(scope, item.type, ref.outputSeq + index), {
    after,
    onCancel: () => stop.abort(),
  });
  const { writer } = stream;
  writer.started(opening);
  let read = 0;
  let last: TurnEvent | undefined;
  // The number of the last run's turn.started the journal held when the stream began.
  let lastRun: number | undefined;
  // Whether the reader saw part of the runs: it follows the run `after` is in then.
  let sawRuns = false;
  // The items added before the run the reader follows (`stream.shown`), and whether it held an
  // item of a run that ended: the later runs are not sent then.
  let shownBefore = 0;
  let held = false;
  const write = ({ n, event, data }: Journaled) => {
    const first = read === 0;
    if (first) sawRuns = after >= writer.sequence;
    read = n;
    last = { event, data } as TurnEvent;
    const restart = last.event === 'turn.started' && !first;
    if (restart) {
      // The earlier run's items are done as that run's output is: sent or not alike.
      writer.restart();
      // A reader past the earlier run's events follows a later run.
      if (after >= writer.sequence) shownBefore = stream.shown();
      else if (stream.shown() > shownBefore) held = true;
    }
    stream.mute(held || (!sawRuns && n < lastRun!));
    if (!restart) writer.turnOutput(last);
  };
  const readJournal = async () => {
    const { services } = facade;
    if (lastRun === undefined) {
      // What the journal holds now (an aborted reader reads it once), to know its last run.
      const held: Journaled[] = [];
      for await (const event of journalEvents(services, ref.sessionId, ref.turn, read, AbortSignal.abort()))
        held.push(event);
      lastRun = held.findLast((event) => event.event === 'turn.started')?.n ?? 0;
      for (const event of held) write(event);
      if (last?.event === 'turn.completed') return;
    }
    for await (const event of journalEvents(services, ref.sessionId, ref.turn, read, stop.signal)) write(event);
  };
  const follow = async () => {
    try {
      await readJournal().catch((error: unknown) => {
        if (error instanceof NotFoundError) throw error;
        facade.services.log("tailgate: could not read a response's journal; reading on", error);
        return readJournal();
      });
    } catch (error) {
      // A turn closed before it started (cancelled while queued) and packed, in an older
      // segment, before a reader ended its journal has none.
      if (!(error instanceof NotFoundError)) throw error;
    }
    if (stop.signal.aborted) return;
    try {
      await end(writer, last, stream.unkept);
    } catch (error) {
      // The session's reads (NotFoundError) or the response's (a 404 as GET answers it).
      const gone = error instanceof OpenAIApiError && error.status === 404;
      if (!(error instanceof NotFoundError) && !gone) throw error;
      const told = gone ? { code: error.code, message: error.message } : openaiFailure<string>(error);
      writer.failed(
        endedResponse(
          opening,
          'failed',
          { completedAt: new Date().toISOString(), error: told as TailgateResponse['error'] },
          {},
        ),
      );
    }
  };
  facade.services.background(
    follow()
      .catch((error: unknown) =>
        facade.services.log(
          'tailgate: could not stream a response from its journal; its stream ends unfinished',
          error,
        ),
      )
      .finally(stream.close),
  );
  return stream.response();
}
