import type { MiddlewareHandler } from 'hono';
import type { AppEnv } from './router.ts';

/** The response header naming a request, as OpenAI's API sends it (its clients read it as `request_id`). */
export const REQUEST_ID_HEADER = 'x-request-id';

/** A fresh id: `req_` and 24 random hex digits (96 bits). */
export function newRequestId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return `req_${Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('')}`;
}

/**
 * Names every request: `c.var.requestId`, which its turns' log lines and its failures' log
 * messages carry, and its response's `x-request-id`, on every answer (an error, a 404, a
 * stream), so that a client's report of a request finds its lines.
 */
export const requestId: MiddlewareHandler<AppEnv> = async (c, next) => {
  const id = newRequestId();
  c.set('requestId', id);
  await next();
  // Set on the response the request ended with (an error handler's and a stream's too).
  c.header(REQUEST_ID_HEADER, id);
};
