import { accessSync, constants } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

/**
 * New directories for a file-store simulation, named `prefix` and a random part, removed once
 * the calling file's tests end. In memory where the machine has a tmpfs (/dev/shm on Linux): the
 * simulations crash processes, not the machine, so what fsync buys (surviving a power loss) is
 * not what they check, and fsyncs to a disk were most of their time; links, renames and
 * create-only opens behave the same.
 */
export function simulationDirectories(prefix: string): () => Promise<string> {
  const directories: string[] = [];
  afterAll(async () => {
    await Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true })));
  });
  const base = (() => {
    try {
      accessSync('/dev/shm', constants.W_OK);
      return '/dev/shm';
    } catch {
      return tmpdir();
    }
  })();
  return async () => {
    const directory = await mkdtemp(join(base, prefix));
    directories.push(directory);
    return directory;
  };
}
