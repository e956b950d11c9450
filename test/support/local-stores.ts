import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { FileStore } from '../../lib/store/file.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';

/**
 * The memory store and the file store, for `describe.each`: each call of a maker is a new
 * empty store (a file store in a folder of its own under a temporary one named after `name`,
 * removed after the test file).
 */
export async function memoryAndFileStores(name: string): Promise<[string, () => ObjectStore][]> {
  const directory = await mkdtemp(join(tmpdir(), `tailgate-${name}-`));
  afterAll(() => rm(directory, { recursive: true, force: true, maxRetries: 5 }));
  return [
    ['memory', () => new MemoryStore()],
    ['file store', () => new FileStore(join(directory, crypto.randomUUID()))],
  ];
}
