import { Buffer } from 'node:buffer';
import { closeSync, fsync, linkSync, openSync, unlink } from 'node:fs';
import { dirname, join } from 'node:path';
import { bodyLength } from './object-store.ts';
import { codeOf, type Header, PRIVATE_FILE, writeAllSync, writePartsSync } from './file-format.ts';
import { makeDirectory, tempName, unlinkQuietly } from './file-lock.ts';

/**
 * How the file store (file.ts) puts bytes on disk: the temp file a put writes and fsyncs, the
 * fsyncs of a directory after names in it were linked, renamed or removed (shared by the writes
 * in flight in it), and the freeing of a replaced or removed file off the event loop. Only the
 * fsyncs and that freeing go through the thread pool; the rest are synchronous calls of
 * microseconds.
 */

/**
 * Writes an object file (its header line, then the bytes of `parts`) to a new temp file of key
 * `name` in `directory`, creating the directory when it is missing, and fsyncs it: its bytes are
 * on disk before a link or rename makes it the object. Returns its path; a failed write (a full disk)
 * leaves none. Named with this process's pid: no other writer has it.
 */
export async function writeTemp(
  directory: string,
  name: string,
  header: Header,
  parts: readonly Uint8Array[],
): Promise<string> {
  for (let attempt = 0, taken = 0; ; ) {
    const temp = join(directory, tempName(name));
    let fd: number;
    try {
      fd = openSync(temp, 'wx', PRIVATE_FILE);
    } catch (error) {
      // A dead predecessor's leftover under this pid had the name: the next one.
      if (codeOf(error) === 'EEXIST') {
        if (++taken < MAX_NAMES_TAKEN) continue;
        throw namesTaken(name);
      }
      // The directory is missing (a create takes no lock, which would have made it), or was
      // pruned by a delete in between: made, and again.
      if (codeOf(error) !== 'ENOENT' || attempt++ === 3) throw error;
      makeDirectory(directory);
      continue;
    }
    try {
      try {
        writeObjectFile(fd, header, parts);
        await syncFile(fd);
      } finally {
        closeSync(fd);
      }
      return temp;
    } catch (error) {
      unlinkQuietly(temp);
      throw error;
    }
  }
}

/** Temp names found taken (leftovers of a dead process with this pid) before a write gives up. */
const MAX_NAMES_TAKEN = 100;

/** Bodies up to this size are written with their header line in one write (copied after it). */
const ONE_WRITE_BYTES = 64 * 1024;

/**
 * Writes an object file's bytes, the header line then the body's `parts`, to the new file open
 * as `fd`: a small body (most objects, every tombstone) copied after the line, so that the file
 * is one write; a larger one written from its parts as they are, with the line, in a writev.
 */
function writeObjectFile(fd: number, header: Header, parts: readonly Uint8Array[]): void {
  const line = `${JSON.stringify(header)}\n`;
  const lineBytes = Buffer.byteLength(line);
  const length = bodyLength(parts);
  if (length > ONE_WRITE_BYTES) {
    writePartsSync(fd, [Buffer.from(line), ...parts], 0);
    return;
  }
  const file = Buffer.allocUnsafe(lineBytes + length);
  file.write(line, 0);
  let offset = lineBytes;
  for (const part of parts) {
    file.set(part, offset);
    offset += part.length;
  }
  writeAllSync(fd, file, 0);
}

/** An fsync of `fd` through the thread pool. */
function syncFile(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fsync(fd, (error) => (error ? reject(error) : resolve())));
}

async function fsyncDirectoryNow(directory: string): Promise<void> {
  const fd = openSync(directory, 'r');
  try {
    await syncFile(fd);
  } finally {
    closeSync(fd);
  }
}

/** Per directory: the callers waiting for the fsync that starts once the running one ends. */
const queued = new Map<string, Array<{ resolve: () => void; reject: (error: unknown) => void }>>();

/**
 * An fsync of `directory`: the names linked, renamed or removed in it before the call are on
 * disk once it resolves. Calls for one directory share fsyncs (a group commit): with none
 * running, the call starts one; while one runs, which may have started before the caller's
 * change, the caller waits for the next one, which starts when the running one ends and
 * serves every caller that came meanwhile. So a directory has at most one fsync running and
 * one waiting, however many puts in it are in flight, and each caller's change is covered by
 * an fsync that started after it. A failed fsync fails every caller it served.
 */
export async function syncDirectory(directory: string): Promise<void> {
  for (let current = directory; ; ) {
    try {
      return await syncShared(current);
    } catch (error) {
      // Removed meanwhile (a delete pruned it, with every name in it): on disk once its parent is.
      const parent = dirname(current);
      if (codeOf(error) !== 'ENOENT' || parent === current) throw error;
      current = parent;
    }
  }
}

function syncShared(directory: string): Promise<void> {
  const waiting = queued.get(directory);
  if (waiting) {
    return new Promise((resolve, reject) => waiting.push({ resolve, reject }));
  }
  queued.set(directory, []);
  return runFrom(directory);
}

/** Runs an fsync of `directory`, then the one its queued callers wait for, if any. */
async function runFrom(directory: string): Promise<void> {
  try {
    await fsyncDirectoryNow(directory);
  } finally {
    const waiting = queued.get(directory) ?? [];
    if (waiting.length === 0) {
      queued.delete(directory);
    } else {
      queued.set(directory, []);
      runFrom(directory).then(
        () => {
          for (const waiter of waiting) waiter.resolve();
        },
        (error: unknown) => {
          for (const waiter of waiting) waiter.reject(error);
        },
      );
    }
  }
}

/**
 * Keeps the file named `path` alive under a new temp name of its key `name` in `directory`
 * (`tempName` in file-lock.ts) before its name is renamed over or unlinked, so that the rename
 * or unlink drops a name only; `release` then removes the temp name through the thread pool,
 * where freeing the file's blocks waits on the file system's journal instead of the event loop
 * (an unlink of a file's last name took about 2 ms there while fsyncs ran, a name alone
 * microseconds). A link, not a rename: a link never replaces a file already under the name
 * (EEXIST: the next name), while a rename onto another name of the same file (a dead
 * predecessor's leftover link of this pid) would do nothing and succeed. Returns the temp
 * name's path; undefined: `path` has no file. A process killed before the release leaves the
 * temp name, a dead process's, to `FileStore.sweep`.
 */
export function keepAside(path: string, directory: string, name: string): string | undefined {
  for (let taken = 0; ; ) {
    const aside = join(directory, tempName(name));
    try {
      linkSync(path, aside);
      return aside;
    } catch (error) {
      if (codeOf(error) === 'ENOENT') return undefined;
      // A dead predecessor's leftover under this pid had the name: the next one.
      if (codeOf(error) !== 'EEXIST') throw error;
      if (++taken === MAX_NAMES_TAKEN) throw namesTaken(name);
    }
  }
}

/** Temp names all taken: an error without EEXIST's code (a put would take that for the key's). */
function namesTaken(name: string): Error {
  return new Error(`${MAX_NAMES_TAKEN} temp names of ${name} in a row were taken`);
}

/**
 * Removes a name `keepAside` made, through the thread pool. Never fails: the put or delete it
 * serves is done, and a name it could not remove is a temp file that `FileStore.sweep` removes
 * once older than `staleLockMs` (its time is the replaced file's).
 */
export function release(aside: string): Promise<void> {
  return new Promise((resolve) => unlink(aside, () => resolve()));
}
