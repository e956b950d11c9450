import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * scripts/check-imports.mjs, which `npm run lint` runs: no import cycle in lib/ and functions/,
 * the layers followed through any chain of imports (the session log never reaches the
 * strategies, lib/ never reaches functions/, the strategies reach no storage, turn or facade),
 * and lib/inbox/ entered through its index.ts alone.
 */

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const script = join(root, 'scripts', 'check-imports.mjs');
const directories: string[] = [];
afterAll(() => Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true }))));

async function tree(files: Record<string, string>): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), 'tailgate-imports-'));
  directories.push(directory);
  for (const [name, content] of Object.entries(files)) {
    await mkdir(dirname(join(directory, name)), { recursive: true });
    await writeFile(join(directory, name), content);
  }
  return directory;
}

async function check(directory: string): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [script, directory]);
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, output: failed.stdout + failed.stderr };
  }
}

describe('the import check', () => {
  it('passes on this repository', async () => {
    expect(await check(root)).toEqual({ code: 0, output: '' });
  });

  it('passes on a tree that follows the layers', async () => {
    const directory = await tree({
      'lib/items.ts': 'export type Item = string;\n',
      'lib/session/log.ts': "import type { Item } from '../items.ts';\nexport const log: Item[] = [];\n",
      'lib/strategies/s.ts': "import type { Item } from '../items.ts';\nexport const s = (items: Item[]) => items;\n",
      'lib/turn/pipeline.ts': "import { log } from '../session/log.ts';\nimport { s } from '../strategies/s.ts';\n",
      'functions/app.ts': "import '../lib/turn/pipeline.ts';\n",
    });
    expect(await check(directory)).toEqual({ code: 0, output: '' });
  });

  it('finds a cycle through type-only, re-exported and dynamic imports', async () => {
    const directory = await tree({
      'lib/turn/a.ts': "import type { B } from './b.ts';\nexport type A = B[];\n",
      'lib/turn/b.ts': "export { c } from './c.ts';\nexport type B = string;\n",
      'lib/turn/c.ts': "export const c = () => import('./a.ts');\n",
      'lib/turn/d.ts': "import type { A } from './a.ts';\n",
    });
    const { code, output } = await check(directory);
    expect(code).toBe(1);
    expect(output).toBe('import cycle: lib/turn/a.ts, lib/turn/b.ts, lib/turn/c.ts\n1 import problem\n');
  });

  it('finds a layering breach made through a file of another layer', async () => {
    const directory = await tree({
      'lib/config.ts': "import { names } from './strategies/registry.ts';\nexport const DEFAULTS = { names };\n",
      'lib/strategies/registry.ts': 'export const names = [];\n',
      'lib/session/log/context.ts': "import { DEFAULTS } from '../../config.ts';\n",
      'lib/strategies/dispatch.ts': "import '../session/log/context.ts';\n",
      'lib/items.ts': "import type { AppEnv } from '../functions/router.ts';\n",
      'functions/router.ts': 'export type AppEnv = {};\n',
    });
    const { code, output } = await check(directory);
    expect(code).toBe(1);
    expect(output.split('\n')).toEqual([
      'layering: lib/items.ts -> functions/router.ts',
      'layering: lib/session/log/context.ts -> lib/config.ts -> lib/strategies/registry.ts',
      'layering: lib/strategies/dispatch.ts -> lib/session/log/context.ts',
      '3 import problems',
      '',
    ]);
  });

  it('finds an import of lib/inbox/ that does not go through its index.ts', async () => {
    const directory = await tree({
      'lib/inbox/index.ts': "export { Inbox } from './inbox.ts';\n",
      'lib/inbox/inbox.ts': "import { move } from './move.ts';\nexport class Inbox {}\n",
      'lib/inbox/move.ts': 'export const move = 1;\n',
      'lib/turn/notices.ts': "import { Inbox } from '../inbox/index.ts';\nimport { move } from '../inbox/move.ts';\n",
    });
    const { code, output } = await check(directory);
    expect(code).toBe(1);
    expect(output).toBe('not through its entry: lib/turn/notices.ts -> lib/inbox/move.ts\n1 import problem\n');
  });
});
