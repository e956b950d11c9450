import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { root, serverCommand } from './runtime-process.ts';

/**
 * A Node server whose DATA_DIR the file store cannot work in refuses to start, with one line
 * naming DATA_DIR and why, and exit code 1; it neither hangs (Node's recursive mkdir loops
 * forever under /proc) nor listens.
 */

let scratch: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'tailgate-data-dir-'));
});

afterAll(async () => {
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

/** Runs the Node server with `dataDir`; its exit code and output, or `hung` when it is still running after 45 s. */
async function start(dataDir: string): Promise<{ code: number | null | 'hung'; output: string }> {
  const [command, args] = serverCommand('Node', 0);
  const child = spawn(command, args, {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', DATA_DIR: dataDir, ALLOW_ANONYMOUS: 'true' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  let hung = false;
  const timer = setTimeout(() => {
    hung = true;
    child.kill('SIGKILL');
  }, 45_000);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)));
  clearTimeout(timer);
  return { code: hung ? 'hung' : code, output };
}

it('DATA_DIR under /proc: the server exits 1 at start, naming DATA_DIR', async () => {
  const dataDir = `/proc/tailgate-${process.pid}/data`;
  const { code, output } = await start(dataDir);
  expect(code, output).toBe(1);
  expect(output).toMatch(new RegExp(`^tailgate: DATA_DIR ${dataDir} cannot hold the file store: .*ENOENT`, 'm'));
  expect(output).not.toContain('http://');
}, 60_000);

it('DATA_DIR below a regular file: the server exits 1 at start, naming DATA_DIR', async () => {
  const file = join(scratch, 'a-file');
  await writeFile(file, 'not a directory');
  const { code, output } = await start(join(file, 'data'));
  expect(code, output).toBe(1);
  expect(output).toMatch(/^tailgate: DATA_DIR .*a-file\/data cannot hold the file store: .*ENOTDIR/m);
}, 60_000);
