import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { startServer } from '../support/server-process.ts';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const directories: string[] = [];

afterAll(async () => {
  await Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true })));
});

/** A working directory with local state, as `npm start` and the Node server leave it. */
async function workingDirectory(): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), 'tailgate-reset-'));
  directories.push(directory);
  await mkdir(join(directory, '.tailgate', 'data'), { recursive: true });
  await mkdir(join(directory, '.wrangler', 'state'), { recursive: true });
  await writeFile(join(directory, '.wrangler', 'state', 'bucket'), 'state');
  return directory;
}

/** `npm run reset`'s script in `directory`: its exit code and output. */
async function reset(directory: string): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [join(root, 'scripts', 'reset.mjs')], { cwd: directory });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, output: failed.stdout + failed.stderr };
  }
}

describe('npm run reset', () => {
  it('removes the local state when no live server marked itself, a dead one’s marker included', async () => {
    const directory = await workingDirectory();
    await mkdir(join(directory, '.tailgate', 'servers'), { recursive: true });
    // A server killed with SIGKILL (pid 2^22 + 1 is above Linux's pid_max) left its marker.
    await writeFile(join(directory, '.tailgate', 'servers', String(2 ** 22 + 1)), 'Node server on http://127.0.0.1:1');
    expect(await reset(directory)).toMatchObject({ code: 0 });
    expect(existsSync(join(directory, '.tailgate'))).toBe(false);
    expect(existsSync(join(directory, '.wrangler', 'state'))).toBe(false);
  });

  it('says what it removed, or that there was nothing to remove', async () => {
    const both = await workingDirectory();
    expect(await reset(both)).toEqual({ code: 0, output: 'tailgate: removed .wrangler/state and .tailgate\n' });
    expect(await reset(both)).toEqual({
      code: 0,
      output: 'tailgate: nothing to remove (no .wrangler/state or .tailgate)\n',
    });
    const node = await workingDirectory();
    await rm(join(node, '.wrangler'), { recursive: true });
    expect(await reset(node)).toEqual({ code: 0, output: 'tailgate: removed .tailgate\n' });
    expect(existsSync(join(node, '.tailgate'))).toBe(false);
    const workers = await workingDirectory();
    await rm(join(workers, '.tailgate'), { recursive: true });
    expect(await reset(workers)).toEqual({ code: 0, output: 'tailgate: removed .wrangler/state\n' });
    expect(existsSync(join(workers, '.wrangler', 'state'))).toBe(false);
  });

  it('names every live server when several use the directory, in a sentence that agrees with them', async () => {
    const directory = await workingDirectory();
    await mkdir(join(directory, '.tailgate', 'servers'), { recursive: true });
    // Two live processes stand for two servers: this one and its parent.
    await writeFile(join(directory, '.tailgate', 'servers', String(process.pid)), 'Node server on http://127.0.0.1:1');
    await writeFile(join(directory, '.tailgate', 'servers', String(process.ppid)), 'Deno server on http://127.0.0.1:2');
    const refused = await reset(directory);
    expect(refused.code).toBe(1);
    expect(refused.output).toMatch(/Node server on http:\/\/127\.0\.0\.1:1 \(pid \d+\)/);
    expect(refused.output).toMatch(/Deno server on http:\/\/127\.0\.0\.1:2 \(pid \d+\)/);
    expect(refused.output).toContain(' are using this directory; stop them first');
    expect(existsSync(join(directory, '.wrangler', 'state', 'bucket'))).toBe(true);
  });

  it('refuses while a Node server runs in the directory, naming it, and resets once it stopped', async () => {
    const directory = await workingDirectory();
    const server = await startServer(process.execPath, [join(root, 'functions', 'node.ts'), '--port', '0'], {
      cwd: directory,
      env: { API_TOKEN: 'reset-token' },
    });
    try {
      expect(await readdir(join(directory, '.tailgate', 'servers'))).toHaveLength(1);
      const refused = await reset(directory);
      expect(refused.code).toBe(1);
      expect(refused.output).toContain(`not resetting: Node server on ${server.origin}`);
      expect(existsSync(join(directory, '.wrangler', 'state', 'bucket'))).toBe(true);
    } finally {
      await server.stop();
    }
    // It removed its marker as it stopped.
    expect(await readdir(join(directory, '.tailgate', 'servers'))).toEqual([]);
    expect(await reset(directory)).toMatchObject({ code: 0 });
    expect(existsSync(join(directory, '.tailgate'))).toBe(false);
  }, 90_000);
});
