import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { FileStore } from '../../lib/store/file.ts';
import { root, serverCommand } from './runtime-process.ts';

const run = promisify(execFile);
const script = fileURLToPath(new URL('../support/file-store-dead-lock.ts', import.meta.url));

// `npm run start:deno`'s permissions: no --allow-run (no signals to other processes) and no
// --allow-all (no /proc). A server SIGKILLed while it held a key's lock leaves the lock file;
// the server restarted on the directory must take it for a dead process's at once, not wait
// 60 s for it to go stale (a delivered webhook's outbox entry outlived the restart that way).
it("Deno: a lock left by a process that is gone is broken at once, and a live process's is not", async () => {
  const directory = await mkdtemp(join(tmpdir(), 'tailgate-deno-locks-'));
  try {
    const store = new FileStore(directory);
    await store.put('k/deleted', 'delivered');
    // Pid 2^22 + 1 is above Linux's pid_max limit: no process has it.
    const dead = 2 ** 22 + 1;
    await mkdir(join(directory, 'k~d'), { recursive: true });
    for (const name of ['deleted', 'put'])
      await writeFile(join(directory, 'k~d', `${name}~l`), `${dead} 0123456789abcdef`);
    const [deno] = serverCommand('Deno', 0);
    const permissions = ['--allow-env', '--allow-read', '--allow-write', '--allow-sys'];
    const { stdout } = await run(deno, ['run', ...permissions, script, directory, String(dead), String(process.pid)], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', DENO_NO_UPDATE_CHECK: '1' },
      timeout: 60_000,
    });
    expect(JSON.parse(stdout)).toEqual({ deadAlive: false, liveAlive: true, deleted: 'written', put: 'written' });
    expect(await store.head('k/deleted')).toBeNull();
    expect(await readdir(join(directory, 'k~d'))).toEqual(['put~o']);
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}, 90_000);
