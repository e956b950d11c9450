import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import { clientError } from '../lib/error-codes.ts';
import type { TurnEvent } from '../lib/turn/index.ts';

/**
 * Serves turn events as server-sent events. The first event is awaited before the response
 * starts: an error before `turn.started` (404, 409, 400, an abort) is thrown instead, so it
 * gets its HTTP status and JSON body like a plain turn. From `turn.started` on, each event
 * carries its number as the SSE `id`, the number its journal gives it (lib/turn/journal.ts), so
 * a client that lost the stream comes back with `Last-Event-ID`; a replay's are not numbered.
 * The response only reads from the events: when the client disconnects, reading stops and the
 * turn goes on to completion on its own.
 */
export async function turnEventStream(c: Context, events: ReadableStream<TurnEvent>): Promise<Response> {
  const reader = events.getReader();
  const first = await reader.read();
  if (!first.done && first.value.event === 'error') throw first.value.cause;
  return streamSSE(c, async (stream) => {
    stream.onAbort(() => void reader.cancel().catch(() => undefined));
    let number = 0;
    try {
      for (let next = first; !next.done; next = await reader.read()) {
        // A replay's events are not the journal's: not numbered.
        if (next.value.event === 'turn.started') number = next.value.replay ? 0 : 1;
        else if (number > 0) number += 1;
        await stream.writeSSE({ ...eventMessage(next.value), ...(number > 0 ? { id: String(number) } : {}) });
      }
    } catch {
      // The client went away mid-write: stop reading; the turn completes without it.
      await reader.cancel().catch(() => undefined);
    }
  });
}

/**
 * One SSE message: the event's name and its JSON data. An `error` event carries what a client
 * may see of the error (no keys or backend text; those were logged).
 */
export function eventMessage(event: TurnEvent): { event: string; data: string } {
  const data = event.event === 'error' ? { error: clientError(event.data.error) } : event.data;
  return { event: event.event, data: JSON.stringify(data) };
}
