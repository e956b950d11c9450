import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';

/** How long a refused body's client may pause before its socket is closed. */
const LINGER_IDLE_MS = 5000;
/** How long in all a refused body's client may go on sending it. */
const LINGER_MAX_MS = 30_000;

type ClosingSocket = Socket & { destroySoon?: () => void };

/** Each socket's own destroySoon, before lingerOnRefusal wrapped it. */
const own = new WeakMap<Socket, () => void>();
/** Requests sent with `Expect: 100-continue` that got no `100 Continue`: their client sends no body. */
const bodyWithheld = new WeakSet<IncomingMessage>();
/** Sockets lingering after a refusal: what they read is dropped. */
const lingering = new WeakSet<Socket>();
/** The server's events that hand a parsed request to the app. */
const REQUEST_EVENTS = new Set<string | symbol>(['request', 'checkContinue', 'checkExpectation']);

/**
 * Marks `request` as one whose client withholds its body until `100 Continue` (functions/local-server.ts
 * sends it once the body is read); `continued` says it went out after all.
 */
export function withheldUntilContinue(request: IncomingMessage): { continued: () => void } {
  bodyWithheld.add(request);
  return { continued: () => bodyWithheld.delete(request) };
}

/**
 * Lingering close on the Node and Deno servers (node:http). A response that ends its
 * connection (`Connection: close`) before the request's body arrived whole (a 413 over
 * MAX_BODY_BYTES, a 401, a 503 `overloaded`: functions/body-budget.ts; a 417 for an `Expect`
 * other than 100-continue, functions/client-error.ts) leaves a client that
 * may still be sending that body. Ended at once, the socket is reset under the client's next
 * write, which drops the answer the client has not read yet: fetch and the `openai` client
 * then report a connection error (EPIPE, ECONNRESET) instead of the 413, and the `openai`
 * client retries, sending the body again. So such a socket ends its side (the answer and a
 * FIN), reads and drops what the client still sends, and is closed once the client ends its
 * side, or sent nothing for LINGER_IDLE_MS, or after LINGER_MAX_MS. A body withheld until a
 * `100 Continue` that never went out is not coming: its socket closes at once, as before.
 * The parser still reads what such a socket receives: a request the client sends after the
 * refused body (pipelined, or on a connection it took for open) is not handed to the app, as a
 * connection answered `Connection: close` runs no further request (RFC 9112, 9.6): its socket
 * is closed then.
 */
export function lingerOnRefusal(server: Server): void {
  const emit = server.emit;
  server.emit = function (this: Server, event: string | symbol, ...args: unknown[]): boolean {
    const socket = REQUEST_EVENTS.has(event) ? (args[0] as IncomingMessage).socket : undefined;
    if (socket && lingering.has(socket)) {
      socket.destroy();
      return true;
    }
    // A request refused for its Expect reaches no 'request' listener: its answer lingers too. (A
    // listener of 'checkExpectation' here would take node:http's own 417 from a server without one.)
    if (event === 'checkExpectation') lingerAfter(args[0] as IncomingMessage);
    return Reflect.apply(emit, this, [event, ...args]) as boolean;
  } as Server['emit'];
  server.on('request', lingerAfter);
}

/** Makes the close that ends `request`'s answer linger while the rest of its body comes. */
function lingerAfter(request: IncomingMessage): void {
  const socket = request.socket as ClosingSocket;
  const destroySoon = own.get(socket) ?? socket.destroySoon;
  if (typeof destroySoon !== 'function') return;
  own.set(socket, destroySoon);
  socket.destroySoon = function (this: ClosingSocket) {
    if (request.complete || bodyWithheld.has(request)) return destroySoon.call(this);
    this.destroySoon = () => {};
    lingering.add(this);
    this.end();
    const close = () => this.destroy();
    const timer = setTimeout(close, LINGER_MAX_MS);
    timer.unref();
    this.setTimeout(LINGER_IDLE_MS, close);
    this.once('end', close);
    this.once('close', () => clearTimeout(timer));
    this.resume();
  };
}
