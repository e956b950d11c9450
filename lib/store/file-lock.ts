import { randomBytes } from 'node:crypto';
import { link, mkdir, readdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import process from 'node:process';
import { StorageError } from '../errors.ts';
import { BREAKER, LOCK, TEMP, codeOf, processAlive, sleep } from './file-format.ts';

/**
 * The file store's per-key write lock, exact for any number of writers in one process and
 * across processes of one machine (one PID namespace) sharing a directory.
 *
 * - In a process, the writers of a key take turns in a FIFO queue before they touch the lock
 *   file, so a process never contends with itself on disk.
 * - Across processes, the lock is the file `<name>~l`, holding `<pid> <random>`. It is written
 *   aside and `link`ed into place (O_EXCL), so it never appears empty. Its holder's token is in
 *   `heldTokens` from before it can appear until after it is gone: a lock with this process's
 *   pid and a token not held is a dead predecessor's with the same pid (a container restarted).
 * - A lock is stale when its process is gone, or it is older than `staleLockMs` (a reused pid).
 *   Breakers of one lock take turns through the breaker file `<name>~b`, written the same way,
 *   and remove the lock only if it still holds what they judged stale. A dead holder removes
 *   nothing, so no breaker can remove a lock taken after the one it judged.
 * - Temp files are named `<name>~t<pid>-<random>`, so that `sweepTemps` can tell a dead
 *   writer's leftovers from a live one's.
 */

export interface LockTimes {
  /** A lock older than this is taken over even if its process seems alive (pid reuse). */
  staleLockMs: number;
  /** How long a write waits for a key's lock before failing with StorageError. */
  lockTimeoutMs: number;
}

/** Per lock path, the promise the next writer in this queue waits for. */
export type WriterQueues = Map<string, Promise<void>>;

/** The queues of the process's writers (a FileStore may have its own: `separateQueue`). */
export const processQueues: WriterQueues = new Map();

/** Tokens of the locks and breaker files this process holds or is about to hold. */
const heldTokens = new Set<string>();

const ignore = () => undefined;

function randomHex(bytes: number): string {
  return randomBytes(bytes).toString('hex');
}

/** A temp file's name in a key's directory: `<name>~t<pid>-<random>`. */
export function tempName(name: string): string {
  return `${name}${TEMP}${process.pid}-${randomHex(4)}`;
}

/** Takes the lock of key `name` in `directory`, runs `work`, and releases it. */
export async function withKeyLock<T>(
  directory: string,
  name: string,
  key: string,
  times: LockTimes,
  queues: WriterQueues,
  work: () => Promise<T>,
): Promise<T> {
  const lockPath = join(directory, name + LOCK);
  const deadline = Date.now() + times.lockTimeoutMs;
  const previous = queues.get(lockPath);
  let release!: () => void;
  const done = new Promise<void>((resolve) => {
    release = resolve;
  });
  const tail = previous ? previous.then(() => done) : done;
  queues.set(lockPath, tail);
  try {
    if (previous) await previous;
    // The writers ahead were bounded by their own deadlines; one that waited past its own gives up here.
    if (Date.now() > deadline) throw timedOut(key);
    const token = `${process.pid} ${randomHex(8)}`;
    heldTokens.add(token);
    try {
      for (let attempt = 0; !(await tryCreate(directory, name, lockPath, token)); attempt++) {
        await breakIfStale(directory, name, lockPath, times.staleLockMs);
        if (Date.now() > deadline) throw timedOut(key);
        await sleep(Math.min(50, 1 + attempt) * (0.5 + Math.random()));
      }
      try {
        return await work();
      } finally {
        await unlink(lockPath).catch(ignore);
      }
    } finally {
      heldTokens.delete(token);
    }
  } finally {
    release();
    if (queues.get(lockPath) === tail) queues.delete(lockPath);
  }
}

function timedOut(key: string): StorageError {
  return new StorageError(`file store: timed out waiting for the lock of ${key}`, { key });
}

/**
 * Creates `path` holding `content` unless it exists (then false): written aside and `link`ed
 * into place, so it never appears empty.
 */
async function tryCreate(directory: string, name: string, path: string, content: string): Promise<boolean> {
  for (;;) {
    const aside = join(directory, tempName(name));
    try {
      await writeFile(aside, content, { flag: 'wx' });
      await link(aside, path);
      return true;
    } catch (error) {
      const code = codeOf(error);
      if (code === 'EEXIST') return false;
      if (code !== 'ENOENT') throw error;
      // The directory is missing, or was pruned by a delete in between: create it and retry.
      await mkdir(directory, { recursive: true });
    } finally {
      // Also after a failed write (a full disk): an aside file is never left behind.
      await unlink(aside).catch(ignore);
    }
  }
}

interface LockFile {
  content: string;
  modified: number;
}

async function readLock(path: string): Promise<LockFile | null> {
  try {
    const [content, info] = await Promise.all([readFile(path, 'utf8'), stat(path)]);
    return { content, modified: info.mtimeMs };
  } catch {
    return null; // Released meanwhile.
  }
}

/** Whether a lock or breaker file's process is gone, or the file is too old to be a live one's. */
async function isStale(file: LockFile, staleLockMs: number): Promise<boolean> {
  if (Date.now() - file.modified > staleLockMs) return true;
  if (file.content === '') return false; // Legacy: written in place and not yet filled.
  const pid = Number(file.content.split(' ')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return true;
  return pid === process.pid ? !heldTokens.has(file.content) : !(await processAlive(pid));
}

/** Removes the lock at `lockPath` if it is stale, taking turns with other breakers of it. */
async function breakIfStale(directory: string, name: string, lockPath: string, staleLockMs: number): Promise<void> {
  const judged = await readLock(lockPath);
  if (!judged || !(await isStale(judged, staleLockMs))) return;
  const breakerPath = join(directory, name + BREAKER);
  const token = `${process.pid} ${randomHex(8)}`;
  heldTokens.add(token);
  try {
    if (!(await tryCreate(directory, name, breakerPath, token))) {
      // Another process is breaking it (or died doing so); the caller tries the lock again.
      await breakBreakerIfStale(directory, name, breakerPath, staleLockMs);
      return;
    }
    try {
      const now = await readLock(lockPath);
      if (now?.content === judged.content) {
        await unlink(lockPath).catch(ignore);
        // The dead holder may have left its temp file.
        await sweepTemps(directory, staleLockMs, name);
      }
    } finally {
      await unlink(breakerPath).catch(ignore);
    }
  } finally {
    heldTokens.delete(token);
  }
}

/**
 * Removes a breaker file whose process died while breaking. Moved aside atomically, and given
 * back when what moved is not the file judged stale (another breaker's, taken meanwhile).
 */
async function breakBreakerIfStale(
  directory: string,
  name: string,
  breakerPath: string,
  staleLockMs: number,
): Promise<void> {
  const judged = await readLock(breakerPath);
  if (!judged || !(await isStale(judged, staleLockMs))) return;
  const aside = join(directory, tempName(name));
  try {
    await rename(breakerPath, aside);
  } catch {
    return;
  }
  const moved = await readFile(aside, 'utf8').catch(() => judged.content);
  if (moved !== judged.content) await link(aside, breakerPath).catch(ignore);
  await unlink(aside).catch(ignore);
}

/**
 * Removes the temp files in `directory` (only those of key name `name` when given) that a dead
 * process left: their pid is gone, or they are older than `staleLockMs`. Safe while other
 * processes write: a live writer's temp file is never removed.
 */
export async function sweepTemps(directory: string, staleLockMs: number, name?: string): Promise<number> {
  let names: string[];
  try {
    names = await readdir(directory);
  } catch {
    return 0;
  }
  let removed = 0;
  for (const entry of names) {
    const at = entry.lastIndexOf(TEMP);
    if (at < 0 || entry.includes('/') || (name !== undefined && entry.slice(0, at) !== name)) continue;
    const path = join(directory, entry);
    const pid = Number(/^(\d+)-/.exec(entry.slice(at + TEMP.length))?.[1] ?? Number.NaN);
    const dead = Number.isInteger(pid) && pid > 0 && pid !== process.pid && !(await processAlive(pid));
    const info = dead ? null : await stat(path).catch(() => null);
    const old = info?.isFile() === true && Date.now() - info.mtimeMs > staleLockMs;
    if ((dead || old) && (await unlink(path).then(() => true, ignore))) removed++;
  }
  return removed;
}
