import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const wrangler = fileURLToPath(new URL('../../node_modules/.bin/wrangler', import.meta.url));

/** `Total Upload: 2395.98 KiB / gzip: 438.00 KiB` -> bytes of the gzipped bundle. */
export function gzipBytes(output: string): number {
  const match = /gzip:\s*([\d.]+)\s*(KiB|MiB|B)/.exec(output);
  if (!match) throw new Error(`no bundle size in wrangler output:\n${output}`);
  const scale = match[2] === 'MiB' ? 1024 * 1024 : match[2] === 'KiB' ? 1024 : 1;
  return Number(match[1]) * scale;
}

it.each([
  ['Total Upload: 2395.98 KiB / gzip: 438.00 KiB', 438 * 1024],
  ['Total Upload: 3.10 MiB / gzip: 1.20 MiB', 1.2 * 1024 * 1024],
])('reads the gzip size from %j', (line, bytes) => {
  expect(gzipBytes(line)).toBeCloseTo(bytes);
});

it('`wrangler deploy --dry-run` builds the worker under 1 MiB gzipped', async () => {
  const outdir = await mkdtemp(join(tmpdir(), 'tailgate-dist-'));
  try {
    const { stdout, stderr } = await run(wrangler, ['deploy', '--dry-run', '--outdir', outdir], {
      cwd: root,
      env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: '1' },
      timeout: 120_000,
    });
    const size = gzipBytes(stdout + stderr);
    console.log(`worker bundle: ${(size / 1024).toFixed(1)} KiB gzipped`);
    expect(size).toBeGreaterThan(10 * 1024);
    expect(size).toBeLessThan(1024 * 1024);
  } finally {
    await rm(outdir, { recursive: true, force: true });
  }
}, 120_000);
