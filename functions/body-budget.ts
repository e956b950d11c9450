import type { Context, MiddlewareHandler, Next } from 'hono';
import { InvalidRequestError, OverloadedError, TailgateError } from '../lib/errors.ts';
import type { TokenSetting } from './auth.ts';
import type { AppEnv } from './router.ts';

/**
 * Request bodies are read whole before a route runs (the JSON check, the validator), so many
 * large bodies at once can exhaust memory. Two limits apply: one body is at most
 * `MAX_BODY_BYTES` (413), and the bodies being held by this process (this isolate on Workers)
 * add up to at most `MAX_BUFFERED_BODY_BYTES`: a body that would go over waits for nobody and
 * is answered 503 `overloaded` with `Retry-After`. A body counts the bytes it has sent, as
 * they arrive, never more: a client that declares a large Content-Length and then stalls holds
 * no budget it does not use (at no cost to it, a few such requests would otherwise refuse
 * every other body until its request timed out). A body whose Content-Length would not fit
 * beside the bodies held now is refused before it is read. Its bytes count until its request
 * is answered (failed and aborted ones too). A body arriving while no other is held always gets
 * in, so a budget smaller than one body still lets bodies through one at a time; and the oldest
 * body being received is never refused midway (bodies admitted after it, which fitted beside
 * what it had sent then, are refused instead), so the bodies held may pass the budget by at most
 * that one body. A body cut short by its client (or by the server's request timeout) is a 400
 * `invalid_request`.
 */

/** Seconds a client is told to wait after a 503 `overloaded`. */
export const OVERLOADED_RETRY_SECONDS = 1;

/** Bytes of request bodies this process holds now (module state: per process, per isolate). */
let held = 0;

/** The bytes of request bodies held now (for tests). */
export function heldBodyBytes(): number {
  return held;
}

/** The bodies being received, oldest first. */
const receiving = new Set<object>();

/**
 * Reserves `bytes` more for `body`, which holds `own` already: refused when over the budget
 * and others hold bytes, unless `body` is the oldest being received.
 */
function reserve(body: object, bytes: number, budget: number, own: number): boolean {
  const oldest = receiving.values().next().value === body;
  if (!oldest && held > own && held + bytes > budget) return false;
  held += bytes;
  return true;
}

/** How a 413's message names the setting that raises the limit, where the deployment sets it. */
const RAISED_BY: Record<TokenSetting, string> = {
  server: "MAX_BODY_BYTES in the server's environment raises it",
  workers:
    "MAX_BODY_BYTES (a var of the Worker) raises it, within Cloudflare's request size limit and the isolate's memory",
};

function tooLarge(limit: number, setting: TokenSetting): TailgateError {
  const message = `request body is larger than ${limit} bytes; ${RAISED_BY[setting]}`;
  return new TailgateError('payload_too_large', message, { limit });
}

/**
 * The body limits above, as one middleware (after the config is parsed); `setting`: where the
 * deployment sets MAX_BODY_BYTES, which a 413 names.
 */
export const bodyBudget = async (
  c: Context<AppEnv>,
  next: Next,
  setting: TokenSetting,
): ReturnType<MiddlewareHandler<AppEnv>> => {
  if (c.req.method === 'GET' || c.req.method === 'HEAD') return next();
  const { maxBodyBytes: limit, maxBufferedBodyBytes: budget } = c.get('config');
  const overloaded = () => {
    c.header('Retry-After', String(OVERLOADED_RETRY_SECONDS));
    return new OverloadedError(budget);
  };
  // A body refused before it was read whole is left unread: the connection closes after the
  // answer, which says so, so that a keep-alive client sends its next request on a new one
  // (the Node server stops draining a body it did not read within a moment and ends the socket).
  const unread = (error: TailgateError) => {
    c.header('Connection', 'close');
    return error;
  };
  let counted = 0;
  const self = {};
  try {
    const declared = c.req.raw.headers.has('transfer-encoding') ? undefined : c.req.header('content-length');
    if (declared !== undefined) {
      const length = Number.parseInt(declared, 10) || 0;
      if (length > limit) throw unread(tooLarge(limit, setting));
      if (held > 0 && held + length > budget) throw unread(overloaded());
    }
    // Taken only now: on Node and Deno, reading the body is what sends the `100 Continue` a
    // client with `Expect: 100-continue` waits for (functions/local-server.ts), so a body
    // refused above is never sent.
    const body = c.req.raw.body;
    if (!body) return await next();
    // Read here, whole, so that a body cut short (the client went away, or the server's
    // request timeout ended it) is one clear 400 rather than an error deep in a route.
    const chunks: Uint8Array[] = [];
    let received = 0;
    receiving.add(self);
    const reader = body.getReader();
    for (;;) {
      const { done, value } = await reader.read().catch((error: unknown) => {
        throw new InvalidRequestError('the request body ended before it was received whole', {
          reason: error instanceof Error ? error.message : String(error),
        });
      });
      if (done) break;
      // Every body reserves its bytes as they come.
      const refused =
        received + value.length > limit
          ? tooLarge(limit, setting)
          : !reserve(self, value.length, budget, counted)
            ? overloaded()
            : null;
      if (refused) {
        void reader.cancel().catch(() => undefined);
        throw unread(refused);
      }
      counted += value.length;
      received += value.length;
      chunks.push(value);
    }
    const whole = new Uint8Array(received);
    let offset = 0;
    for (const chunk of chunks) {
      whole.set(chunk, offset);
      offset += chunk.length;
    }
    chunks.length = 0;
    c.req.raw = new Request(c.req.raw, { body: whole });
    // What c.req.arrayBuffer() answers (the JSON check reads it): the bytes in hand, not read
    // again through the new request's stream.
    const bytes = Promise.resolve(whole.buffer);
    c.req.arrayBuffer = () => bytes;
    return await next();
  } finally {
    receiving.delete(self);
    held -= counted;
  }
};
