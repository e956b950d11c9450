import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { DOCS_SCRIPT_PATH } from '../../functions/docs-page.ts';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const check = fileURLToPath(new URL('../support/docs-offline-check.ts', import.meta.url));
const scalarVersion = (
  await import('../../node_modules/@scalar/api-reference/package.json', { with: { type: 'json' } })
).default.version;
const pinned = (await import('../../package.json', { with: { type: 'json' } })).default.dependencies[
  '@scalar/api-reference'
];

it('pins the docs bundle to one exact version', () => {
  expect(pinned).toMatch(/^\d+\.\d+\.\d+$/);
  expect(scalarVersion).toBe(pinned);
});

it('serves /docs with the network unavailable: no token, every asset 200 from the service itself', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tailgate-docs-'));
  try {
    // A new network namespace holds only loopback: nothing outside the machine answers.
    const command = `ip link set lo up && exec "${process.execPath}" --import tsx "${check}"`;
    const { stdout } = await run('unshare', ['-rn', 'sh', '-c', command], {
      cwd: root,
      env: { ...process.env, DATA_DIR: dataDir, API_TOKEN: 'docs-token' },
      timeout: 60_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    const result = JSON.parse(stdout.trim().split('\n').at(-1)!);
    expect(result.outsideReachable).toBe(false);
    expect(result.status).toBe(200);
    expect(result.type).toMatch(/text\/html/);
    // The embedded OpenAPI document, and no URL pointing anywhere but the service.
    expect(result.html).toContain('/v1/sessions/{id}/turns');
    expect(result.html).not.toMatch(/https?:\/\//);
    expect(result.assets.map((asset: { reference: string }) => asset.reference)).toContain(DOCS_SCRIPT_PATH);
    for (const asset of result.assets) {
      expect(asset).toMatchObject({ origin: 'http://127.0.0.1:18787', status: 200 });
      expect(asset.bytes).toBeGreaterThan(0);
    }
    const script = result.assets.find((asset: { reference: string }) => asset.reference === DOCS_SCRIPT_PATH);
    expect(script.type).toMatch(/javascript/);
    expect(script.bytes).toBeGreaterThan(1_000_000);
    // PUBLIC_DOCS (default true) opens the document too; the API still needs the token.
    expect(result.openapiStatus).toBe(200);
    expect(result.sessionStatus).toBe(401);
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}, 90_000);
