import type { MiddlewareHandler } from 'hono';
import { TailgateError } from '../lib/errors.ts';
import { OPENAI_PATH } from './routes/openai/errors.ts';

/** The order `Allow` lists methods in. */
const METHOD_ORDER = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** A registered route, as Hono lists it (`app.routes`). */
interface Route {
  method: string;
  path: string;
}

/** One path pattern (`/v1/sessions/:id`) and the methods its routes serve. */
interface Pattern {
  segments: string[];
  methods: Set<string>;
}

/**
 * The methods each path is served with, from the app's routes (`ALL` middleware aside): every
 * route whose pattern matches the path, a parameter matching any one segment. Under the
 * OpenAI-compatible paths a concrete path is its own (`/v1/responses/compact` is not the
 * response `compact`: OpenAI's ids carry a prefix), as OpenAPI matches concrete paths first;
 * under tailgate's own, a session or notice may be named as a concrete segment is
 * (`/v1/sessions/import`), so every pattern that matches counts. HEAD goes with GET.
 */
export function allowedMethods(routes: readonly Route[]): (path: string) => string[] {
  const patterns = new Map<string, Pattern>();
  for (const route of routes) {
    if (route.method === 'ALL') continue;
    const segments = route.path.split('/').map((segment) => (segment.startsWith(':') ? ':' : segment));
    const key = segments.join('/');
    const pattern = patterns.get(key) ?? { segments, methods: new Set() };
    pattern.methods.add(route.method);
    if (route.method === 'GET') pattern.methods.add('HEAD');
    patterns.set(key, pattern);
  }
  return (path) => {
    const parts = path.split('/');
    let matching = [...patterns.values()].filter((pattern) => matches(pattern.segments, parts));
    if (OPENAI_PATH.test(path)) {
      const concrete = Math.max(...matching.map((pattern) => concreteLead(pattern.segments)));
      matching = matching.filter((pattern) => concreteLead(pattern.segments) === concrete);
    }
    const methods = new Set(matching.flatMap((pattern) => [...pattern.methods]));
    return METHOD_ORDER.filter((method) => methods.has(method));
  };
}

function matches(segments: readonly string[], parts: readonly string[]): boolean {
  if (segments.at(-1) === '*')
    return parts.length >= segments.length - 1 && matches(segments.slice(0, -1), parts.slice(0, segments.length - 1));
  return (
    segments.length === parts.length &&
    segments.every((segment, at) => segment === parts[at] || (segment === ':' && parts[at] !== ''))
  );
}

/** How many segments of a pattern come before its first parameter: the more, the more concrete. */
function concreteLead(segments: readonly string[]): number {
  const first = segments.findIndex((segment) => segment === ':' || segment === '*');
  return first === -1 ? segments.length : first;
}

/**
 * A 405 `method_not_allowed` (docs/API.md, "Errors") for a request whose path the app serves
 * with other methods, naming them (`details.allow`, the `Allow` header: functions/error-handler.ts
 * errorHeaders); any other request goes on, an unknown path to its 404. OPTIONS is left to
 * the routes (a CORS preflight), and HEAD of a path served with GET is that GET.
 */
export function methodNotAllowed(served: () => (path: string) => string[]): MiddlewareHandler {
  return async (c, next) => {
    const refusal = methodRefusal(c.req.method, c.req.path, served());
    if (refusal) throw refusal;
    return next();
  };
}

/**
 * The 405 of `method` on `path` (methodNotAllowed), read from the routes alone, none of the
 * settings: null when a route serves it, the path is unknown, or the method is OPTIONS.
 */
export function methodRefusal(method: string, path: string, served: (path: string) => string[]): TailgateError | null {
  if (method === 'OPTIONS') return null;
  const allow = served(path);
  if (allow.length === 0 || allow.includes(method)) return null;
  return new TailgateError('method_not_allowed', `${method} is not allowed on ${path} (it takes ${allow.join(', ')})`, {
    allow,
  });
}

/**
 * What a request is answered while the settings do not parse (`error`, their 503
 * `not_configured`), decided from the routes alone, none of the settings read: a path no route
 * serves is its 404 (`notFound`, the app's), a method its path does not take its 405
 * (methodRefusal), and any request a route could serve, `/healthz` among them, the 503 (thrown).
 * OPTIONS is left to the 503: the API's CORS answers a preflight on any path under `/v1/`.
 */
export function unconfiguredAnswer(
  method: string,
  path: string,
  served: (path: string) => string[],
  error: unknown,
  notFound: () => Response | Promise<Response>,
): Response | Promise<Response> {
  if (method !== 'OPTIONS' && served(path).length === 0) return notFound();
  throw methodRefusal(method, path, served) ?? error;
}
