import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { builtFile, inspectorScript } from '../../functions/local-server.ts';
import { MemoryStore } from '../../lib/store/memory.ts';

// The inspector's script is a built file (.assets/ui/app.js, `npm run assets`): a Node or Deno
// server started without it answers /ui/app.js 503 saying how to build it, never a 500, and
// serves it once it is built.
const directory = await mkdtemp(join(tmpdir(), 'tailgate-inspector-script-'));
afterAll(() => rm(directory, { recursive: true, force: true }));

function appWith(script: () => Promise<Uint8Array<ArrayBuffer>>) {
  const store = new MemoryStore();
  const app = createApp({ store: () => store, readEnvironment: () => ({}), inspectorScript: script });
  return (path: string) => app.request(path);
}

describe('GET /ui/app.js', () => {
  it('answers 503 not_configured naming `npm run assets` while the script is not built, then serves it', async () => {
    const path = join(directory, 'app.js');
    const get = appWith(builtFile(path, '.assets/ui/app.js', 'npm run assets'));
    const missing = await get('/ui/app.js');
    expect(missing.status).toBe(503);
    const body = (await missing.json()) as { error: { code: string; message: string; details: unknown } };
    expect(body.error).toEqual({
      code: 'not_configured',
      message: '.assets/ui/app.js is not built: run `npm run assets` and reload',
      details: { file: '.assets/ui/app.js', build: 'npm run assets' },
    });
    // The page itself does not need the script.
    expect((await get('/ui')).status).toBe(200);

    await writeFile(path, 'console.log("inspector");');
    const built = await get('/ui/app.js');
    expect(built.status).toBe(200);
    expect(built.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(await built.text()).toBe('console.log("inspector");');
  });

  it('serves the bundle the servers read, once built', async () => {
    const response = await appWith(inspectorScript)('/ui/app.js');
    expect(response.status).toBe(200);
    const bundle = await readFile(new URL('../../.assets/ui/app.js', import.meta.url), 'utf8');
    expect(await response.text()).toBe(bundle);
  });
});
