import type { Context, MiddlewareHandler } from 'hono';
import { cors } from 'hono/cors';
import { REQUEST_ID_HEADER } from './request-id.ts';
import type { AppEnv } from './router.ts';

/** The methods of the API's routes. */
const METHODS = ['GET', 'HEAD', 'POST', 'PATCH', 'DELETE'];

/**
 * The request headers a page may send: the API's own (docs/API.md, Headers) and those the
 * official OpenAI clients add to every request.
 */
export const CORS_REQUEST_HEADERS = [
  'Authorization',
  'Content-Type',
  'Idempotency-Key',
  'Last-Event-ID',
  'x-tailgate-session',
  'x-tailgate-strategies',
  'OpenAI-Organization',
  'OpenAI-Project',
  'X-Stainless-Arch',
  'X-Stainless-Custom-Poll-Interval',
  'X-Stainless-Helper-Method',
  'X-Stainless-Lang',
  'X-Stainless-OS',
  'X-Stainless-Package-Version',
  'X-Stainless-Poll-Helper',
  'X-Stainless-Retry-Count',
  'X-Stainless-Runtime',
  'X-Stainless-Runtime-Version',
  'X-Stainless-Timeout',
];

/** The response headers a page may read: a request's id, the retry advice, the body limits, a 405's methods. */
export const CORS_RESPONSE_HEADERS = [
  REQUEST_ID_HEADER,
  'Allow',
  'Retry-After',
  'retry-after-ms',
  'x-should-retry',
  'WWW-Authenticate',
  'Tailgate-Max-Body-Bytes',
  'Tailgate-Max-Image-Bytes',
];

/** Whether CORS_ORIGINS (`allowed`) takes a page of `origin`. */
export function corsAllows(allowed: '*' | readonly string[] | null, origin: string): boolean {
  return allowed === '*' || (allowed?.includes(origin) ?? false);
}

/** The origin a request may be answered to under CORS_ORIGINS, or null (no Allow-Origin). */
function allowedOrigin(origin: string, c: Context<AppEnv>): string | null {
  const allowed = c.var.config.corsOrigins;
  if (allowed === '*') return '*';
  return corsAllows(allowed, origin) ? origin : null;
}

const apiCors = cors({
  origin: allowedOrigin,
  allowMethods: METHODS,
  allowHeaders: CORS_REQUEST_HEADERS,
  exposeHeaders: CORS_RESPONSE_HEADERS,
  maxAge: 600,
});

/**
 * CORS of the API routes (hono/cors), with CORS_ORIGINS set: a preflight (OPTIONS) is answered
 * 204 before auth, and every answer to an allowed origin, an error's too, says so. Unset,
 * nothing is added (a preflight is a 404, as any OPTIONS).
 */
export const corsForApi: MiddlewareHandler<AppEnv> = (c, next) =>
  c.var.config.corsOrigins === null ? next() : apiCors(c, next);
