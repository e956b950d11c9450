import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { LEASE_EXPIRED } from '../errors.ts';
import { MAX_UNJOURNALED } from '../turn/journal.ts';
import { ResponseEventWriter } from './response-events.ts';

/**
 * The one server-sent events writer of the OpenAI-compatible streams (stored and stateless
 * responses, chat completions): a queue that the running call feeds, read by the response
 * body as the client takes it. A client that goes away stops the reading; a stored turn's call
 * runs to its end (the turn is still stored), one that stores nothing is aborted
 * (./stateless.ts clientGone).
 */

/** One SSE message: `id: <id>` and `event: <name>` when given, then `data: <text>`. */
export interface SseMessage {
  id?: string;
  event?: string;
  data: string;
}

/** An async queue fed by a writer: `push` as events come, `close` when the call ends. */
export function eventQueue<Event>() {
  const buffer: Event[] = [];
  let wake: (() => void) | undefined;
  let closed = false;
  return {
    push(event: Event) {
      buffer.push(event);
      wake?.();
    },
    close() {
      closed = true;
      wake?.();
    },
    async *[Symbol.asyncIterator](): AsyncIterator<Event> {
      for (;;) {
        const next = buffer.shift();
        if (next !== undefined) yield next;
        else if (closed) return;
        else await new Promise<void>((resolve) => (wake = resolve));
      }
    },
  };
}

const encoder = new TextEncoder();

/** A 200 `text/event-stream` response of `messages`; `onCancel` runs when the client goes away. */
export function sseResponse(messages: AsyncIterable<SseMessage>, onCancel?: () => void): Response {
  const iterator = messages[Symbol.asyncIterator]();
  const body = new ReadableStream<Uint8Array>({
    cancel: () => onCancel?.(),
    async pull(controller) {
      const next = await iterator.next();
      if (next.done) controller.close();
      else {
        const { id, event, data } = next.value;
        const fields = `${id !== undefined ? `id: ${id}\n` : ''}${event !== undefined ? `event: ${event}\n` : ''}`;
        controller.enqueue(encoder.encode(`${fields}data: ${data}\n\n`));
      }
    },
  });
  return new Response(body, {
    status: 200,
    headers: { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache' },
  });
}

/**
 * `response`, a stream of `sseResponse`, or a 204 when it ends before its first message (an
 * EventSource stops at a 204, where it reconnects to an empty stream every few seconds). Its first
 * message is awaited; `signal` (the request's) going away meanwhile cancels it: a 499 nobody reads.
 */
export async function noContentWhenEmpty(response: Response, signal: AbortSignal): Promise<Response> {
  if (!response.body) return response;
  const reader = response.body.getReader();
  const cancel = () => void reader.cancel().catch(() => {});
  signal.addEventListener('abort', cancel, { once: true });
  if (signal.aborted) cancel();
  let first: ReadableStreamReadResult<Uint8Array>;
  try {
    first = await reader.read();
  } finally {
    signal.removeEventListener('abort', cancel);
  }
  if (signal.aborted) return new Response(null, { status: 499 });
  if (first.done) return new Response(null, { status: 204 });
  let pending: Uint8Array | undefined = first.value;
  const body = new ReadableStream<Uint8Array>({
    cancel: (reason) => reader.cancel(reason),
    async pull(controller) {
      if (pending) {
        controller.enqueue(pending);
        pending = undefined;
        return;
      }
      const next = await reader.read();
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
  });
  return new Response(body, { status: response.status, headers: response.headers });
}

/** The events a response's stream ends with. */
const TERMINAL_EVENTS = new Set<string>(['response.completed', 'response.incomplete', 'response.failed']);

/**
 * Whether `event` ends a response whose turn's lease ran out: its stream's process died, so no
 * client got a terminal event live, and one past every event its journal gives (events streamed
 * live but never journaled) still needs it. So does one whose end its stream's process never
 * kept (`unkept`: lib/openai/resumed-response.ts), which it sends only after keeping it.
 */
function ownerDied(event: ResponseStreamEvent): boolean {
  return event.type === 'response.failed' && (event.response.error?.code as string | undefined) === LEASE_EXPIRED;
}

/**
 * Responses events as server-sent events: a writer and the response that streams what it
 * writes, from the event after sequence number `after` (a resumed stream writes every event
 * again, and the client gets those it has not seen). A client past every event written gets
 * nothing more, the stream ends empty (it had the terminal event, or `after` is not one of the
 * stream's numbers; a 200, as the `openai` client refuses a 204's stream without a body, which
 * the retrieve route answers an EventSource instead: `noContentWhenEmpty`), but
 * for one whose stream's process died after events it streamed live but
 * never journaled: that one still gets the terminal response.failed (`lease_expired`), or
 * any end written once `unkept` was called (its process never kept the response, so never sent
 * its end live), numbered as the journal numbers it, also when that is the number it resumes at
 * (the event it had there was one streamed live past the journal). While `mute`d, what it writes is numbered
 * but not sent, but for the terminal event (a background turn's run its reader does not follow:
 * lib/openai/journaled-response.ts); `shown` counts the output items added while not muted, sent
 * or before `after` (those the client holds). `encryptedReasoning`:
 * its reasoning items carry their `encrypted_content`. The terminal event is followed by the
 * literal `data: [DONE]`, the end the Open Responses specification requires (a stream cut before
 * its terminal event has none, so a client can tell it from one that ended). Each event carries
 * its sequence_number as its SSE id, `[DONE]` none: an EventSource that reconnects sends the
 * terminal event's as its `Last-Event-ID`. An end no stream sent live has that number plus
 * MAX_UNJOURNALED + 1 as its id, past any number a client may hold without it.
 */
export function responseEventStream(
  itemIdAt: ConstructorParameters<typeof ResponseEventWriter>[0],
  options: { after?: number; onCancel?: () => void; encryptedReasoning?: boolean } = {},
) {
  const queue = eventQueue<SseMessage>();
  const after = options.after ?? -1;
  let muted = false;
  let shown = 0;
  let unkept = false;
  const writer = new ResponseEventWriter(
    itemIdAt,
    (event: ResponseStreamEvent) => {
      const terminal = TERMINAL_EVENTS.has(event.type);
      if (muted && !terminal) return;
      if (event.type === 'response.output_item.added') shown += 1;
      // An end no stream sent live goes to a client at its number too: the event it had there
      // was one its stream's process sent live past its journal. Its SSE id is past any such
      // number (MAX_UNJOURNALED): an EventSource that got it reconnects with that, and has it.
      const unsent = terminal && (unkept || ownerDied(event));
      const n = event.sequence_number;
      if (n <= after && !(unsent && after <= n + MAX_UNJOURNALED)) return;
      queue.push({ id: String(unsent ? n + MAX_UNJOURNALED + 1 : n), event: event.type, data: JSON.stringify(event) });
      if (terminal) queue.push({ data: '[DONE]' });
    },
    options.encryptedReasoning,
  );
  return {
    writer,
    mute: (on: boolean) => {
      muted = on;
    },
    shown: () => shown,
    unkept: () => {
      unkept = true;
    },
    close: () => queue.close(),
    response: () => sseResponse(queue, options.onCancel),
  };
}
