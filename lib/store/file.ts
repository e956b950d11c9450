import { Buffer } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import { link, mkdir, open, readdir, readFile, rename, rmdir, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import process from 'node:process';
import { StorageError } from '../errors.ts';
import {
  resolveRange,
  toBytes,
  type GetOptions,
  type ListOptions,
  type ListResult,
  type ObjectInfo,
  type ObjectStore,
  type PutOptions,
  type StoredObject,
} from './object-store.ts';
import {
  type Header,
  OBJECT,
  DIRECTORY,
  LOCK,
  TEMP,
  NEWLINE,
  MAX_LIST_LIMIT,
  escapeSegment,
  unescapeSegment,
  openIfExists,
  readHeader,
  readHeaderAt,
  infoOf,
  exists,
  processAlive,
  codeOf,
  asStorageError,
  sleep,
} from './file-format.ts';

export interface FileStoreOptions {
  /** A lock older than this is taken over even if its process seems alive (pid reuse). */
  staleLockMs?: number;
  /** How long a write waits for a key's lock before failing with StorageError. */
  lockTimeoutMs?: number;
}

/** Lock tokens this process holds, to tell its own live locks from a dead predecessor's with the same pid. */
const heldTokens = new Set<string>();

/**
 * An ObjectStore in a directory of the local file system, for one machine: the embedded store
 * of the Node and Deno servers when no S3 endpoint is set. Any number of processes on the
 * machine may share one directory.
 *
 * Layout: a key's `/`-separated segments become directories; each segment is escaped (every
 * byte but `a-z 0-9 . _ -` as `%XX`, so upper case survives case-insensitive file systems) and
 * tagged: `<segment>~d` is a directory, `<segment>~o` an object, `<segment>~l` the object's
 * lock, `<segment>~t<random>` a write in progress. An object file is one line of JSON (version,
 * etag, metadata, content type, upload time), a newline, then the body.
 *
 * - Every write of a key (put, delete) holds the key's lock file, created with O_EXCL (`wx`).
 *   A lock whose process is gone (or that is older than `staleLockMs`) is broken.
 * - A put writes a temp file (fsynced), then a create-only put `link`s it to the object name,
 *   which fails with EEXIST when the key exists, and any other put `rename`s it over the
 *   object: readers see the old object or the new one, never a torn one.
 * - If-Match compares the etag read under the lock; etags carry a per-key version and random
 *   bytes, so a key deleted and written again never shows an earlier etag.
 * - Listing walks the directories, sorting each by the UTF-8 bytes of the keys it holds, so
 *   keys come back in byte order; its cost grows with the size of the directories it visits.
 */
export class FileStore implements ObjectStore {
  readonly root: string;
  readonly #staleLockMs: number;
  readonly #lockTimeoutMs: number;

  constructor(root: string, options: FileStoreOptions = {}) {
    this.root = root;
    this.#staleLockMs = options.staleLockMs ?? 60_000;
    this.#lockTimeoutMs = options.lockTimeoutMs ?? 15_000;
  }

  async get(key: string, options: GetOptions = {}): Promise<StoredObject | null> {
    const path = this.#objectPath(key);
    const file = await openIfExists(path, 'get', key);
    if (!file) return null;
    try {
      const { header, bodyStart, size } = await readHeader(file, key);
      const [start, end] = options.range ? resolveRange(options.range, size) : [0, size];
      const body = new Uint8Array(end - start);
      let done = 0;
      while (done < body.length) {
        const { bytesRead } = await file.read(body, done, body.length - done, bodyStart + start + done);
        if (bytesRead === 0)
          throw new StorageError(`file store get ${key} failed: object file is truncated`, { operation: 'get', key });
        done += bytesRead;
      }
      return { ...infoOf(key, header, size), body };
    } catch (error) {
      throw asStorageError('get', key, error);
    } finally {
      await file.close();
    }
  }

  async head(key: string): Promise<ObjectInfo | null> {
    const file = await openIfExists(this.#objectPath(key), 'head', key);
    if (!file) return null;
    try {
      const { header, size } = await readHeader(file, key);
      return infoOf(key, header, size);
    } catch (error) {
      throw asStorageError('head', key, error);
    } finally {
      await file.close();
    }
  }

  async put(key: string, body: Uint8Array | string, options: PutOptions = {}): Promise<ObjectInfo | null> {
    const bytes = toBytes(body);
    const { directory, name } = this.#location(key);
    const objectPath = join(directory, name + OBJECT);
    try {
      return await this.#withLock(directory, name, key, async () => {
        const current = await readHeaderAt(objectPath, key);
        if (options.onlyIfAbsent && current) return null;
        if (options.ifMatch !== undefined && current?.e !== options.ifMatch) return null;
        const version = (current?.v ?? 0) + 1;
        const header: Header = {
          v: version,
          e: `"${version}-${randomBytes(8).toString('hex')}"`,
          m: { ...(options.metadata ?? {}) },
          ...(options.contentType !== undefined ? { t: options.contentType } : {}),
          u: Date.now(),
        };
        const temp = join(directory, `${name}${TEMP}${randomBytes(6).toString('hex')}`);
        const file = await open(temp, 'wx');
        try {
          await file.writeFile(Buffer.concat([Buffer.from(JSON.stringify(header)), Buffer.from([NEWLINE]), bytes]));
          await file.sync();
        } finally {
          await file.close();
        }
        if (current) {
          await rename(temp, objectPath);
        } else {
          try {
            // O_EXCL semantics: link fails when the name exists, whoever wrote it.
            await link(temp, objectPath);
          } finally {
            await unlink(temp).catch(() => undefined);
          }
        }
        return infoOf(key, header, bytes.length);
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
    try {
      for await (const entry of this.#walk(directory, base, prefix, after)) {
        // With a delimiter, the keys of a group come after its first one: skip them.
        if (prefixes.length > 0 && entry.key.startsWith(prefixes[prefixes.length - 1]!)) continue;
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
        last = `${group}\u{10FFFF}`;
      }
    } catch (error) {
      throw asStorageError('list', prefix, error);
    }
    const grouped = options.delimiter !== undefined ? { prefixes } : {};
    return truncated ? { objects, truncated, cursor: last, ...grouped } : { objects, truncated, ...grouped };
  }

  async delete(keys: string | string[]): Promise<void> {
    for (const key of Array.isArray(keys) ? keys : [keys]) {
      const { directory, name } = this.#location(key);
      const objectPath = join(directory, name + OBJECT);
      try {
        // Deleting a missing key needs no lock (and creates no directory for one).
        if (!(await exists(objectPath))) continue;
        await this.#withLock(directory, name, key, async () => {
          await unlink(objectPath).catch((error: unknown) => {
            if (codeOf(error) !== 'ENOENT') throw error;
          });
        });
        await this.#pruneDirectories(directory);
      } catch (error) {
        throw asStorageError('delete', key, error);
      }
    }
  }

  /**
   * Keys under `directory` (holding keys starting with `base`) that start with `prefix` and sort
   * after `after`, in byte order.
   */
  async *#walk(directory: string, base: string, prefix: string, after: string | undefined): AsyncGenerator<ObjectInfo> {
    let names: string[];
    try {
      names = await readdir(directory);
    } catch (error) {
      if (codeOf(error) === 'ENOENT' || codeOf(error) === 'ENOTDIR') return;
      throw error;
    }
    const entries: Array<{ sortKey: Buffer; key: string; directory: boolean; name: string }> = [];
    for (const name of names) {
      const kind = name.slice(-2);
      if (kind !== OBJECT && kind !== DIRECTORY) continue;
      const segment = unescapeSegment(name.slice(0, -2));
      if (segment === undefined) continue;
      const key = base + segment + (kind === DIRECTORY ? '/' : '');
      if (!key.startsWith(prefix)) continue;
      entries.push({ sortKey: Buffer.from(key), key, directory: kind === DIRECTORY, name });
    }
    entries.sort((a, b) => Buffer.compare(a.sortKey, b.sortKey));
    const afterBytes = after === undefined ? undefined : Buffer.from(after);
    for (const entry of entries) {
      if (entry.directory) {
        // Every key below starts with entry.key: skip the directory when all of them sort at or before `after`.
        if (afterBytes && Buffer.compare(entry.sortKey, afterBytes) <= 0 && !after!.startsWith(entry.key)) continue;
        yield* this.#walk(join(directory, entry.name), entry.key, entry.key, after);
        continue;
      }
      if (afterBytes && Buffer.compare(entry.sortKey, afterBytes) <= 0) continue;
      const info = await this.head(entry.key);
      if (info) yield info;
    }
  }

  /** Takes the key's lock file (O_EXCL), runs `work`, and releases it. */
  async #withLock<T>(directory: string, name: string, key: string, work: () => Promise<T>): Promise<T> {
    const lockPath = join(directory, name + LOCK);
    const token = `${process.pid} ${randomBytes(8).toString('hex')}`;
    const deadline = Date.now() + this.#lockTimeoutMs;
    for (let attempt = 0; ; attempt++) {
      // Written aside, then linked into place: the lock appears with its holder in it, so a
      // process killed while taking it leaves no empty lock for others to wait out.
      const aside = join(directory, `${name}${TEMP}lock-${randomBytes(6).toString('hex')}`);
      try {
        await writeFile(aside, token, { flag: 'wx' });
        try {
          await link(aside, lockPath);
        } finally {
          await unlink(aside).catch(() => undefined);
        }
        break;
      } catch (error) {
        const code = codeOf(error);
        if (code === 'ENOENT') {
          // The directory is missing, or was pruned by a delete in between: create it and retry.
          await mkdir(directory, { recursive: true });
          continue;
        }
        if (code !== 'EEXIST') throw error;
        await this.#breakIfStale(lockPath);
        if (Date.now() > deadline)
          throw new StorageError(`file store: timed out waiting for the lock of ${key}`, { key });
        await sleep(Math.min(50, 1 + attempt) * (0.5 + Math.random()));
      }
    }
    heldTokens.add(token);
    try {
      return await work();
    } finally {
      heldTokens.delete(token);
      await unlink(lockPath).catch(() => undefined);
    }
  }

  /** Removes a lock left by a process that is gone (or that is too old to be a live write). */
  async #breakIfStale(lockPath: string): Promise<void> {
    let content: string;
    let modified: number;
    try {
      content = await readFile(lockPath, 'utf8');
      modified = (await stat(lockPath)).mtimeMs;
    } catch {
      return; // Released meanwhile.
    }
    const pid = Number(content.split(' ')[0]);
    const old = Date.now() - modified > this.#staleLockMs;
    // An empty lock is one being written; it is stale only when old.
    const dead =
      content !== '' &&
      (!Number.isInteger(pid) ||
        pid <= 0 ||
        (pid === process.pid ? !heldTokens.has(content) : !(await processAlive(pid))));
    if (!dead && !old) return;
    // Move it aside atomically and check that what moved is the lock judged stale; if a new
    // holder took the name meanwhile, give it back.
    const aside = `${lockPath.slice(0, -LOCK.length)}${TEMP}stale-${randomBytes(6).toString('hex')}`;
    try {
      await rename(lockPath, aside);
    } catch {
      return;
    }
    const moved = await readFile(aside, 'utf8').catch(() => content);
    if (moved !== content) await link(aside, lockPath).catch(() => undefined);
    await unlink(aside).catch(() => undefined);
  }

  /** Removes empty directories from `directory` up to the root; stops at the first that is not empty. */
  async #pruneDirectories(directory: string): Promise<void> {
    let current = directory;
    while (current !== this.root && current.startsWith(this.root)) {
      try {
        await rmdir(current);
      } catch {
        return;
      }
      current = join(current, '..');
    }
  }

  #location(key: string): { directory: string; name: string } {
    const segments = key.split('/');
    const last = segments.pop()!;
    const directory = join(this.root, ...segments.map((segment) => escapeSegment(segment, key) + DIRECTORY));
    return { directory, name: escapeSegment(last, key) };
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
