import { closeSync, linkSync, renameSync, rmdirSync, unlinkSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join, sep } from 'node:path';
import { setImmediate } from 'node:timers/promises';
import {
  bodyLength,
  compareKeys,
  cursorGroup,
  GROUP_END,
  partsOf,
  resolveRange,
  type Body,
  type GetOptions,
  type ListOptions,
  type ListResult,
  type ObjectInfo,
  type ObjectStore,
  type PutOptions,
  type StoredObject,
} from './object-store.ts';
import {
  OBJECT,
  DIRECTORY,
  MAX_LIST_LIMIT,
  escapeName,
  escapeSegment,
  openSyncIfExists,
  readHeaderSync,
  readHeaderAt,
  readSyncAt,
  newHeader,
  infoOf,
  exists,
  codeOf,
  asStorageError,
} from './file-format.ts';
import {
  processQueues,
  sweepLeftovers,
  unlinkQuietly,
  withKeyLock,
  type LockTimes,
  type WriterQueues,
} from './file-lock.ts';
import { canonicalEtag } from './etag.ts';
import { keepAside, release, syncDirectory, writeTemp } from './file-sync.ts';
import { directoryEntries, readListedHeader } from './file-listing.ts';

/** Headers a listing reads (synchronously, `readHeaderAt`) between turns of the event loop. */
const HEADERS_PER_TURN = 100;

export interface FileStoreOptions extends Partial<LockTimes> {
  /**
   * This store's writers take turns apart from the process's other FileStores and contend
   * with them through the lock files only, as another process's writers would (the
   * crash-and-race simulation runs several such stores on one directory).
   */
  separateQueue?: boolean;
}

/**
 * An ObjectStore in a directory of the local file system, for one machine: the embedded store
 * of the Node and Deno servers when no S3 endpoint is set. Any number of processes on the
 * machine may share one directory.
 *
 * Layout: a key's `/`-separated segments become directories; each segment is escaped (every
 * byte but `a-z 0-9 . _ -` as `%XX`, so upper case survives case-insensitive file systems) and
 * tagged: `<segment>~d` is a directory, `<name>~o` an object, `<name>~l` the object's lock,
 * `<name>~b` a breaker of a stale lock, `<name>~t<pid>-<number>` a write in progress. An
 * object's name is its last segment escaped or, past 230 bytes, mapped to a shorter one
 * (`escapeName` in file-format.ts). An object file is one line of JSON (version, etag,
 * metadata, content type, upload time, and the key where the name is mapped), a newline, then
 * the body.
 *
 * - A put writes a temp file (fsynced), then a create-only put `link`s it to the object name,
 *   which fails with EEXIST when the key exists (so it takes no lock), and any other put
 *   `rename`s it over the object (a new key: links it, and renames over one a create made
 *   meanwhile): readers see the old object or the new one, never a torn one. A failed write
 *   removes its temp file; `sweep` removes those of processes that died writing.
 * - Every other write of a key (a put that is not create-only, a delete) holds the key's lock
 *   (file-lock.ts: exact for any number of writers, in one process or several on one machine).
 *   A file it replaces or removes is kept under a temp name and freed through the thread pool
 *   (`keepAside` in file-sync.ts); the directory is fsynced before it answers, the fsyncs of
 *   the writes in flight in one directory shared (`syncDirectory`).
 * - If-Match compares the etag read under the lock; etags carry a per-key version and a tag
 *   unique to the process and the write (`uniqueTag`), so a key deleted and written again never
 *   shows an earlier etag.
 * - Listing walks the directories in the UTF-8 byte order of the keys they hold, picking the
 *   entries a page needs without sorting the whole directory (file-listing.ts); its cost grows
 *   with the size of the directories it visits. It reads them, and the header of each object it
 *   returns, synchronously, as `head` does: a thread-pool round trip per call would cost more
 *   than the read. A settled object's header is kept and used again while a `stat` shows the
 *   same file (`readListedHeader`).
 */
export class FileStore implements ObjectStore {
  readonly root: string;
  readonly #times: LockTimes;
  readonly #queues: WriterQueues;

  constructor(root: string, options: FileStoreOptions = {}) {
    this.root = root;
    this.#times = { staleLockMs: options.staleLockMs ?? 60_000, lockTimeoutMs: options.lockTimeoutMs ?? 15_000 };
    this.#queues = options.separateQueue ? new Map() : processQueues;
  }

  async get(key: string, options: GetOptions = {}): Promise<StoredObject | null> {
    // Read synchronously, as `head` reads: through the thread pool, the open, stat, reads and
    // close each waited behind the fsyncs of the puts in flight (docs/STORAGE.md, the file
    // store). After a turn of the event loop, so that a caller reading in a loop lets the I/O
    // it waits for run.
    await setImmediate();
    try {
      const fd = openSyncIfExists(this.#objectPath(key));
      if (fd === null) return null;
      try {
        const { header, bodyStart, size, body: read } = readHeaderSync(fd, key);
        const [start, end] = options.range ? resolveRange(options.range, size) : [0, size];
        // A small object's body came with its header (copied: the buffer serves the next read).
        const body = read
          ? new Uint8Array(read.subarray(start, end))
          : readSyncAt(fd, end - start, bodyStart + start, key);
        return { ...infoOf(key, header, size), body };
      } finally {
        closeSync(fd);
      }
    } catch (error) {
      throw asStorageError('get', key, error);
    }
  }

  async head(key: string): Promise<ObjectInfo | null> {
    try {
      const read = readHeaderAt(this.#objectPath(key), key);
      return read && infoOf(key, read.header, read.size);
    } catch (error) {
      throw asStorageError('head', key, error);
    }
  }

  async put(key: string, body: Body, options: PutOptions = {}): Promise<ObjectInfo | null> {
    const parts = partsOf(body);
    const size = bodyLength(parts);
    const { directory, name } = this.#location(key);
    const objectPath = join(directory, name + OBJECT);
    const headerOf = (version: number) => newHeader(key, name, version, options);
    try {
      if (options.onlyIfAbsent && options.ifMatch === undefined) {
        // No lock: the `link` that makes the object fails when the name exists, whoever holds
        // the key's lock, so the check and the write are one step (O_EXCL semantics).
        if (exists(objectPath)) return null;
        const header = headerOf(1);
        const temp = await writeTemp(directory, name, header, parts);
        try {
          linkSync(temp, objectPath);
        } finally {
          unlinkQuietly(temp);
        }
        await syncDirectory(directory);
        return infoOf(key, header, size);
      }
      return await withKeyLock(directory, name, key, this.#times, this.#queues, async (stillHeld) => {
        const current = readHeaderAt(objectPath, key)?.header;
        if (options.onlyIfAbsent && current) return null;
        if (options.ifMatch !== undefined && (!current || canonicalEtag(current.e) !== canonicalEtag(options.ifMatch)))
          return null;
        const header = headerOf((current?.v ?? 0) + 1);
        const temp = await writeTemp(directory, name, header, parts);
        // The file an overwrite replaces, kept under a temp name and freed through the thread pool.
        let aside: string | undefined;
        let released: Promise<void> | undefined;
        let renamed = false;
        try {
          await stillHeld();
          let linked = false;
          try {
            if (!current) {
              linkSync(temp, objectPath);
              linked = true;
            }
          } catch (error) {
            // Created meanwhile by a create-only put, which takes no lock: written over.
            if (codeOf(error) !== 'EEXIST') throw error;
          }
          if (!linked) {
            aside = keepAside(objectPath, directory, name);
            renameSync(temp, objectPath);
            renamed = true;
          }
        } finally {
          // After a link, or a failed commit: no temp file is left behind (renamed, the name is gone).
          if (!renamed) unlinkQuietly(temp);
          if (aside !== undefined) released = release(aside);
        }
        // The link or rename is a change to the directory: on disk only once the directory is
        // fsynced, so that an acknowledged put survives a power loss, not only a crash.
        await syncDirectory(directory);
        await released;
        return infoOf(key, header, size);
      });
    } catch (error) {
      if (options.onlyIfAbsent && codeOf(error) === 'EEXIST') return null;
      throw asStorageError('put', key, error);
    }
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListResult> {
    const limit = Math.max(1, Math.min(options.limit ?? MAX_LIST_LIMIT, MAX_LIST_LIMIT));
    const after = options.cursor ?? options.startAfter;
    const slash = prefix.lastIndexOf('/');
    const base = prefix.slice(0, slash + 1);
    const directory = this.#directoryOf(base);
    const objects: ObjectInfo[] = [];
    const prefixes: string[] = [];
    let truncated = false;
    let last = '';
    let visited = 0;
    const listed = cursorGroup(options.cursor, prefix, options.delimiter);
    try {
      for (const entry of this.#walk(directory, base, prefix, after, limit + 1)) {
        // Headers are read synchronously: other work gets the event loop between runs of them.
        if (++visited % HEADERS_PER_TURN === 0) await setImmediate();
        // With a delimiter, the keys of a group come after its first one: skip them (and those of
        // the group the previous page ended on).
        const skipped = prefixes.at(-1) ?? listed;
        if (skipped !== undefined && entry.key.startsWith(skipped)) continue;
        if (objects.length + prefixes.length === limit) {
          truncated = true;
          break;
        }
        const at = options.delimiter ? entry.key.indexOf(options.delimiter, prefix.length) : -1;
        if (at < 0) {
          objects.push(entry);
          last = entry.key;
          continue;
        }
        const group = entry.key.slice(0, at + options.delimiter!.length);
        prefixes.push(group);
        // Past every key of the group, in byte order.
        last = `${group}${GROUP_END}`;
      }
    } catch (error) {
      throw asStorageError('list', prefix, error);
    }
    const grouped = options.delimiter !== undefined ? { prefixes } : {};
    return truncated ? { objects, truncated, cursor: last, ...grouped } : { objects, truncated, ...grouped };
  }

  async delete(keys: string | string[]): Promise<void> {
    // The directories whose names changed, and the files removed, freed through the thread pool.
    const removed = new Map<string, string>();
    const released: Promise<void>[] = [];
    // Each fsync's failure, or undefined: settled, so that one failing while the files are freed is
    // not an unhandled rejection.
    let synced: Promise<unknown>[] = [];
    try {
      for (const key of Array.isArray(keys) ? keys : [keys]) {
        const { directory, name } = this.#location(key);
        const objectPath = join(directory, name + OBJECT);
        try {
          // Deleting a missing key needs no lock (and creates no directory for one).
          if (!exists(objectPath)) continue;
          await withKeyLock(directory, name, key, this.#times, this.#queues, async (stillHeld) => {
            await stillHeld();
            // The object's file kept under a temp name, freed through the thread pool.
            const aside = keepAside(objectPath, directory, name);
            if (aside === undefined) return;
            try {
              unlinkSync(objectPath);
            } finally {
              released.push(release(aside));
            }
          });
          if (!removed.has(directory)) removed.set(directory, key);
        } catch (error) {
          throw asStorageError('delete', key, error);
        }
      }
      // Fsynced before the delete answers (as a put's directory is), each directory once however
      // many of its keys were deleted, while the files are freed: the fsync and the freeing are a
      // thread-pool round trip each, run side by side (as an overwrite's are) rather than one
      // after the other. The temp names' removal needs no fsync (`release`).
      synced = [...removed].map(([directory, key]) => this.#syncForDelete(directory, key));
    } finally {
      // Their temp names gone, emptied directories can be removed.
      await Promise.all(released);
    }
    // A directory left empty is removed (a failed rmdir is a call too, once a directory), and the
    // one above that kept it fsynced after that (an fsync of it begun before would not cover it).
    const above = new Map<string, string>();
    for (const [directory, key] of removed) {
      const left = this.#pruneDirectories(directory);
      if (left !== directory && !above.has(left)) above.set(left, key);
    }
    for (const [directory, key] of above) synced.push(this.#syncForDelete(directory, key));
    const failure = (await Promise.all(synced)).find((error) => error !== undefined);
    if (failure !== undefined) throw failure;
  }

  /**
   * A delete's fsync of `directory` (one another delete pruned meanwhile is made durable through
   * its parent): resolves to its failure as a StorageError, or undefined.
   */
  #syncForDelete(directory: string, key: string): Promise<unknown> {
    return syncDirectory(directory).then(
      () => undefined,
      (error: unknown) => asStorageError('delete', key, error),
    );
  }

  /**
   * Objects under `directory` (holding keys starting with `base`) whose keys start with `prefix`
   * and sort after `after`, in byte order; `need`: how many the listing expects to take.
   */
  *#walk(
    directory: string,
    base: string,
    prefix: string,
    after: string | undefined,
    need: number,
  ): Generator<ObjectInfo> {
    for (const entry of directoryEntries(directory, base, prefix, after, need)) {
      const key = base + entry.tail;
      if (entry.directory) {
        // Every key below starts with key: skip the directory when all of them sort at or before `after`.
        if (after !== undefined && compareKeys(key, after) <= 0 && !after.startsWith(key)) continue;
        yield* this.#walk(`${directory}${sep}${entry.name}`, key, key, after, need);
        continue;
      }
      // Gone since the directory was read: not listed.
      // A name holds no separator: joined by hand, not `join` (a root with a trailing slash gives `//`, harmless).
      const read = entry.read ?? readListedHeader(`${directory}${sep}${entry.name}`, key);
      if (read) yield infoOf(key, read.header, read.size);
    }
  }

  /**
   * Removes what processes killed while writing left anywhere under the root: temp files,
   * stale locks, guards (the Node and Deno servers run it when they first use the directory).
   * Safe while other processes write.
   */
  async sweep(): Promise<number> {
    let removed = 0;
    const visit = async (directory: string): Promise<void> => {
      removed += await sweepLeftovers(directory, this.#times.staleLockMs);
      const names = await readdir(directory).catch(() => [] as string[]);
      for (const name of names) if (name.endsWith(DIRECTORY)) await visit(join(directory, name));
    };
    await visit(this.root);
    return removed;
  }

  /** Removes `directory` and the directories above it left empty; returns the one left whose names changed. */
  #pruneDirectories(directory: string): string {
    let current = directory;
    while (current !== this.root && current.startsWith(this.root)) {
      try {
        rmdirSync(current);
      } catch {
        return current;
      }
      current = join(current, '..');
    }
    return current;
  }

  #location(key: string): { directory: string; name: string } {
    const segments = key.split('/');
    const last = segments.pop()!;
    const directory = join(this.root, ...segments.map((segment) => escapeSegment(segment, key) + DIRECTORY));
    return { directory, name: escapeName(last) };
  }

  #objectPath(key: string): string {
    const { directory, name } = this.#location(key);
    return join(directory, name + OBJECT);
  }

  /** The directory of keys starting with `base` (empty, or ending in `/`). */
  #directoryOf(base: string): string {
    if (base === '') return this.root;
    return join(
      this.root,
      ...base
        .slice(0, -1)
        .split('/')
        .map((segment) => escapeSegment(segment, base) + DIRECTORY),
    );
  }
}
