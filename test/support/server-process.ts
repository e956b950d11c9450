import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';

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
