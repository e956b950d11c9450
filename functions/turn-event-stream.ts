import { clientError } from '../lib/errors.ts';
import type { TurnEvent } from '../lib/turn.ts';

const encoder = new TextEncoder();

/**
 * Serves turn events as server-sent events. Errors before `turn.started` (404, 409, 400, an
 * abort) are thrown instead, so they get their HTTP status and JSON body like a plain turn.
 * The response only reads from the event channel: when the client disconnects, reading
 * stops and the turn goes on to completion on its own.
 */
export async function turnEventStream(events: AsyncIterable<TurnEvent>): Promise<Response> {
  const iterator = events[Symbol.asyncIterator]();
  const first = await iterator.next();
  if (!first.done && first.value.event === 'error') throw first.value.cause;
  let pendingFirst: TurnEvent | undefined = first.done ? undefined : first.value;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = pendingFirst !== undefined ? { done: false as const, value: pendingFirst } : await iterator.next();
      pendingFirst = undefined;
      if (next.done) {
        controller.close();
        return;
      }
      controller.enqueue(encoder.encode(formatEvent(next.value)));
    },
  });
  return new Response(body, {
    status: 200,
    headers: { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache' },
  });
}

/**
 * One SSE frame: `event: <name>` and the JSON data on one line. An `error` event carries what
 * a client may see of the error (no keys or backend text; those were logged).
 */
export function formatEvent(event: TurnEvent): string {
  const data = event.event === 'error' ? { error: clientError(event.data.error) } : event.data;
  return `event: ${event.event}\ndata: ${JSON.stringify(data)}\n\n`;
}
