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

/** An OpenAPI document's operations, as far as its responses go. */
interface OpenApiResponses {
  paths?: Record<string, Record<string, { responses?: Record<string, { headers?: Record<string, unknown> }> }>>;
  components?: { headers?: Record<string, unknown> };
}

/**
 * `generated` (an OpenAPI document) with `x-request-id` declared on every response of every operation (one shared
 * component), beside the headers a route declares of its own: every answer carries it.
 */
export function withRequestIdHeader<Document extends object>(generated: Document): Document {
  const document = generated as OpenApiResponses;
  const header = {
    description: "The request's id, in the log lines of its turns and failures",
    schema: { type: 'string', pattern: '^req_[0-9a-f]{24}$' },
  };
  const reference = { $ref: `#/components/headers/${REQUEST_ID_HEADER}` };
  document.components = {
    ...document.components,
    headers: { ...document.components?.headers, [REQUEST_ID_HEADER]: header },
  };
  for (const operations of Object.values(document.paths ?? {}))
    for (const operation of Object.values(operations))
      for (const response of Object.values(operation.responses ?? {}))
        response.headers = { ...response.headers, [REQUEST_ID_HEADER]: reference };
  return generated;
}
