import { spawn, type ChildProcess } from 'node:child_process';
import { connect, createServer, type Socket } from 'node:net';

/**
 * A loopback port held for a whole test that forwards each connection to `target()`'s port:
 * servers killed and started again each bind a port of their own (startServer), so no other
 * test's server can take the client's port while none listens. A connection to a server
 * that is down, or that dies, is dropped, as a client of that port would see it.
 */
export async function forwardingPort(
  target: () => number | undefined,
): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const port = target();
    if (port === undefined) return void client.destroy();
    const upstream = connect(port, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    }
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (typeof address !== 'object' || !address) throw new Error('no port');
  return {
    port: address.port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

export interface RunningServer {
  origin: string;
  output: () => string;
  stop: () => Promise<void>;
  /** kill -9 of the whole process group: no handler runs, nothing is flushed. */
  kill: () => Promise<void>;
  /** Sends `signal` to the server process alone (not its group), as a supervisor would. */
  signal: (signal: NodeJS.Signals) => void;
  /** The process's exit code once it has exited (null when a signal ended it). */
  exited: Promise<number | null>;
}

/**
 * The line a server prints once it listens, with its URL: the banner of functions/node.ts,
 * functions/deno.ts and `npm start` (functions/startup-banner.ts), or wrangler dev's "Ready on".
 * The URL counts once the line goes on past it: output comes in pieces, and one may end inside it.
 */
const LISTENING = /(?:^tailgate \([^)]*\) on|Ready on) (https?:\/\/\S+)\s/m;

/** How long startServer waits by default for a server to listen and answer /healthz. */
export const SERVER_START_MS = 45_000;
/** startServer's wait for a server slow to start (a Deno one: its first start compiles; wrangler). */
export const SLOW_SERVER_START_MS = 90_000;
/** The most a stop takes: SIGTERM, SIGKILL 3 s later, the exit seen. */
const STOP_MS = 5_000;

/**
 * A timeout for a hook that starts servers waiting up to `startMs` each (side by side), with
 * `otherMs` of other work: longer than startServer's wait and the stop of a server that did not
 * start in it, so the hook never times out while a start it began is under way (vitest would
 * go on to afterAll, which would not know of that server, left running once it started).
 */
export function startHookTimeout(startMs = SERVER_START_MS, otherMs = 0): number {
  return startMs + STOP_MS + otherMs + 10_000;
}

/**
 * Starts servers side by side (each a call of startServer). When one fails to, every other is
 * waited for (each stops itself if it fails too) and those that started are stopped before the
 * first failure is thrown: none is left running unknown to the caller.
 */
export function startServers<T extends readonly RunningServer[]>(
  starts: {
    readonly [K in keyof T]: Promise<T[K]>;
  },
): Promise<T> {
  return startedAll<T>(starts, (server) => server.stop());
}

/** startServers for any started thing, `end` ending one that started. */
export async function startedAll<T extends readonly unknown[]>(
  starts: { readonly [K in keyof T]: Promise<T[K]> },
  end: (started: T[number]) => Promise<void>,
): Promise<T> {
  const settled = await Promise.allSettled(starts as readonly Promise<T[number]>[]);
  const failed = settled.find((result) => result.status === 'rejected');
  if (failed) {
    await Promise.all(settled.map((result) => (result.status === 'fulfilled' ? end(result.value) : undefined)));
    throw failed.reason;
  }
  return settled.map((result) => (result as PromiseFulfilledResult<T[number]>).value) as unknown as T;
}

/**
 * Starts a server process told to listen on port 0 (`--port 0` or PORT=0) and waits until it
 * prints the URL it listens on and GET /healthz there answers 200. The port is the one the
 * process itself bound, so no other process can be answering on it. The process runs in its own
 * process group, so stopping it also stops anything it started.
 */
export async function startServer(
  command: string,
  args: string[],
  options: { env: Record<string, string>; cwd: string; timeoutMs?: number },
): Promise<RunningServer> {
  const child: ChildProcess = spawn(command, args, {
    cwd: options.cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  let origin: string | undefined;
  let listening: () => void = () => undefined;
  const printed = new Promise<void>((resolve) => (listening = resolve));
  child.stdout?.on('data', (chunk) => {
    output += chunk;
    // biome-ignore lint/suspicious/noControlCharactersInRegex: strips the terminal's colour codes
    const url = origin === undefined && LISTENING.exec(output.replace(/\u001b\[[0-9;]*m/g, ''))?.[1];
    if (url) {
      origin = new URL(url).origin;
      listening();
    }
  });
  child.stderr?.on('data', (chunk) => (output += chunk));
  const exitCode = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const exited = exitCode.then(() => undefined);
  const stop = async () => {
    if (child.exitCode === null && child.pid !== undefined) {
      try {
        process.kill(-child.pid, 'SIGTERM');
      } catch {
        // Already gone.
      }
      const timer = setTimeout(() => {
        try {
          if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
        } catch {
          // Already gone.
        }
      }, 3000);
      await exited;
      clearTimeout(timer);
    }
  };
  const timeoutMs = options.timeoutMs ?? SERVER_START_MS;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
  try {
    const first = await Promise.race([
      printed.then(() => 'listening' as const),
      exited.then(() => 'exited' as const),
      timedOut,
    ]);
    if (first === 'exited') throw new Error(`server exited early (${child.exitCode}):\n${output}`);
    if (first === 'timeout') throw new Error(`server printed no listening URL within ${timeoutMs} ms:\n${output}`);
    for (;;) {
      if (child.exitCode !== null) throw new Error(`server exited early (${child.exitCode}):\n${output}`);
      try {
        // A health check that hangs is bounded by the same wait (the check below throws).
        const response = await Promise.race([fetch(`${origin}/healthz`), timedOut]);
        if (response !== 'timeout' && response.status === 200) break;
      } catch {
        // Printed before it serves (wrangler's proxy); not answering yet.
      }
      if ((await Promise.race([timedOut, new Promise((resolve) => setTimeout(resolve, 150))])) === 'timeout')
        throw new Error(`server did not become healthy:\n${output}`);
    }
  } catch (error) {
    await stop();
    throw error;
  } finally {
    clearTimeout(timer);
  }
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) {
      process.kill(-child.pid, 'SIGKILL');
      await exited;
    }
  };
  const signal = (name: NodeJS.Signals) => {
    if (child.pid !== undefined) process.kill(child.pid, name);
  };
  return { origin: origin!, output: () => output, stop, kill, signal, exited: exitCode };
}
