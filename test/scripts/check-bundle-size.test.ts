import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, expect, it } from 'vitest';

const run = promisify(execFile);
const script = fileURLToPath(new URL('../../scripts/check-bundle-size.mjs', import.meta.url));
const directories: string[] = [];
afterAll(() => Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true }))));

async function bundle(files: Record<string, Uint8Array | string>): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), 'tailgate-bundle-'));
  directories.push(directory);
  for (const [name, content] of Object.entries(files)) await writeFile(join(directory, name), content);
  return directory;
}

async function check(directory: string, ...extra: string[]): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [script, directory, ...extra]);
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, output: failed.stdout + failed.stderr };
  }
}

it('prints the gzipped size of the modules, source maps aside, and passes within the budget', async () => {
  // 40 KiB of random bytes (incompressible) in the module, a map that would be over budget.
  const directory = await bundle({
    'worker.js': randomBytes(40 * 1024).toString('base64'),
    'worker.js.map': randomBytes(200 * 1024),
    'README.md': 'x',
  });
  const { code, output } = await check(directory, '--budget-kib=60');
  expect(output).toMatch(
    /^worker bundle: 53\.3 KiB, (4\d\.\d) KiB gzipped \(1 module\); budget 60 KiB gzipped: within$/m,
  );
  expect(code).toBe(0);
});

it('fails above the budget', async () => {
  const directory = await bundle({
    'worker.js': randomBytes(40 * 1024).toString('base64'),
    'chunk.mjs': randomBytes(10 * 1024).toString('base64'),
  });
  const { code, output } = await check(directory, '--budget-kib=40');
  expect(output).toMatch(/\(2 modules\); budget 40 KiB gzipped: OVER$/m);
  expect(code).toBe(1);
});

it('fails when there is nothing built', async () => {
  const { code, output } = await check(await bundle({ 'README.md': 'x' }));
  expect(output).toContain('build it first with npm run build');
  expect(code).toBe(2);
});
