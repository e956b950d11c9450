import { spawn, type ChildProcess } from 'node:child_process';
import { connect, createServer, type Socket } from 'node:net';

/** A free loopback port (the OS picks it; closed again before the server binds it). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

/**
 * A loopback port held for a whole test that forwards each connection to `target()`'s port:
 * servers killed and started again each bind a port of their own (onFreePort), so no other
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

/**
 * Runs `start` on a port freePort picked, and again on another when the server found it taken
 * (another process may bind a port between freePort's check and the server's bind; wrangler
 * then exits with "Address already in use").
 */
export async function onFreePort<T>(start: (port: number) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    try {
      return await start(port);
    } catch (error) {
      if (attempt >= 3 || !/address already in use|EADDRINUSE/i.test(String(error))) throw error;
    }
  }
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
 * Starts a server process and waits until GET /healthz answers 200. The process runs in its
 * own process group, so stopping it also stops anything it started.
 */
export async function startServer(
  command: string,
  args: string[],
  options: { env: Record<string, string>; port: number; cwd: string; timeoutMs?: number },
): Promise<RunningServer> {
  const child: ChildProcess = spawn(command, args, {
    cwd: options.cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  child.stdout?.on('data', (chunk) => (output += chunk));
  child.stderr?.on('data', (chunk) => (output += chunk));
  const exitCode = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const exited = exitCode.then(() => undefined);
  const origin = `http://127.0.0.1:${options.port}`;
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
  const deadline = Date.now() + (options.timeoutMs ?? 45_000);
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited early (${child.exitCode}):\n${output}`);
    try {
      const response = await fetch(`${origin}/healthz`);
      if (response.status === 200) break;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`server did not become healthy:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 150));
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
  return { origin, output: () => output, stop, kill, signal, exited: exitCode };
}
