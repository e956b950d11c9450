import { createRoute } from '@hono/zod-openapi';
import { streamSSE } from 'hono/streaming';
import { z } from 'zod';
import { clientError } from '../../lib/error-codes.ts';
import { journalEvents } from '../../lib/turn/index.ts';
import { errorBody } from '../error-handler.ts';
import { errorResponses } from '../openapi-helpers.ts';
import { createRouter } from '../router.ts';
import { requires } from '../tokens.ts';
import { turnParamsSchema } from '../schemas.ts';

/** GET /v1/sessions/:id/turns/:turn/events: a turn's journaled events, replayed, then followed live. */

/**
 * An event's number (`after`, `Last-Event-ID`): decimal digits, a safe integer (0..Number.MAX_SAFE_INTEGER, at most
 * 16 digits), as the facade reads `starting_after` (lib/openai/query-schemas.ts).
 */
const afterText = z
  .string()
  .regex(/^[0-9]{1,16}$/, 'must be a non-negative integer of at most 16 digits')
  .transform(Number)
  .pipe(z.number().max(Number.MAX_SAFE_INTEGER, `must be at most ${Number.MAX_SAFE_INTEGER}`));

const turnEventsRoute = createRoute({
  method: 'get',
  path: '/v1/sessions/{id}/turns/{turn}/events',
  tags: ['turns'],
  summary: "A streamed or background turn's events (SSE): replayed from its journal, then followed live to its end",
  description:
    'Each event carries its number as the SSE id. `?after=N` or `Last-Event-ID: N` starts after event N (a ' +
    'reconnecting client gets every event once, in order). 404 for a turn without a journal (a plain JSON turn).',
  security: requires('session:read'),
  request: {
    params: turnParamsSchema,
    query: z.object({ after: afterText.optional().meta({ param: { name: 'after', in: 'query' } }) }),
    headers: z.object({ 'last-event-id': afterText.optional() }),
  },
  responses: {
    200: {
      description:
        'Server-sent events: turn.started, output_text.delta, function_call.started, ' +
        'function_call_arguments.delta, output_item.done, turn.completed or error',
      content: { 'text/event-stream': { schema: z.string() } },
    },
    204: { description: 'The turn ended and the reader has its last event already (`after` is its number)' },
    ...errorResponses(400, 401, 403, 404, 503),
  },
});

export function eventRoutes() {
  return createRouter().openapi(turnEventsRoute, async (c) => {
    const { id, turn } = c.req.valid('param');
    const fromQuery = c.req.valid('query').after;
    const fromHeader = c.req.valid('header')['last-event-id'];
    // Both: an EventSource opened with `?after=N` reconnects to the same URL with the last id it
    // saw, the later of the two.
    const after = Math.max(fromQuery ?? 0, fromHeader ?? 0);
    const stop = new AbortController();
    // The client going away stops the wait for the first event too (a turn without a journal
    // is known only once it ended): the answer is then a 499 nobody reads.
    const request = c.req.raw.signal;
    if (request.aborted) stop.abort();
    else request.addEventListener('abort', () => stop.abort(), { once: true });
    const events = journalEvents(c.var.services, id, turn, after, stop.signal);
    // The first event is awaited before the response starts: a missing turn or journal is a 404.
    const first = await events.next();
    if (first.done && stop.signal.aborted) return new Response(null, { status: 499 });
    // Nothing after `after` and the turn ended: the reader has its end already. 204, as an empty
    // stream would have an EventSource reconnect every few seconds for as long as it stays open.
    if (first.done) return new Response(null, { status: 204 });
    return streamSSE(c, async (stream) => {
      stream.onAbort(() => stop.abort());
      try {
        for (
          let next: Awaited<ReturnType<typeof events.next>> = first;
          !next.done && !stop.signal.aborted;
          next = await events.next()
        ) {
          const { n, event, data } = next.value;
          const shown = event === 'error' ? { error: clientError((data as { error: never }).error) } : data;
          await stream.writeSSE({ id: String(n), event, data: JSON.stringify(shown) });
        }
      } catch (error) {
        // The reading failed once the stream had begun. A store failing (storage_error, after its
        // retries) is logged and ends it with no event: the turn did not fail (an `error` event is
        // how a turn ends), and its client resumes after the last id it got. Any other (the
        // session deleted meanwhile: not_found) ends it with an `error` event without an id, no
        // event of the journal.
        const { body } = errorBody(error, c.var.services.log);
        if (body.error.code !== 'storage_error') await stream.writeSSE({ event: 'error', data: JSON.stringify(body) });
      }
    });
  });
}
