import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { serve } from '@hono/node-server';
import type { ServiceConfig } from '../lib/config.ts';
import { DEFAULTS } from '../lib/defaults.ts';
import { QUEUE_SWEEP_MS } from './queue-sweep.ts';
import { NotConfiguredError } from '../lib/errors.ts';
import { decimalNumber, MAX_TIMER_MS } from '../lib/setting-values.ts';
import { FileStore } from '../lib/store/file.ts';
import { keyPrefixProblem } from '../lib/store/file-format.ts';
import type { ObjectStore } from '../lib/store/object-store.ts';
import { requireConditionalWrites } from '../lib/store/write-probe.ts';
import { answerClientError, answerExpectation } from './client-error.ts';
import { DOCS_SCRIPT_SOURCE } from './docs-page.ts';
import { lingerOnRefusal, withheldUntilContinue } from './lingering-close.ts';
import { s3StoreFromConfig } from './s3-store-from-env.ts';

/**
 * What the Node and Deno entries share: the store (S3 when S3_ENDPOINT or S3_BUCKET is set,
 * otherwise the file store under DATA_DIR), the listening address (`--port`/`--host`, then
 * PORT/HOST, then 8787 on 127.0.0.1), `--allow-anonymous` (what `npm run start:node` and
 * `start:deno` pass, like `npm start`), the HTTP server with its slow-client timeouts
 * (`serveLocal`), the docs page's script, and the store's line of the startup banner
 * (functions/startup-banner.ts).
 */
export interface LocalServerOptions {
  port: number;
  hostname: string;
  /** Set ALLOW_ANONYMOUS=true unless the environment sets it. */
  allowAnonymous: boolean;
  /** HEADERS_TIMEOUT_MS: a request's headers must have arrived this long after it began (else 408). */
  headersTimeoutMs: number;
  /** REQUEST_TIMEOUT_MS: the whole request, body included (else 408); sending the response is not bounded. */
  requestTimeoutMs: number;
  /** SHUTDOWN_GRACE_MS: how long running requests may finish after SIGINT or SIGTERM. */
  shutdownGraceMs: number;
  /** REPEATED_SIGNAL_MS: a second signal this soon after the first is that one delivered twice. */
  repeatedSignalMs: number;
  /** QUEUE_SWEEP_MS: how often the sweep of queues runs (functions/queue-sweep.ts). */
  queueSweepMs: number;
}

export function localServerOptions(args: string[], env: Record<string, string | undefined>): LocalServerOptions {
  const { values } = parsedArgs(args);
  // A blank PORT or HOST is unset, as every blank setting is (a blank host would listen everywhere).
  const portText = values.port ?? (env.PORT?.trim() || '8787');
  const port = decimalNumber(portText);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`invalid port ${JSON.stringify(portText)} (--port or PORT)`);
  const headersTimeoutMs = milliseconds(env, 'HEADERS_TIMEOUT_MS', 10_000);
  const requestTimeoutMs = milliseconds(env, 'REQUEST_TIMEOUT_MS', 60_000);
  if (headersTimeoutMs > requestTimeoutMs)
    throw new Error(
      `HEADERS_TIMEOUT_MS (${headersTimeoutMs}) must not exceed REQUEST_TIMEOUT_MS (${requestTimeoutMs})`,
    );
  return {
    port,
    hostname: values.host ?? (env.HOST?.trim() || '127.0.0.1'),
    allowAnonymous: values['allow-anonymous'] ?? false,
    headersTimeoutMs,
    requestTimeoutMs,
    shutdownGraceMs: milliseconds(env, 'SHUTDOWN_GRACE_MS', 30_000),
    repeatedSignalMs: milliseconds(env, 'REPEATED_SIGNAL_MS', REPEATED_SIGNAL_MS),
    queueSweepMs: milliseconds(env, 'QUEUE_SWEEP_MS', QUEUE_SWEEP_MS),
  };
}

/** The command line's options; one it does not take is refused with the ones it does. */
function parsedArgs(args: string[]) {
  try {
    return parseArgs({
      args,
      options: { port: { type: 'string' }, host: { type: 'string' }, 'allow-anonymous': { type: 'boolean' } },
      strict: true,
      allowPositionals: false,
    });
  } catch (error) {
    const why = error instanceof Error ? error.message.split('. ')[0] : String(error);
    throw new Error(`${why}; the options are --port <number>, --host <address> and --allow-anonymous`);
  }
}

function milliseconds(env: Record<string, string | undefined>, name: string, fallback: number): number {
  const text = env[name]?.trim() || String(fallback);
  const value = decimalNumber(text);
  if (!Number.isSafeInteger(value) || value <= 0 || value > MAX_TIMER_MS)
    throw new Error(
      `invalid ${name} ${JSON.stringify(text)} (a positive number of milliseconds, at most ${MAX_TIMER_MS})`,
    );
  return value;
}

/** The work requests left running after their responses (AppOptions.afterResponse), until it settles. */
const running = new Set<Promise<unknown>>();

/** Tracks `task` (settling, it is forgotten) so that a stopping server waits for it. */
export function trackAfterResponse(task: Promise<unknown>): void {
  const settled: Promise<unknown> = task.then(
    () => running.delete(settled),
    () => running.delete(settled),
  );
  running.add(settled);
}

/**
 * What a first SIGINT or SIGTERM says it waits for: the `connections` still open (running
 * requests) and how many tasks requests and timers left running (trackAfterResponse: a
 * background turn, a charge, a queue's pickup, a webhook delivery; counted, not told apart).
 */
export function shutdownNotice(signal: string, graceMs: number, connections: number): string {
  const waits = [
    ...(connections > 0 ? [`${connections} open connection(s)`] : []),
    ...(running.size > 0 ? [`${running.size} background task(s)`] : []),
  ];
  if (waits.length === 0) return `tailgate: ${signal}: no new requests; nothing left running, stopping`;
  return (
    `tailgate: ${signal}: no new requests; waiting up to ${graceMs / 1000} s for ${waits.join(' and ')} ` +
    `to finish (${signal} again stops at once)`
  );
}

/** What the end of the grace period cuts off: the open connections, and the work left running. */
function graceOverNotice(connections: number): string {
  const cut = [
    ...(connections > 0 ? [`closing ${connections} open connection(s)`] : []),
    ...(running.size > 0 ? [`leaving ${running.size} background task(s) unfinished`] : []),
  ];
  if (cut.length === 0) return 'tailgate: grace period over';
  return (
    `tailgate: grace period over: ${cut.join(' and ')} ` +
    '(a turn cut off is closed as failed, lease_expired, once its lease runs out)'
  );
}

/**
 * A second signal this soon after the first (by default; the REPEATED_SIGNAL_MS setting) is the
 * same one delivered twice, not an operator's second: a terminal's Ctrl-C (SIGINT) and a
 * supervisor stopping a process group (SIGTERM) reach every process of the group, and `npm run`
 * passes what it receives on to the server as well.
 */
export const REPEATED_SIGNAL_MS = 1000;

/**
 * Serves `fetch` with node:http (@hono/node-server), on Node and on Deno alike: Deno.serve has
 * no header timeout, and Deno's node:http enforces these as Node does. A client whose headers,
 * or whole request, have not arrived in time gets `408 Request Timeout` and its connection is
 * closed; the timeouts are checked every second at most.
 *
 * A port in use is one line and exit 1. The first SIGINT or SIGTERM stops accepting
 * connections, closes the idle ones, and lets running requests (a streamed turn) and the work
 * they left running (trackAfterResponse: a background turn, a charge) finish for up to
 * SHUTDOWN_GRACE_MS (with the turns they take up from a session's queue as they close), then
 * closes what is left and exits: 0 if nothing was left, 1 if the grace period cut work off (a
 * supervisor sees an unclean stop); a second signal stops at once, unless it came within
 * `repeatedSignalMs` of the first (the same signal delivered twice), which is ignored. Turns
 * cut off are left to their lease, as after a crash.
 */
export function serveLocal(
  fetch: (request: Request) => Response | Promise<Response>,
  options: LocalServerOptions,
  onListen: (url: string) => void,
): void {
  const serverOptions = {
    headersTimeout: options.headersTimeoutMs,
    requestTimeout: options.requestTimeoutMs,
    connectionsCheckingInterval: Math.min(1000, options.headersTimeoutMs),
  };
  const server = serve({ fetch, port: options.port, hostname: options.hostname, serverOptions }, (info) => {
    const host = info.address.includes(':') ? `[${info.address}]` : info.address;
    onListen(`http://${host}:${info.port}`);
  }) as Server;
  // A request with `Expect: 100-continue` (curl sends it with a body over 1 MiB) is handed to
  // the app at once, and `100 Continue` goes out when the app starts reading its body: one it
  // refuses before that (401, 413 over MAX_BODY_BYTES, 503 overloaded: functions/body-budget.ts)
  // is answered without the client sending the body first.
  server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
    continueOnRead(request, response);
    server.emit('request', request, response);
  });
  // A request the parser refuses (a body longer than its Content-Length) is answered in the
  // API's error JSON, not Node's bare 400 (functions/client-error.ts).
  server.on('clientError', answerClientError);
  // An `Expect` other than 100-continue is refused in the error JSON too, not with a bare 417.
  server.on('checkExpectation', answerExpectation);
  // A body refused unread is read and dropped while its client goes on sending it, so that the
  // client reads the refusal (functions/lingering-close.ts).
  lingerOnRefusal(server);
  server.on('error', (error: NodeJS.ErrnoException) => {
    const where = `${options.hostname}:${options.port}`;
    console.error(
      error.code === 'EADDRINUSE'
        ? `tailgate: ${where} is in use; choose another port with --port or PORT`
        : `tailgate: cannot listen on ${where}: ${error.message}`,
    );
    process.exit(1);
  });
  let stopping = false;
  let stoppingSince = 0;
  // Requests being answered: a connection a keep-alive client left idle after its response, open
  // until the keep-alive timeout, is no work cut off. Once stopping, it is closed as it goes idle.
  let answering = 0;
  server.on('request', (_request: IncomingMessage, response: ServerResponse) => {
    answering++;
    response.once('close', () => {
      answering--;
      if (stopping) setImmediate(() => server.closeIdleConnections());
    });
  });
  const stop = (signal: string) => {
    if (stopping && performance.now() - stoppingSince < options.repeatedSignalMs) {
      const within = options.repeatedSignalMs === 1000 ? 'a second' : `${options.repeatedSignalMs} ms`;
      console.error(
        `tailgate: ${signal} again within ${within}: taken as the same one (send it again to stop at once)`,
      );
      return;
    }
    if (stopping) {
      console.error(`tailgate: ${signal} again, stopping now`);
      process.exit(1);
    }
    stopping = true;
    stoppingSince = performance.now();
    let graceOver: () => void = () => undefined;
    const grace = new Promise<void>((resolve) => {
      graceOver = resolve;
    });
    let graceIsOver = false;
    void grace.then(() => {
      graceIsOver = true;
    });
    // Whether the grace period ended with work still open or running: exit 1, an unclean stop.
    let cutOff = false;
    // The notice comes before the stop: with nothing open, the close's callback runs first.
    let told: () => void = () => undefined;
    const notice = new Promise<void>((resolve) => {
      told = resolve;
    });
    server.close(async () => {
      // Work the requests left running (background turns) finishes too, within the grace period,
      // and so does the work it starts: the input a closing turn takes up from its session's queue.
      while (running.size > 0 && !graceIsOver) await Promise.race([Promise.allSettled([...running]), grace]);
      await notice;
      console.error(cutOff ? 'tailgate: stopped with work cut off (exit 1)' : 'tailgate: stopped');
      process.exit(cutOff ? 1 : 0);
    });
    server.closeIdleConnections();
    server.getConnections((_error, open) => {
      console.error(shutdownNotice(signal, options.shutdownGraceMs, open));
      told();
    });
    setTimeout(() => {
      server.getConnections((_error, open) => {
        console.error(graceOverNotice(open));
        cutOff = answering > 0 || running.size > 0;
        server.closeAllConnections();
        graceOver();
      });
    }, options.shutdownGraceMs).unref();
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => stop(signal));
}

/**
 * Sends `100 Continue` the first time `request`'s body is read, unless the response has begun.
 * A response begun before that says `Connection: close` and ends the connection: its client has
 * not sent the body, or may send it yet, so the socket cannot carry a next request (Node's server
 * does this itself; Deno's node:http answers `keep-alive`, then takes the next request's bytes
 * for this body).
 */
function continueOnRead(request: IncomingMessage, response: ServerResponse): void {
  response.setHeader('Connection', 'close');
  const withheld = withheldUntilContinue(request);
  const read = request._read;
  request._read = function (this: IncomingMessage, size: number) {
    request._read = read;
    if (!response.headersSent) {
      response.removeHeader('Connection');
      response.writeContinue();
      withheld.continued();
    }
    return read.call(this, size);
  };
}

/**
 * Marks this process as a server of the working directory (`.tailgate/servers/<pid>`, removed
 * when it exits): `npm run reset` (scripts/reset.mjs) refuses while a live one is marked. A
 * process killed with SIGKILL leaves its marker, which reset finds dead and removes.
 */
export function markRunning(description: string): void {
  const directory = resolve('.tailgate', 'servers');
  const marker = join(directory, String(process.pid));
  try {
    mkdirSync(directory, { recursive: true });
    writeFileSync(marker, description);
    process.on('exit', () => rmSync(marker, { force: true }));
  } catch (error) {
    console.error(`tailgate: cannot mark ${marker}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** S3 is configured when its endpoint or bucket is set; otherwise the store is local files. */
function usesS3(config: ServiceConfig): boolean {
  return config.s3.endpoint !== undefined || config.s3.bucket !== undefined;
}

/**
 * The store for a request's settings; one object per setting, so the write probe runs once each.
 * A KEY_PREFIX the file store cannot hold is refused (503 not_configured; the servers refuse to
 * start with it), where every read and write would fail.
 */
export function storeFromConfig(): (config: ServiceConfig) => ObjectStore {
  const s3 = s3StoreFromConfig();
  const files = new Map<string, FileStore>();
  return (config) => {
    if (usesS3(config)) return s3(config);
    const problem = keyPrefixProblem(config.keyPrefix);
    if (problem !== null)
      throw new NotConfiguredError(`invalid setting KEY_PREFIX: ${problem}`, { variable: 'KEY_PREFIX' });
    const root = resolve(config.dataDir);
    let store = files.get(root);
    if (!store) {
      store = new FileStore(root);
      files.set(root, store);
      // Temp files of processes killed while writing, from before this one started.
      store.sweep().catch((error: unknown) => console.error(`tailgate: sweeping ${root} failed: ${String(error)}`));
    }
    return store;
  };
}

/**
 * Refuses to start on a DATA_DIR the file store cannot work in (a path under /proc, a read-only
 * or unwritable one), before any traffic: the store's write probe runs there once. S3 is probed
 * by the first request instead (it may be away for a moment while the server starts).
 */
export async function checkDataDir(config: ServiceConfig, store: ObjectStore): Promise<void> {
  if (usesS3(config)) return;
  try {
    await requireConditionalWrites(store, { keyPrefix: config.keyPrefix });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(`DATA_DIR ${resolve(config.dataDir)} cannot hold the file store: ${reason}`);
  }
}

/** The banner's store line: where the keys land, with the region and KEY_PREFIX when set. */
export function describeStore(config: ServiceConfig): string {
  const { bucket, endpoint, region } = config.s3;
  const prefix = config.keyPrefix === '' ? '' : `, KEY_PREFIX ${config.keyPrefix}`;
  if (!usesS3(config)) return `files in ${resolve(config.dataDir)}${prefix}`;
  const where = `S3 bucket ${bucket ?? '(S3_BUCKET not set)'} at ${endpoint ?? 'AWS'}`;
  return `${where}${region === DEFAULTS.s3Region ? '' : `, region ${region}`}${prefix}`;
}

/**
 * A file's bytes, read on the first call that finds it and kept. A missing file is a 503
 * `not_configured` saying how to make it (`build`), not a 500, and is looked for again on the
 * next call, so a server started before the file was built serves it once it is.
 */
export function builtFile(path: string, name: string, build: string): () => Promise<Uint8Array<ArrayBuffer>> {
  let bytes: Promise<Uint8Array<ArrayBuffer>> | undefined;
  return () => {
    bytes ??= readFile(path).then(
      (buffer) => new Uint8Array(buffer),
      (error: unknown) => {
        bytes = undefined;
        if ((error as { code?: unknown }).code !== 'ENOENT') throw error;
        throw new NotConfiguredError(`${name} is not built: run \`${build}\` and reload`, { file: name, build });
      },
    );
    return bytes;
  };
}

/** The docs page's script from node_modules. */
export const docsScript = builtFile(
  fileURLToPath(new URL(`../${DOCS_SCRIPT_SOURCE}`, import.meta.url)),
  DOCS_SCRIPT_SOURCE,
  'npm install',
);

/** The inspector's script, bundled into .assets/ by `npm run assets` (scripts/assets.mjs). */
export const inspectorScript = builtFile(
  fileURLToPath(new URL('../.assets/ui/app.js', import.meta.url)),
  '.assets/ui/app.js',
  'npm run assets',
);
