import { LEASE_EXPIRED, NotFoundError, TurnClosedError } from '../errors.ts';
import { runTurn } from './pipeline.ts';
import { errorRecord } from './receipt.ts';
import { journalTurn } from './journal.ts';
import type { TurnEvent, TurnOptions, TurnRequest, TurnServices } from './types.ts';

/**
 * The streaming variant of {@link runTurn}. The pipeline starts at once and runs on its own:
 * `events` queues what it emits without waiting for the consumer, so a client that
 * disconnects mid-stream does not stop the turn from completing and being stored. `done`
 * settles when the turn is stored (or has failed); keep it alive (waitUntil) on runtimes
 * that end work with the response.
 *
 * Events: turn.started {turn} (once the turn's claim has landed, right before the first of the
 * model's output, so every client error and an abort come earlier, as an `error` first
 * event), output_text.delta {delta}, function_call.started {call_id, name} and
 * function_call_arguments.delta {call_id, delta} (a call whose arguments the provider streams),
 * output_item.done {item}, then turn.completed {the 200 body} or error {error}.
 */
export function streamTurn(
  services: TurnServices,
  sessionId: string,
  request: TurnRequest,
  options: TurnOptions = {},
): { events: ReadableStream<TurnEvent>; done: Promise<void> } {
  let queue!: ReadableStreamDefaultController<TurnEvent>;
  let open = true;
  const events = new ReadableStream<TurnEvent>({
    start: (controller) => {
      queue = controller;
    },
    cancel: () => {
      open = false;
    },
  });
  let started = false;
  let replayed = false;
  // Every streamed turn journals its events, so a client that lost the stream comes back in
  // (a replay's are the stored turn's, journaled when it ran); its record says it is streamed, so
  // a reader of a turn closed before its first batch ends its journal instead of finding none.
  const journal = journalTurn(services, sessionId);
  const push = (event: TurnEvent) => {
    if (event.event === 'turn.started') started = true;
    if (event.event === 'turn.started' && event.replay) replayed = true;
    if (!replayed) journal.emit(event);
    if (open) queue.enqueue(event);
  };
  const streamed = { ...options, stream: true, onClaimed: journal.claimedIn };
  const done = runTurn(services, sessionId, request, streamed, push)
    .then(
      (response) => push({ event: 'turn.completed', data: response }),
      (error: unknown) => {
        // Before turn.started the route answers with the error's status (and onError logs
        // what needs logging); after it, the error only travels as an event, so log it here.
        // A session deleted meanwhile is one line, and nothing more is journaled into it.
        if (started && error instanceof NotFoundError) {
          journal.drop();
          services.info(`tailgate: a streamed turn of session ${sessionId} stopped: the session was deleted`);
        } else if (started && error instanceof TurnClosedError) {
          // Closed by someone else (a cancel, an interrupt, a lapsed lease): one line, no stack;
          // a routine one but for a lapsed lease.
          const line = `tailgate: a streamed turn of session ${sessionId} stopped: ${error.code}`;
          if (error.code === LEASE_EXPIRED) services.log(line);
          else services.info(line);
        } else if (started) services.log('tailgate: streamed turn failed', error);
        push({ event: 'error', data: { error: errorRecord(error) }, cause: error });
      },
    )
    .then(() => journal.close());
  void done.finally(() => {
    if (open) queue.close();
    open = false;
  });
  return { events, done };
}
