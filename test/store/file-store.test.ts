import { execFile, spawn } from 'node:child_process';
import { createHook } from 'node:async_hooks';
import { link, mkdtemp, readdir, readFile, rm, stat, writeFile, mkdir, symlink } from 'node:fs/promises';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { StorageError } from '../../lib/errors.ts';
import { sha256Hex } from '../../lib/hash.ts';
import { FileStore } from '../../lib/store/file.ts';
import { ascending } from '../../lib/store/file-listing.ts';
import { tempName, withKeyLock } from '../../lib/store/file-lock.ts';
import { compareKeys, type ListResult } from '../../lib/store/object-store.ts';
import { requireConditionalWrites } from '../../lib/store/write-probe.ts';
import { compareBytes, defineObjectStoreConformance, listAll } from './object-store-conformance.ts';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const contender = fileURLToPath(new URL('../support/file-store-contender.ts', import.meta.url));
const directories: string[] = [];

async function freshDirectory(): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), 'tailgate-file-store-'));
  directories.push(directory);
  return directory;
}

afterAll(async () => {
  await Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true })));
});

defineObjectStoreConformance('file system', async () => new FileStore(await freshDirectory()), 'of each put');

/** The calls of node:fs the tests below wrap. */
interface FsHooks {
  fsync: (fd: number, callback: (error: Error | null) => void) => void;
  fstatSync: (fd: number) => { ino: number; isDirectory(): boolean };
  statSync: (path: string, options: { throwIfNoEntry: false }) => { nlink: number } | undefined;
  linkSync: (from: string, to: string) => void;
  renameSync: (from: string, to: string) => void;
  unlinkSync: (path: string) => void;
  unlink: (path: string, callback: (error: Error | null) => void) => void;
  openSync: (path: string, flags?: string) => number;
  writevSync: (fd: number, buffers: readonly Uint8Array[], position?: number) => number;
  writeSync: (fd: number, buffer: Uint8Array, offset: number, length: number, position: number) => number;
}

/**
 * Makes node:fs's fsyncs of files or of directories fail with `code` until the returned function
 * is called (the store's named imports follow through syncBuiltinESMExports).
 */
function failFsyncs(of: 'file' | 'directory', code: string): () => void {
  const fs = createRequire(import.meta.url)('node:fs') as FsHooks;
  const fsync = fs.fsync;
  fs.fsync = (fd, callback) => {
    if (fs.fstatSync(fd).isDirectory() !== (of === 'directory')) return fsync(fd, callback);
    setTimeout(() => callback(Object.assign(new Error(`${code}: fsync failed`), { code })), 5);
  };
  syncBuiltinESMExports();
  return () => {
    fs.fsync = fsync;
    syncBuiltinESMExports();
  };
}

async function filesUnder(directory: string): Promise<string[]> {
  return (await readdir(directory, { recursive: true })).map(String);
}

describe('FileStore', () => {
  it('lists any set of keys (empty segments, case, non-ASCII) in UTF-8 byte order, paged, after puts and deletes ' +
    '(property)', async () => {
    const key = fc.string({
      unit: fc.constantFrom('a', 'B', 'b', '/', '0', '.', '_', '~', '%', 'é', '\u{FB00}', '\u{1D11E}', '\u{FFFF}'),
      maxLength: 4,
    });
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(key, { maxLength: 20 }),
        fc.array(fc.nat(19), { maxLength: 8 }),
        fc.constantFrom('', 'a', '/', 'é', 'B/'),
        fc.integer({ min: 1, max: 7 }),
        async (keys, deletions, prefix, limit) => {
          const store = new FileStore(await freshDirectory());
          for (const name of keys) expect(await store.put(name, name)).not.toBeNull();
          const deleted = new Set(deletions.flatMap((index) => (index < keys.length ? [keys[index]!] : [])));
          await store.delete([...deleted]);
          const expected = keys.filter((name) => name.startsWith(prefix) && !deleted.has(name)).sort(compareBytes);
          const { keys: listed, pages } = await listAll(store, prefix, limit);
          for (const page of pages) expect(page.objects.length).toBeLessThanOrEqual(limit);
          expect(listed).toEqual(expected);
          for (const name of expected) expect(new TextDecoder().decode((await store.get(name))!.body)).toBe(name);
        },
      ),
      { numRuns: 40 },
    );
  }, 60_000);

  it('keeps "Demo" and "demo" apart (upper case is escaped for case-insensitive file systems)', async () => {
    const store = new FileStore(await freshDirectory());
    await store.put('sessions/Demo/session.json', 'upper');
    expect(await store.put('sessions/demo/session.json', 'lower', { onlyIfAbsent: true })).not.toBeNull();
    expect(new TextDecoder().decode((await store.get('sessions/Demo/session.json'))!.body)).toBe('upper');
    expect((await store.list('sessions/')).objects.map((object) => object.key)).toEqual([
      'sessions/Demo/session.json',
      'sessions/demo/session.json',
    ]);
  });

  it('passes the write probe', async () => {
    await expect(
      requireConditionalWrites(new FileStore(await freshDirectory()), { keyPrefix: '' }),
    ).resolves.toBeUndefined();
  });

  it('removes emptied directories on delete and leaves no lock or temp files behind', async () => {
    const directory = await freshDirectory();
    const store = new FileStore(directory);
    await store.put('a/b/c/one', '1');
    await store.put('a/b/two', '2', { onlyIfAbsent: true });
    const etag = (await store.head('a/b/two'))!.etag;
    await store.put('a/b/two', '3', { ifMatch: etag });
    expect((await filesUnder(directory)).filter((name) => /~[lt]/.test(name))).toEqual([]);
    await store.delete(['a/b/c/one', 'a/b/missing', 'x/y/missing']);
    expect(await filesUnder(directory)).toEqual(['a~d', join('a~d', 'b~d'), join('a~d', 'b~d', 'two~o')]);
    await store.delete('a/b/two');
    expect(await filesUnder(directory)).toEqual([]);
  });

  it('breaks a lock left by a process that is gone, and waits for a live one', async () => {
    const directory = await freshDirectory();
    const store = new FileStore(directory, { lockTimeoutMs: 400 });
    await mkdir(join(directory, 'k~d'), { recursive: true });
    // A dead process (pid 2^22 + 1 is above Linux's pid_max limit) held the lock of k/dead.
    await writeFile(join(directory, 'k~d', 'dead~l'), `${2 ** 22 + 1} 0123456789abcdef`);
    expect(await store.put('k/dead', 'taken over', { onlyIfAbsent: true })).not.toBeNull();
    // This test's own parent holds the lock of k/live: a live process, so the write waits, then fails.
    await writeFile(join(directory, 'k~d', 'live~l'), `${process.ppid} 0123456789abcdef`);
    await expect(store.put('k/live', 'blocked')).rejects.toBeInstanceOf(StorageError);
    // Old enough, even a live pid's lock is taken over (a reused pid cannot wedge a key).
    const impatient = new FileStore(directory, { staleLockMs: 0, lockTimeoutMs: 400 });
    expect(await impatient.put('k/live', 'taken over')).not.toBeNull();
  });

  it("a holder whose lock was broken after its check leaves the next holder's lock in place", async () => {
    const directory = await mkdtemp(join(tmpdir(), 'tailgate-lock-'));
    try {
      const lockPath = join(directory, 'k~l');
      const times = { staleLockMs: 60_000, lockTimeoutMs: 5_000 };
      const answered = await withKeyLock(directory, 'k', 'k', times, new Map(), async (stillHeld) => {
        await stillHeld();
        // Stalled past staleLockMs after its check: another process broke the lock and holds it.
        await rm(lockPath);
        await writeFile(lockPath, 'another holder');
        return 'committed';
      });
      expect(answered).toBe('committed');
      expect(await readFile(lockPath, 'utf8')).toBe('another holder');
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });

  it('breaks a lock of its own pid that it does not hold (a restarted container’s predecessor)', async () => {
    const directory = await freshDirectory();
    await writeFile(join(directory, 'k~l'), `${process.pid} 0123456789abcdef`);
    const store = new FileStore(directory, { lockTimeoutMs: 5000 });
    expect(await store.put('k', 'taken over')).not.toBeNull();
  });

  it('sweeps the temp files of processes that are gone, and of none alive', async () => {
    const directory = await freshDirectory();
    const store = new FileStore(directory);
    await store.put('a/b/object', 'kept');
    const dead = 2 ** 22 + 1;
    const leftovers = [join('a~d', 'b~d', `object~t${dead}-0badf00d`), join('a~d', `x~t${dead}-12345678`)];
    const live = [join('a~d', 'b~d', `object~t${process.ppid}-0badf00d`), join('a~d', `y~t${process.pid}-12345678`)];
    for (const file of [...leftovers, ...live]) await writeFile(join(directory, file), 'partial');
    expect(await store.sweep()).toBe(2);
    const left = await filesUnder(directory);
    for (const file of leftovers) expect(left).not.toContain(file);
    for (const file of live) expect(left).toContain(file);
    expect(new TextDecoder().decode((await store.get('a/b/object'))!.body)).toBe('kept');
  });

  it(
    'a write that fails half way (the file size limit, as a full disk would) leaves the object and no temp ' + 'file',
    async () => {
      const directory = await freshDirectory();
      const store = new FileStore(directory);
      await store.put('k', 'before');
      const script = [
        `import { FileStore } from ${JSON.stringify(join(root, 'lib/store/file.ts'))};`,
        `const store = new FileStore(${JSON.stringify(directory)});`,
        `await store.put('k', new Uint8Array(1 << 20)).then(() => console.log('stored'),`,
        '  (error) => console.log(error.name));',
      ].join('\n');
      // A 64 KiB file size limit, with SIGXFSZ ignored: the write fails with EFBIG part way.
      const { stdout } = await run(
        'bash',
        [
          '-c',
          'trap "" XFSZ; ulimit -f 64; exec "$0" --import tsx --input-type=module -e "$1"',
          process.execPath,
          script,
        ],
        { cwd: root, timeout: 60_000 },
      );
      expect(stdout.trim()).toBe('StorageError');
      expect(new TextDecoder().decode((await store.get('k'))!.body)).toBe('before');
      expect((await filesUnder(directory)).filter((name) => /~[lbt]/.test(name))).toEqual([]);
    },
  );

  it("a listing keeps a settled object's header, read again once another writer replaced or removed it", async () => {
    const directory = await freshDirectory();
    const store = new FileStore(directory);
    const other = new FileStore(directory, { separateQueue: true });
    for (const name of ['a', 'b', 'c', 'd']) await store.put(`k/${name}`, 'same');
    // Settled: a file's header is kept once its ctime is older than the file system's timestamp
    // granularity (a tick on a file system with timestamps finer than a millisecond, else seconds).
    const { ctimeMs } = await stat(join(directory, 'k~d', 'a~o'));
    await new Promise((resolve) => setTimeout(resolve, ctimeMs % 1 !== 0 ? 250 : 3_500));
    const first = await store.list('k/');
    const fs = createRequire(import.meta.url)('node:fs') as FsHooks;
    const openSync = fs.openSync;
    const opened: string[] = [];
    fs.openSync = (path, flags) => {
      opened.push(path.slice(directory.length));
      return openSync(path, flags);
    };
    syncBuiltinESMExports();
    let again: ListResult;
    try {
      again = await store.list('k/');
      expect(opened).toEqual([]);
      // Another process's writes: b replaced by an object of the same size, c deleted, d
      // deleted and created again (its file may take the freed inode's number).
      const replaced = (await other.put('k/b', 'SAME'))!;
      await other.delete(['k/c', 'k/d']);
      const recreated = (await other.put('k/d', 'SAME', { onlyIfAbsent: true }))!;
      opened.length = 0;
      const listed = await store.list('k/');
      expect(listed.objects.map((object) => [object.key, object.etag, object.size])).toEqual([
        ['k/a', first.objects[0]!.etag, 4],
        ['k/b', replaced.etag, 4],
        ['k/d', recreated.etag, 4],
      ]);
      expect(opened).toEqual(['/k~d/b~o', '/k~d/d~o']);
    } finally {
      fs.openSync = openSync;
      syncBuiltinESMExports();
    }
    expect(again).toEqual(first);
  });

  it('a write that meets leftover temp files of its pid under the names it counts to takes the next ones', async () => {
    const directory = await freshDirectory();
    const store = new FileStore(directory);
    await store.put('t/a', 'first');
    // A predecessor with this pid (a restarted container) left files under the next numbers but
    // one: the lock's aside name, the new file and the replaced file's name each meet one.
    const number = Number.parseInt(/-([0-9a-f]{12})$/.exec(tempName('a'))![1]!, 16);
    const leftovers = [1, 3, 5].map((step) => `a~t${process.pid}-${(number + step).toString(16).padStart(12, '0')}`);
    for (const name of leftovers) await writeFile(join(directory, 't~d', name), 'left');
    expect(await store.put('t/a', 'second')).not.toBeNull();
    const created = Number.parseInt(/-([0-9a-f]{12})$/.exec(tempName('b'))![1]!, 16);
    await writeFile(
      join(directory, 't~d', `b~t${process.pid}-${(created + 1).toString(16).padStart(12, '0')}`),
      'left',
    );
    expect(await store.put('t/b', 'new', { onlyIfAbsent: true })).not.toBeNull();
    expect(new TextDecoder().decode((await store.get('t/a'))!.body)).toBe('second');
    expect(new TextDecoder().decode((await store.get('t/b'))!.body)).toBe('new');
    for (const name of leftovers) expect(await readFile(join(directory, 't~d', name), 'utf8')).toBe('left');
    expect((await filesUnder(directory)).filter((name) => /~[lt]/.test(name))).toHaveLength(4);
  });

  it("a delete that meets a dead predecessor's leftover link to the same object still deletes it", async () => {
    const directory = await freshDirectory();
    const store = new FileStore(directory);
    await store.put('t/a', 'body');
    // A predecessor with this pid, killed between a create-only put's link and its temp name's
    // unlink, left a second name of the object file under the number the delete's aside name
    // counts to (the lock's aside name takes the one before).
    const number = Number.parseInt(/-([0-9a-f]{12})$/.exec(tempName('a'))![1]!, 16);
    const leftover = `a~t${process.pid}-${(number + 2).toString(16).padStart(12, '0')}`;
    await link(join(directory, 't~d', 'a~o'), join(directory, 't~d', leftover));
    await store.delete('t/a');
    expect(await store.head('t/a')).toBeNull();
    expect(await store.get('t/a')).toBeNull();
    expect((await store.list('t/', { limit: 10 })).objects).toEqual([]);
  });

  it('gives the smallest items first and the rest after, whatever the order they come in (property)', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.string({ maxLength: 3 })), fc.integer({ min: 1, max: 12 }), (items, need) => {
        const compare = (a: string, b: string) => compareKeys(a, b);
        expect([...ascending([...items], compare, need)]).toEqual([...items].sort(compare));
      }),
    );
  });

  it("reads a listing's directories and headers without a thread-pool request", async () => {
    const store = new FileStore(await freshDirectory());
    for (let index = 0; index < 120; index++) await store.put(`s/turn/${String(index).padStart(3, '0')}`, '');
    for (let index = 0; index < 30; index++) await store.put(`s/turn/sub/${index}`, 'x'.repeat(index * 300));
    const requests: string[] = [];
    const hook = createHook({
      init(_id, type) {
        if (type.startsWith('FSREQ')) requests.push(type);
      },
    });
    hook.enable();
    let listed: ListResult;
    try {
      listed = await store.list('s/turn/');
    } finally {
      hook.disable();
    }
    expect(listed.objects).toHaveLength(150);
    expect(listed.objects.find((object) => object.key === 's/turn/sub/29')?.size).toBe(29 * 300);
    // The two directories and the 150 headers read synchronously: through the thread pool, each
    // waited behind the fsyncs of the puts in flight (the headers' open, stat, read and close
    // were 452 requests here, the directories 2 more).
    expect(requests).toEqual([]);
  });

  it('reads the quoted etag of an object written before etags were canonical as the canonical one', async () => {
    const root = await freshDirectory();
    const store = new FileStore(root);
    const put = (await store.put('q/old', 'body'))!;
    const [file] = (await readdir(root, { recursive: true })).filter((name) => name.endsWith('~o'));
    const path = join(root, file!);
    const text = await readFile(path, 'utf8');
    await writeFile(path, text.replace(`"e":"${put.etag}"`, `"e":"\\"${put.etag}\\""`));
    expect(await readFile(path, 'utf8')).toContain(`"e":"\\"${put.etag}\\""`);
    expect((await store.head('q/old'))?.etag).toBe(put.etag);
    expect((await store.list('q/')).objects[0]?.etag).toBe(put.etag);
    expect(await store.put('q/old', 'new body', { ifMatch: (await store.get('q/old'))!.etag })).not.toBeNull();
  });

  it('reads a header longer than one read (4 KiB) whole, through head, get and list alike', async () => {
    const store = new FileStore(await freshDirectory());
    const metadata = { a: 'x'.repeat(5000), b: 'y'.repeat(4000) };
    await store.put('h/long', 'body', { metadata });
    await store.put('h/short', 'other', { metadata: { c: 'z' } });
    expect((await store.head('h/long'))?.metadata).toEqual(metadata);
    const got = (await store.get('h/long'))!;
    expect([got.metadata, new TextDecoder().decode(got.body)]).toEqual([metadata, 'body']);
    const listed = (await store.list('h/')).objects;
    expect(listed.map((object) => [object.key, object.metadata])).toEqual([
      ['h/long', metadata],
      ['h/short', { c: 'z' }],
    ]);
  });

  it('a put and a delete use the thread pool for fsyncs and freeing a replaced file, a get not at all', async () => {
    const store = new FileStore(await freshDirectory());
    await store.put('s/turn/a', 'first');
    const requests: string[] = [];
    const hook = createHook({
      init(_id, type) {
        if (type.startsWith('FSREQ')) requests.push(type);
      },
    });
    hook.enable();
    try {
      // An overwrite (rename), a create-only put (link), a get and a delete: each with its lock.
      expect(await store.put('s/turn/a', 'second')).not.toBeNull();
      expect(await store.put('s/turn/b', 'new', { onlyIfAbsent: true })).not.toBeNull();
      expect(new TextDecoder().decode((await store.get('s/turn/a'))!.body)).toBe('second');
      await store.delete('s/turn/b');
    } finally {
      hook.disable();
    }
    // Each put's two fsyncs: its temp file's, and its directory's once the name is linked or
    // renamed; the delete's one, of its directory (without them a power loss could take back an
    // acknowledged put or delete); the overwrite's and the delete's unlink of the file they
    // replaced or removed, kept under a temp name. Through the thread pool, a put's lock file, temp
    // file, link or rename and unlinks were 16 requests, each waiting behind the fsyncs of the
    // other puts in flight.
    expect(requests).toEqual(Array(7).fill('FSREQCALLBACK'));
  });

  it("an overwrite and a delete never drop an object file's last name on the event loop", async () => {
    const directory = await freshDirectory();
    const store = new FileStore(directory);
    await store.put('d/a', 'first');
    await store.put('d/b', 'other');
    // Dropping a file's last name frees its blocks, which waits on the file system's journal
    // (milliseconds while fsyncs run): that is left to the thread pool.
    const fs = createRequire(import.meta.url)('node:fs') as FsHooks;
    const saved = { unlinkSync: fs.unlinkSync, renameSync: fs.renameSync };
    const lastNames: string[] = [];
    const check = (path: string) => {
      const links = fs.statSync(path, { throwIfNoEntry: false })?.nlink;
      if (path.endsWith('~o') && links === 1) lastNames.push(path.slice(directory.length));
    };
    fs.unlinkSync = (path) => {
      check(path);
      saved.unlinkSync(path);
    };
    fs.renameSync = (from, to) => {
      check(to);
      saved.renameSync(from, to);
    };
    syncBuiltinESMExports();
    try {
      expect(await store.put('d/a', 'second')).not.toBeNull();
      await store.delete(['d/a', 'd/b']);
    } finally {
      Object.assign(fs, saved);
      syncBuiltinESMExports();
    }
    expect(lastNames).toEqual([]);
    expect(await store.list('d/')).toMatchObject({ objects: [] });
    expect((await filesUnder(directory)).filter((name) => /~[lbt]/.test(name))).toEqual([]);
  });

  it('a delete fsyncs its directory while the removed file is freed, not once it is', async () => {
    const directory = await freshDirectory();
    const store = new FileStore(directory);
    await store.put('d/a', 'first');
    await store.put('d/b', 'other');
    const fs = createRequire(import.meta.url)('node:fs') as FsHooks;
    const saved = { fsync: fs.fsync, unlink: fs.unlink };
    const events: string[] = [];
    fs.fsync = (fd, callback) => {
      if (fs.fstatSync(fd).isDirectory()) events.push('directory fsync begun');
      saved.fsync(fd, callback);
    };
    fs.unlink = (path, callback) =>
      saved.unlink(path, (error) => {
        events.push('file freed');
        callback(error);
      });
    syncBuiltinESMExports();
    try {
      await store.delete('d/a');
    } finally {
      Object.assign(fs, saved);
      syncBuiltinESMExports();
    }
    // Each a thread-pool round trip: the second began once the first ended, both on the delete's way.
    expect(events).toEqual(['directory fsync begun', 'file freed']);
    expect(await store.list('d/')).toMatchObject({ objects: [{ key: 'd/b' }] });
    expect((await filesUnder(directory)).filter((name) => /~[lbt]/.test(name))).toEqual([]);
  });

  it('a temp file whose fsync fails fails the put (create-only or not) with StorageError and is removed', async () => {
    const directory = await freshDirectory();
    const store = new FileStore(directory);
    await store.put('d/a', 'first');
    const restore = failFsyncs('file', 'ENOSPC');
    try {
      await expect(store.put('d/b', 'new', { onlyIfAbsent: true })).rejects.toBeInstanceOf(StorageError);
      await expect(store.put('d/c', 'new')).rejects.toBeInstanceOf(StorageError);
      await expect(store.put('d/a', 'second')).rejects.toBeInstanceOf(StorageError);
    } finally {
      restore();
    }
    expect((await store.list('d/')).objects.map((object) => object.key)).toEqual(['d/a']);
    expect(new TextDecoder().decode((await store.get('d/a'))!.body)).toBe('first');
    expect((await filesUnder(directory)).filter((name) => /~[lbt]/.test(name))).toEqual([]);
  });

  it('a put both create-only and If-Match goes through the lock and writes nothing, present or absent', async () => {
    const store = new FileStore(await freshDirectory());
    expect(await store.put('d/a', 'x', { onlyIfAbsent: true, ifMatch: '"1-0"' })).toBeNull();
    const written = (await store.put('d/b', 'first'))!;
    expect(await store.put('d/b', 'second', { onlyIfAbsent: true, ifMatch: written.etag })).toBeNull();
    expect((await store.list('d/')).objects.map((object) => [object.key, object.etag])).toEqual([
      ['d/b', written.etag],
    ]);
  });

  it('a create whose temp file cannot be made, its directory made again, fails with StorageError', async () => {
    const store = new FileStore(await freshDirectory());
    const fs = createRequire(import.meta.url)('node:fs') as FsHooks;
    const openSync = fs.openSync;
    let attempts = 0;
    fs.openSync = (path, flags) => {
      if (flags !== 'wx' || !path.includes('~t')) return openSync(path, flags);
      attempts += 1;
      throw Object.assign(new Error(`ENOENT: no such file or directory, open '${path}'`), { code: 'ENOENT' });
    };
    syncBuiltinESMExports();
    try {
      await expect(store.put('d/a', 'x', { onlyIfAbsent: true })).rejects.toBeInstanceOf(StorageError);
    } finally {
      fs.openSync = openSync;
      syncBuiltinESMExports();
    }
    expect(attempts).toBe(4);
    expect(await store.put('d/a', 'x', { onlyIfAbsent: true })).not.toBeNull();
  });

  it('a put whose new directories another writer prunes while it makes them makes them again', async () => {
    const directory = await freshDirectory();
    const store = new FileStore(directory);
    const fs = createRequire(import.meta.url)('node:fs') as FsHooks & {
      mkdirSync: (path: string, options?: unknown) => string | undefined;
      rmdirSync: (path: string) => void;
    };
    const mkdirSync = fs.mkdirSync;
    // Each time a put makes a directory, a delete in another process prunes it (empty) at once,
    // three times a put: before the put makes the directory below it, or writes into it.
    let pruned = 0;
    let total = 0;
    fs.mkdirSync = (path, options) => {
      const made = mkdirSync(path, options);
      if (pruned < 3 && path.startsWith(directory)) {
        pruned += 1;
        total += 1;
        fs.rmdirSync(path);
      }
      return made;
    };
    syncBuiltinESMExports();
    try {
      // Create-only (no lock: its temp file makes the directory), then under the key's lock.
      for (const [index, options] of [{ onlyIfAbsent: true }, {}].entries()) {
        pruned = 0;
        expect(await store.put(`s/${index}/turn/a`, 'x', options)).not.toBeNull();
      }
    } finally {
      fs.mkdirSync = mkdirSync;
      syncBuiltinESMExports();
    }
    expect(total).toBe(6);
    expect((await store.list('s/')).objects.map((object) => object.key)).toEqual(['s/0/turn/a', 's/1/turn/a']);
  });

  it('a replaced file whose temp name cannot be removed leaves the write done and the name to the sweep', async () => {
    const directory = await freshDirectory();
    const store = new FileStore(directory);
    await store.put('d/a', 'first');
    await store.put('d/b', 'other');
    const fs = createRequire(import.meta.url)('node:fs') as FsHooks;
    const unlink = fs.unlink;
    fs.unlink = (_path, callback) => callback(Object.assign(new Error('EIO: i/o error, unlink'), { code: 'EIO' }));
    syncBuiltinESMExports();
    try {
      expect(await store.put('d/a', 'second')).not.toBeNull();
      await store.delete('d/b');
    } finally {
      fs.unlink = unlink;
      syncBuiltinESMExports();
    }
    expect((await store.list('d/')).objects.map((object) => object.key)).toEqual(['d/a']);
    expect(new TextDecoder().decode((await store.get('d/a'))!.body)).toBe('second');
    // Their times are those of the files they kept: older than this sweep's staleLockMs.
    expect((await filesUnder(directory)).filter((name) => /~t/.test(name))).toHaveLength(2);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await new FileStore(directory, { staleLockMs: 10 }).sweep()).toBe(2);
    expect((await filesUnder(directory)).filter((name) => /~[lbt]/.test(name))).toEqual([]);
  });

  it('a create-only put takes no lock: it lands while a writer holds the lock, which then writes over it', async () => {
    const directory = await freshDirectory();
    // A writer of a new key stalled at the fsync of its temp file, with the key's lock held.
    const fs = createRequire(import.meta.url)('node:fs') as FsHooks;
    const fsync = fs.fsync;
    let resume: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (resume = resolve));
    const reached = new Promise<void>((resolveReached) => {
      let armed = true;
      fs.fsync = (fd, callback) => {
        if (!armed) return fsync(fd, callback);
        armed = false;
        resolveReached();
        void gate.then(() => fsync(fd, callback));
      };
    });
    syncBuiltinESMExports();
    try {
      const holder = new FileStore(directory, { separateQueue: true });
      const held = holder.put('k', 'unconditional');
      await reached;
      expect((await readFile(join(directory, 'k~l'), 'utf8')).startsWith(`${process.pid} `)).toBe(true);
      // Another writer (its own queue, as another process's): not kept waiting for the lock.
      const creator = new FileStore(directory, { separateQueue: true, lockTimeoutMs: 1_000 });
      expect(await creator.put('k', 'created', { onlyIfAbsent: true })).not.toBeNull();
      expect(await creator.put('k', 'again', { onlyIfAbsent: true })).toBeNull();
      resume();
      // The unconditional put found no key under its lock, and one at its commit: written over.
      expect(await held).not.toBeNull();
      expect(new TextDecoder().decode((await creator.get('k'))!.body)).toBe('unconditional');
    } finally {
      resume();
      fs.fsync = fsync;
      syncBuiltinESMExports();
    }
    expect((await filesUnder(directory)).filter((name) => /~[lbt]/.test(name))).toEqual([]);
  });

  it('puts in flight in one directory share its fsyncs, each covered by one begun after its change', async () => {
    const directory = await freshDirectory();
    const store = new FileStore(directory);
    await store.put('d/seed', 'x');
    const puts = 8;
    // node:fs wrapped for this test (the store's named imports follow through syncBuiltinESMExports):
    // the first directory fsync is held until every put has linked or renamed its name.
    const fs = createRequire(import.meta.url)('node:fs') as FsHooks;
    const saved = { fsync: fs.fsync, linkSync: fs.linkSync, renameSync: fs.renameSync };
    const events: string[] = [];
    let named = 0;
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    let first = true;
    fs.fsync = (fd, callback) => {
      if (!fs.fstatSync(fd).isDirectory()) return saved.fsync(fd, callback);
      const id = events.filter((event) => event.startsWith('start ')).length;
      events.push(`start ${id}`);
      const run = () =>
        saved.fsync(fd, (error) => {
          events.push(`end ${id}`);
          callback(error);
        });
      if (first) void held.then(run);
      else run();
      first = false;
    };
    const naming = (call: (from: string, to: string) => void) => (from: string, to: string) => {
      call(from, to);
      if (!to.endsWith('~o')) return; // A lock file linked into place.
      events.push(`named ${to.slice(to.lastIndexOf('/') + 1, -2)}`);
      if (++named === puts + 1) release(); // The creates and the overwrite.
    };
    fs.linkSync = naming(saved.linkSync);
    fs.renameSync = naming(saved.renameSync);
    syncBuiltinESMExports();
    try {
      const keys = Array.from({ length: puts }, (_, index) => `k${index}`);
      await Promise.all(
        // Creates (link) and an overwrite of an existing key (rename).
        [...keys.map((key) => `d/${key}`), 'd/seed'].map(async (key) => {
          expect(await store.put(key, 'body')).not.toBeNull();
          events.push(`answered ${key.slice(2)}`);
        }),
      );
    } finally {
      release();
      Object.assign(fs, saved);
      syncBuiltinESMExports();
    }
    const at = (event: string) => events.indexOf(event);
    // The first, held, and one after it for every put that came while it ran (one each before).
    expect(events.filter((event) => event.startsWith('start '))).toEqual(['start 0', 'start 1']);
    for (const key of ['seed', ...Array.from({ length: puts }, (_, index) => `k${index}`)]) {
      // Answered only after an fsync of the directory that started after its name was linked or renamed.
      const covered = [0, 1].some(
        (id) => at(`start ${id}`) > at(`named ${key}`) && at(`end ${id}`) < at(`answered ${key}`),
      );
      expect(covered, `${key}: ${events.join(', ')}`).toBe(true);
    }
  });

  it('a create-only put whose directory a delete pruned before the shared fsync still succeeds', async () => {
    const directory = await freshDirectory();
    const store = new FileStore(directory);
    const fs = createRequire(import.meta.url)('node:fs') as FsHooks;
    const fsync = fs.fsync;
    let resume: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (resume = resolve));
    let reached: () => void = () => undefined;
    const started = new Promise<void>((resolve) => (reached = resolve));
    let first = true;
    // The first directory fsync (d/b's) is held: d/a, linked meanwhile, waits for the next one.
    fs.fsync = (fd, callback) => {
      if (!first || !fs.fstatSync(fd).isDirectory()) return fsync(fd, callback);
      first = false;
      reached();
      void held.then(() => fsync(fd, callback));
    };
    syncBuiltinESMExports();
    try {
      const b = store.put('d/b', 'b', { onlyIfAbsent: true });
      await started;
      const a = store.put('d/a', 'a', { onlyIfAbsent: true });
      while (!(await readdir(join(directory, 'd~d'))).includes('a~o')) await new Promise((r) => setTimeout(r, 1));
      // Both created (no lock to wait for): a delete removes them and prunes d~d.
      const deleted = store.delete(['d/a', 'd/b']);
      while ((await readdir(directory)).length > 0) await new Promise((r) => setTimeout(r, 1));
      resume();
      await deleted;
      expect(await b).not.toBeNull();
      // Committed (and then deleted): its success, not StorageError (ENOENT opening d~d for the fsync).
      expect(await a).not.toBeNull();
    } finally {
      resume();
      fs.fsync = fsync;
      syncBuiltinESMExports();
    }
  });

  it('a delete whose directory another delete pruned answers only once that removal is on disk', async () => {
    const directory = await freshDirectory();
    const store = new FileStore(directory);
    for (const key of ['d/a', 'd/b', 'd/c']) await store.put(key, key);
    const fs = createRequire(import.meta.url)('node:fs') as FsHooks & {
      statSync: (path: string) => { ino: number };
    };
    const rootIno = fs.statSync(directory).ino;
    const dIno = fs.statSync(join(directory, 'd~d')).ino;
    const fsync = fs.fsync;
    let resumeFirst: () => void = () => undefined;
    const first = new Promise<void>((resolve) => (resumeFirst = resolve));
    let resumeRoot: () => void = () => undefined;
    const root = new Promise<void>((resolve) => (resumeRoot = resolve));
    let rootSynced = false;
    let heldFirst = false;
    let firstSynced = false;
    // d~d's first fsync (d/c's delete) is held; so are the root's (the pruning delete's).
    fs.fsync = (fd, callback) => {
      const { ino } = fs.fstatSync(fd);
      if (ino === dIno && !heldFirst) {
        heldFirst = true;
        void first.then(() =>
          fsync(fd, (error) => {
            firstSynced = true;
            callback(error);
          }),
        );
      } else if (ino === rootIno) {
        void root.then(() =>
          fsync(fd, (error) => {
            rootSynced = true;
            callback(error);
          }),
        );
      } else fsync(fd, callback);
    };
    syncBuiltinESMExports();
    try {
      const c = store.delete('d/c');
      while (!heldFirst) await new Promise((r) => setTimeout(r, 1));
      // d/c's fsync begins beside the freeing of its file: once its temp name is gone, d/c found d~d
      // not empty (a~o, b~o) and waits for that fsync alone, as the deletes below rely on.
      while ((await readdir(join(directory, 'd~d'))).length > 2) await new Promise((r) => setTimeout(r, 1));
      let aAnswered = false;
      const a = store.delete('d/a').then(() => (aAnswered = true)); // waits for d~d's next fsync
      while ((await readdir(join(directory, 'd~d'))).includes('a~o')) await new Promise((r) => setTimeout(r, 1));
      let bAnswered = false;
      // One of them prunes d~d, then fsyncs the root (held).
      const b = store.delete('d/b').then(() => (bAnswered = true));
      while ((await readdir(directory)).length > 0) await new Promise((r) => setTimeout(r, 1));
      resumeFirst();
      // d/c may wait for the root's fsync too: on a loaded machine its own prune check can run
      // after d/b emptied d~d, so it is awaited only once the root's fsync is let go.
      while (!firstSynced) await new Promise((r) => setTimeout(r, 1));
      await new Promise((r) => setTimeout(r, 100));
      // d/a's and d/b's unlinks came after the held fsync began; only the root's fsync, after the
      // prune, covers them: neither delete may answer before it.
      expect({ aAnswered, bAnswered, rootSynced }).toEqual({ aAnswered: false, bAnswered: false, rootSynced: false });
      resumeRoot();
      await Promise.all([a, b, c]);
    } finally {
      resumeFirst();
      resumeRoot();
      fs.fsync = fsync;
      syncBuiltinESMExports();
    }
  });

  it('a directory fsync that fails fails every put it served with StorageError; the next put syncs again', async () => {
    const directory = await freshDirectory();
    const store = new FileStore(directory);
    await store.put('d/seed', 'x');
    const restore = failFsyncs('directory', 'EIO');
    try {
      const outcomes = await Promise.allSettled(['a', 'b', 'c', 'd'].map((key) => store.put(`d/${key}`, key)));
      for (const outcome of outcomes) {
        expect(outcome.status).toBe('rejected');
        expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(StorageError);
      }
    } finally {
      restore();
    }
    expect(await store.put('d/e', 'e')).not.toBeNull();
    expect(new TextDecoder().decode((await store.get('d/e'))!.body)).toBe('e');
  });

  it(
    'a listed name whose file is gone is left out; one that is not an object file fails the listing, a head ' +
      'and a get with StorageError',
    async () => {
      const directory = await freshDirectory();
      const store = new FileStore(directory);
      await store.put('d/a', '1');
      // Gone between the directory read and the header read, as a deleted object is.
      await symlink(join(directory, 'nowhere'), join(directory, 'd~d', 'b~o'));
      expect((await store.list('d/')).objects.map((object) => object.key)).toEqual(['d/a']);
      expect(await store.head('d/b')).toBeNull();
      expect(await store.get('d/b')).toBeNull();
      for (const [name, make] of [
        ['c', () => mkdir(join(directory, 'd~d', 'c~o'))],
        ['e', () => writeFile(join(directory, 'd~d', 'e~o'), 'a header line never ended')],
      ] as const) {
        await make();
        await expect(store.list('d/')).rejects.toBeInstanceOf(StorageError);
        await expect(store.head(`d/${name}`)).rejects.toBeInstanceOf(StorageError);
        await expect(store.get(`d/${name}`)).rejects.toBeInstanceOf(StorageError);
        await rm(join(directory, 'd~d', `${name}~o`), { recursive: true });
      }
      expect((await store.list('d/')).objects.map((object) => object.key)).toEqual(['d/a']);
    },
  );

  it('never shows a torn object to readers while a key is overwritten', async () => {
    const store = new FileStore(await freshDirectory());
    const big = (fill: number) => new Uint8Array(256 * 1024).fill(fill);
    await store.put('big', big(1));
    let stop = false;
    const writer = (async () => {
      for (let i = 2; i < 30; i++) await store.put('big', big(i));
      stop = true;
    })();
    let reads = 0;
    while (!stop) {
      const got = await store.get('big');
      expect(new Set(got!.body).size).toBe(1);
      reads++;
    }
    await writer;
    expect(reads).toBeGreaterThan(0);
  });
  it('writes a large body of parts through writevs of at most 1,024 buffers, finishing short writes', async () => {
    const fs = createRequire(import.meta.url)('node:fs') as FsHooks;
    const writevSync = fs.writevSync;
    const batches: number[] = [];
    // Each writev writes half its first buffer only: the rest is left to the store.
    fs.writevSync = (fd, buffers, position) => {
      batches.push(buffers.length);
      const first = buffers[0]!;
      return fs.writeSync(fd, first, 0, Math.ceil(first.length / 2), position ?? 0);
    };
    syncBuiltinESMExports();
    const store = new FileStore(await freshDirectory());
    const parts = Array.from({ length: 3000 }, (_, index) => new TextEncoder().encode(`${index % 10}`.repeat(40)));
    parts.splice(1500, 0, new Uint8Array(0));
    try {
      expect(await store.put('sessions/s/large', parts, { onlyIfAbsent: true })).toMatchObject({ size: 120_000 });
    } finally {
      fs.writevSync = writevSync;
      syncBuiltinESMExports();
    }
    expect(batches).toEqual([1024, 1024, 954]);
    const expected = parts.map((part) => new TextDecoder().decode(part)).join('');
    expect(new TextDecoder().decode((await store.get('sessions/s/large'))!.body)).toBe(expected);
  });
});

/** Runs `names.length` contender processes on `directory`, each with `writers` concurrent incrementers. */
async function contend(directory: string, names: string[], rounds: number, writers: number) {
  return Promise.all(
    names.map(async (name) => {
      const { stdout } = await run(
        process.execPath,
        ['--import', 'tsx', contender, directory, name, String(rounds), String(writers)],
        { cwd: root, timeout: 120_000 },
      );
      return JSON.parse(stdout.trim()) as { name: string; won: number[]; increments: number };
    }),
  );
}

describe('FileStore across processes', () => {
  it(
    'a process started on the directory after another (a restart) hands out none of its etags: an If-Match ' +
      "of the other's version is refused",
    async () => {
      const directory = await freshDirectory();
      const file = fileURLToPath(new URL('../../lib/store/file.ts', import.meta.url));
      // Each process writes k twice and deletes it, so that the next one writes the same versions again.
      const script = `const { FileStore } = await import(${JSON.stringify(file)});
      const store = new FileStore(process.argv[1]);
      const earlier = JSON.parse(process.argv[2]);
      const etags = [(await store.put('k', 'a')).etag, (await store.put('k', 'b')).etag];
      const refused = await Promise.all(earlier.map((etag) => store.put('k', 'c', { ifMatch: etag })));
      await store.delete('k');
      console.log(JSON.stringify({ etags, refused: refused.every((written) => written === null) }));`;
      const etags: string[] = [];
      for (let restart = 0; restart < 3; restart++) {
        const { stdout } = await run(
          process.execPath,
          ['--import', 'tsx', '--input-type=module', '-e', script, directory, JSON.stringify(etags)],
          { cwd: root, timeout: 60_000 },
        );
        const written = JSON.parse(stdout.trim()) as { etags: string[]; refused: boolean };
        expect(written.refused).toBe(true);
        etags.push(...written.etags);
      }
      expect(etags.map((etag) => etag.split('-')[0])).toEqual(['1', '2', '1', '2', '1', '2']);
      expect(new Set(etags).size).toBe(6);
    },
  );

  it('four processes of five concurrent writers each on one directory: one winner per create-only key, no lost ' +
    'If-Match increment', async () => {
    const directory = await freshDirectory();
    const rounds = 10;
    const names = ['p1', 'p2', 'p3', 'p4'];
    const results = await contend(directory, names, rounds, 5);
    const winners = results.flatMap((result) => result.won.map((round) => ({ round, name: result.name })));
    expect(winners.map((winner) => winner.round).sort((a, b) => a - b)).toEqual(
      Array.from({ length: rounds }, (_, i) => i),
    );
    const store = new FileStore(directory);
    for (const { round, name } of winners) {
      const got = await store.get(`race/${String(round).padStart(4, '0')}`);
      expect(new TextDecoder().decode(got!.body)).toBe(`${name} ${round}`);
      expect(got!.metadata).toEqual({ owner: name });
    }
    expect(results.map((result) => result.increments)).toEqual(names.map(() => rounds * 5));
    const counter = await store.get('counter');
    expect(Number(new TextDecoder().decode(counter!.body))).toBe(rounds * names.length * 5);
    expect((await filesUnder(directory)).filter((name) => /~[lbt]/.test(name))).toEqual([]);
  }, 120_000);

  it('processes racing to break one dead lock break it once: no lost increment', async () => {
    const directory = await freshDirectory();
    const store = new FileStore(directory);
    await store.put('counter', '0');
    // The counter's lock, held by a process that is gone (pid 2^22 + 1 is above Linux's pid_max).
    await writeFile(join(directory, 'counter~l'), `${2 ** 22 + 1} 0123456789abcdef`);
    const results = await contend(directory, ['p1', 'p2', 'p3'], 2, 6);
    expect(results.map((result) => result.increments)).toEqual([12, 12, 12]);
    expect(new TextDecoder().decode((await store.get('counter'))!.body)).toBe('36');
  }, 120_000);

  it(
    'writers of several stores break a dead lock and the dead guard of a breaker that died, once: no lost ' +
      'increment, nothing left behind',
    async () => {
      const directory = await freshDirectory();
      const dead = 2 ** 22 + 1;
      const stores = Array.from({ length: 6 }, () => new FileStore(directory, { separateQueue: true }));
      await stores[0]!.put('counter', '0');
      for (let round = 0; round < 5; round++) {
        // The counter's lock and its breaker's guard, both held by processes that are gone.
        const lock = `${dead} dead-lock-${round}`;
        await writeFile(join(directory, 'counter~l'), lock);
        await writeFile(join(directory, `counter~b${sha256Hex(lock).slice(0, 16)}`), `${dead} dead-guard-${round}`);
        await Promise.all(
          stores.flatMap((store) =>
            Array.from({ length: 4 }, async () => {
              for (;;) {
                const current = (await store.get('counter'))!;
                const next = String(Number(new TextDecoder().decode(current.body)) + 1);
                if (await store.put('counter', next, { ifMatch: current.etag })) return;
              }
            }),
          ),
        );
      }
      expect(new TextDecoder().decode((await stores[0]!.get('counter'))!.body)).toBe(String(5 * 6 * 4));
      expect((await filesUnder(directory)).filter((name) => /~[lbt]/.test(name))).toEqual([]);
    },
  );

  it(
    'a holder stalled past staleLockMs whose lock was taken over fails its write instead of overwriting ' +
      'the next holder',
    async () => {
      const directory = await freshDirectory();
      // The key exists: the stalled put would rename its temp file over whatever is there.
      await new FileStore(directory).put('k', 'first');
      // Stall the first writer at the fsync of its temp file, with its lock held: node:fs is
      // wrapped for this test (the store's named imports follow through syncBuiltinESMExports).
      const fs = createRequire(import.meta.url)('node:fs') as { fsync: (...args: unknown[]) => void };
      const fsync = fs.fsync;
      let stalled: () => void = () => undefined;
      const reached = new Promise<void>((resolveReached) => {
        const gate = new Promise<void>((resolve) => (stalled = resolve));
        let armed = true;
        fs.fsync = (...args: unknown[]) => {
          if (!armed) return fsync(...args);
          armed = false;
          resolveReached();
          void gate.then(() => fsync(...args));
        };
      });
      syncBuiltinESMExports();
      try {
        const holder = new FileStore(directory, { separateQueue: true });
        const stalledPut = holder.put('k', 'stalled holder').then(
          () => 'wrote',
          (error: Error) => error.message,
        );
        await reached;
        expect((await readFile(join(directory, 'k~l'), 'utf8')).startsWith(`${process.pid} `)).toBe(true);
        // The lock is alive but older than this store's staleLockMs: it takes it over and writes.
        const next = new FileStore(directory, { separateQueue: true, staleLockMs: 200 });
        expect(await next.put('k', 'next holder')).not.toBeNull();
        stalled();
        expect(await stalledPut).toMatch(/^file store: the lock of k was taken over while held/);
        expect(new TextDecoder().decode((await next.get('k'))!.body)).toBe('next holder');
        expect((await filesUnder(directory)).filter((name) => /~[lbt]/.test(name))).toEqual([]);
      } finally {
        stalled();
        fs.fsync = fsync;
        syncBuiltinESMExports();
      }
    },
  );

  it('a process killed with SIGKILL while writing leaves no key wedged, and the sweep removes its temp ' +
    'files', async () => {
    const directory = await freshDirectory();
    const child = spawn(process.execPath, ['--import', 'tsx', contender, directory, 'victim', '100000', '4'], {
      cwd: root,
      stdio: 'ignore',
    });
    const store = new FileStore(directory, { lockTimeoutMs: 20_000 });
    // Wait until it is writing, then kill it mid-loop.
    const deadline = Date.now() + 30_000;
    while (!(await store.head('counter')) && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 50));
    await new Promise((resolve) => setTimeout(resolve, 200));
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));
    // Whatever it held (the counter's lock, a temp file), the next writer gets through: a lock
    // of a live process would be waited on for its 60 s staleness, past this store's timeout.
    for (let i = 0; i < 5; i++) {
      const current = await store.get('counter');
      expect(await store.put('counter', 'next', { ifMatch: current!.etag })).not.toBeNull();
    }
    await store.sweep();
    expect((await filesUnder(directory)).filter((name) => /~[lbt]/.test(name))).toEqual([]);
  }, 60_000);
});
