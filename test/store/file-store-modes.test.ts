import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FileStore } from '../../lib/store/file.ts';

// docs/SECURITY.md, "What the operator keeps secret": whoever can read the file store reads every
// conversation, so what the store makes is the service user's alone, whatever the umask lets
// other users of the machine read (022, the usual one, gives them files and directories).
const parent = await mkdtemp(join(tmpdir(), 'tailgate-modes-'));

afterAll(async () => {
  await rm(parent, { recursive: true, force: true });
});

/** Every path under `root`, itself included, with its permission bits. */
async function modes(root: string): Promise<{ path: string; mode: number }[]> {
  const found = [{ path: root, mode: (await stat(root)).mode & 0o777 }];
  for (const entry of await readdir(root, { recursive: true })) {
    const path = join(root, entry);
    found.push({ path, mode: (await stat(path)).mode & 0o777 });
  }
  return found;
}

describe('the file store', () => {
  it('makes its directories and objects readable by its own user only', async () => {
    const root = join(parent, 'data');
    const store = new FileStore(root);
    await store.put('sessions/s1/session.json', '{"secret":true}');
    await store.put('sessions/s1/log/0001', 'history', { onlyIfAbsent: true });
    await store.put('top-level', 'x');
    const found = await modes(root);
    const shared = found.filter((entry) => (entry.mode & 0o077) !== 0);
    expect(shared.map((entry) => `${entry.path.slice(root.length)} ${entry.mode.toString(8)}`)).toEqual([]);
    // The root, sessions/, s1/, log/ and the three objects.
    expect(found.length).toBeGreaterThanOrEqual(7);
  });
});
