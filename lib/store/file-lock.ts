import { randomBytes } from 'node:crypto';
import { Buffer } from 'node:buffer';
import {
  closeSync,
  fstatSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { readdir, stat, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { StorageError } from '../errors.ts';
import { sha256Hex } from '../hash.ts';
import {
  BREAKER,
  LOCK,
  PRIVATE_DIRECTORY,
  PRIVATE_FILE,
  TEMP,
  codeOf,
  processAlive,
  sleep,
  uniqueTag,
} from './file-format.ts';

/**
 * The file store's per-key write lock, exact for any number of writers in one process and
 * across processes of one machine and one PID namespace sharing a directory (processes in
 * separate containers must not share one: their pids mean nothing to each other).
 *
 * - In a process, the writers of a key take turns in a FIFO queue before they touch the lock
 *   file, so a process never contends with itself on disk.
 * - Across processes, the lock is the file `<name>~l`, holding `<pid> <random>`. It is written
 *   aside and `link`ed into place (O_EXCL), so it never appears empty. Its holder's token is in
 *   `heldTokens` from before it can appear until after it is gone: a lock with this process's
 *   pid and a token not held is a dead predecessor's with the same pid (a container restarted).
 * - A lock is stale when its process is gone, or it is older than `staleLockMs` (a reused
 *   pid). Breakers of one lock take turns through its guard file (`removeIfStale`), and only
 *   the lock they judged is removed. A holder checks that the lock is still its own before it
 *   commits, so one stalled past `staleLockMs` fails (and leaves the lock alone) instead of
 *   writing over the next holder.
 * - Temp files are named `<name>~t<pid>-<number>` (`tempName`), so that `sweepLeftovers` can tell a dead
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

/**
 * The last temp name's number: 48 bits, from a random start, so that a process restarted under
 * the same pid (a container's) does not count through its predecessor's leftovers' names.
 */
let tempCount = randomBytes(6).readUIntBE(0, 6);

/**
 * A temp file's name in a key's directory: `<name>~t<pid>-<12 hex digits>`, the digits counted,
 * not drawn (a randomBytes call per name cost more than the file's write): unique in this
 * process, and this pid's while it lives. A name met anyway (a dead predecessor's leftover) is
 * EEXIST where it is made, and the maker takes the next one.
 */
export function tempName(name: string): string {
  tempCount = (tempCount + 1) % 2 ** 48;
  return `${name}${TEMP}${process.pid}-${tempCount.toString(16).padStart(12, '0')}`;
}

function newToken(): string {
  return `${process.pid} ${uniqueTag()}`;
}

/**
 * Takes the lock of key `name` in `directory`, runs `work`, and releases it. `work` gets
 * `stillHeld`, to check just before it commits that the lock was not taken over meanwhile
 * (only a holder stalled past `staleLockMs` loses it).
 */
export async function withKeyLock<T>(
  directory: string,
  name: string,
  key: string,
  times: LockTimes,
  queues: WriterQueues,
  work: (stillHeld: () => Promise<void>) => Promise<T>,
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
    const token = newToken();
    heldTokens.add(token);
    try {
      for (let attempt = 0; !tryCreate(directory, name, lockPath, token); attempt++) {
        // A dead holder may have left its temp file too.
        if (await removeIfStale(directory, name, lockPath, times.staleLockMs))
          await sweepLeftovers(directory, times.staleLockMs, name);
        if (Date.now() > deadline) throw timedOut(key);
        await sleep(Math.min(50, 1 + attempt) * (0.5 + Math.random()));
      }
      // Checked once, just before the commit: a holder that finds its lock taken over fails
      // and leaves the new holder's lock alone; one that commits releases its own.
      let lost = false;
      const stillHeld = async () => {
        if (holds(lockPath, token)) return;
        lost = true;
        throw new StorageError(`file store: the lock of ${key} was taken over while held (older than staleLockMs)`, {
          key,
        });
      };
      try {
        return await work(stillHeld);
      } finally {
        // Only its own: a holder stalled past staleLockMs after its check (in its directory's
        // fsync, say) may find its lock broken and another holder's in its place.
        if (!lost && holds(lockPath, token)) unlinkQuietly(lockPath);
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
 * into place, so it never appears empty. Synchronous, as the calls of a put are but its fsync
 * (file.ts): each takes microseconds, where a thread-pool round trip waits behind fsyncs.
 */
function tryCreate(directory: string, name: string, path: string, content: string): boolean {
  for (let missing = 0; ; ) {
    const aside = join(directory, tempName(name));
    let created = false;
    try {
      try {
        writeFileSync(aside, content, { flag: 'wx', mode: PRIVATE_FILE });
      } catch (error) {
        // Created, then failed (a full disk): ours to remove. EEXIST: another's name.
        created = codeOf(error) !== 'EEXIST' && codeOf(error) !== 'ENOENT';
        throw error;
      }
      created = true;
      linkSync(aside, path);
      return true;
    } catch (error) {
      const code = codeOf(error);
      if (code === 'EEXIST' && created) return false;
      if (code === 'EEXIST') continue; // The aside name was taken: another one.
      if (code !== 'ENOENT' || missing++ === 3) throw error;
      // The directory is missing, or was pruned by a delete in between: create it and retry.
      makeDirectory(directory);
    } finally {
      if (created) unlinkQuietly(aside);
    }
  }
}

/**
 * Creates `directory` and the directories above it that are missing, each made durable in its
 * parent (an fsync of the parent), as a put's own name is in its directory (file.ts): a key's
 * first object would otherwise survive a power loss only as far as its directory did. Rare (a
 * new session or generation), so synchronous.
 */
export function makeDirectory(directory: string): void {
  for (let tries = 1; ; tries++) {
    try {
      makeDurable(directory);
      return;
    } catch (error) {
      // A directory it made was pruned (empty) by another writer's delete before it made the one
      // below or synced it: made again, a few times; one that stays missing (under /proc) fails.
      if (codeOf(error) !== 'ENOENT' || tries === MAX_DIRECTORY_TRIES) throw error;
    }
  }
}

/** Times makeDirectory makes a directory another writer keeps pruning before it fails. */
const MAX_DIRECTORY_TRIES = 8;

function makeDurable(directory: string): void {
  const first = makeDirectories(directory);
  if (first === undefined) return;
  for (let created = directory; ; created = dirname(created)) {
    const fd = openSync(dirname(created), 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    if (created === first) return;
  }
}

/**
 * `mkdir -p`: the first directory it created, undefined when `directory` was there. A directory
 * still missing (ENOENT) once its parent is there is thrown, where Node's `recursive: true`
 * loops forever (a path under /proc, or under a dangling symlink).
 */
function makeDirectories(directory: string): string | undefined {
  try {
    mkdirSync(directory, PRIVATE_DIRECTORY);
    return directory;
  } catch (error) {
    if (codeOf(error) === 'EEXIST') return undefined;
    const parent = dirname(directory);
    if (codeOf(error) !== 'ENOENT' || parent === directory) throw error;
    const first = makeDirectories(parent);
    try {
      mkdirSync(directory, PRIVATE_DIRECTORY);
    } catch (again) {
      // Made meanwhile by another writer.
      if (codeOf(again) !== 'EEXIST') throw again;
    }
    return first ?? directory;
  }
}

/** Removes `path` if it is there (a name gone already, or swept, is fine). */
export function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Gone already.
  }
}

interface LockFile {
  content: string;
  modified: number;
}

/** A lock or guard file's content and age, both from one open file (not two lookups of the path). */
export function readLock(path: string): LockFile | null {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return null; // Released meanwhile.
  }
  try {
    const info = fstatSync(fd);
    return { content: readFileSync(fd, 'utf8'), modified: info.mtimeMs };
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}

/** Where `holds` reads a lock: a token is a few dozen bytes. */
const tokenScratch = Buffer.allocUnsafe(256);

/**
 * Whether the lock file at `path` holds `token`: its content only, one open, read and close, where
 * `readLock` also takes the file's age (two fstats), which a holder's check of its own lock does
 * not need. A read shorter than asked for is the file's end (a regular file that never changes
 * once in place); one that fills the buffer is of a longer content than any token.
 */
function holds(path: string, token: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return false; // Released or broken meanwhile.
  }
  try {
    const length = readSync(fd, tokenScratch, 0, tokenScratch.length, 0);
    return length < tokenScratch.length && tokenScratch.toString('utf8', 0, length) === token;
  } catch {
    return false;
  } finally {
    closeSync(fd);
  }
}

/** Whether a lock or guard file's process is gone, or the file is too old to be a live one's. */
async function isStale(file: LockFile, staleLockMs: number): Promise<boolean> {
  if (Date.now() - file.modified > staleLockMs) return true;
  if (file.content === '') return false; // Legacy: written in place and not yet filled.
  const pid = Number(file.content.split(' ')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return true;
  return pid === process.pid ? !heldTokens.has(file.content) : !(await processAlive(pid));
}

/**
 * Removes the lock (or guard) file at `path` if it is stale; true when this call removed it.
 * Breakers of one judged file take turns through its guard, `<name>~b<hash of its content>`:
 * tokens are unique, so each lock has its own guard, and a breaker that comes after the lock
 * was broken finds another file at `path` (or none) and removes nothing. A guard whose
 * breaker died is broken the same way, one level down.
 */
async function removeIfStale(
  directory: string,
  name: string,
  path: string,
  staleLockMs: number,
  depth = 0,
): Promise<boolean> {
  const judged = readLock(path);
  if (!judged || !(await isStale(judged, staleLockMs))) return false;
  const guard = join(directory, `${name}${BREAKER}${sha256Hex(judged.content).slice(0, 16)}`);
  const token = newToken();
  heldTokens.add(token);
  try {
    if (!tryCreate(directory, name, guard, token)) {
      if (depth < MAX_GUARD_DEPTH) await removeIfStale(directory, name, guard, staleLockMs, depth + 1);
      return false;
    }
    try {
      if (readLock(path)?.content !== judged.content) return false;
      unlinkQuietly(path);
      return true;
    } finally {
      unlinkQuietly(guard);
    }
  } finally {
    heldTokens.delete(token);
  }
}

/** Guards of guards: each level needs a breaker to die holding the one above. */
const MAX_GUARD_DEPTH = 8;

/**
 * Removes the temp files in `directory` (only those of key name `name` when given) that a dead
 * process left: their pid is gone, or they are older than `staleLockMs`; without `name`, also
 * the stale locks (through `removeIfStale`) and the guards of breakers that died. Safe while
 * other processes write: a live writer's files are never removed.
 */
export async function sweepLeftovers(directory: string, staleLockMs: number, name?: string): Promise<number> {
  let names: string[];
  try {
    names = await readdir(directory);
  } catch {
    return 0;
  }
  let removed = 0;
  for (const entry of names) {
    const at = entry.lastIndexOf(TEMP);
    const guardAt = entry.lastIndexOf(BREAKER);
    if (at >= 0 && (name === undefined || entry.slice(0, at) === name)) {
      const path = join(directory, entry);
      const pid = Number(/^(\d+)-/.exec(entry.slice(at + TEMP.length))?.[1] ?? Number.NaN);
      const dead = Number.isInteger(pid) && pid > 0 && pid !== process.pid && !(await processAlive(pid));
      const info = dead ? null : await stat(path).catch(() => null);
      const old = info?.isFile() === true && Date.now() - info.mtimeMs > staleLockMs;
      if ((dead || old) && (await unlink(path).then(() => true, ignore))) removed++;
    } else if (entry.endsWith(LOCK) && name === undefined) {
      // A lock whose holder died: broken as a writer would break it.
      if (await removeIfStale(directory, entry.slice(0, -LOCK.length), join(directory, entry), staleLockMs)) removed++;
    } else if (guardAt >= 0 && name === undefined) {
      // A guard left by a breaker that died, long after any breaker of its lock could still need it.
      const path = join(directory, entry);
      const guard = readLock(path);
      const old = guard !== null && Date.now() - guard.modified > staleLockMs;
      if (old && (await isStale({ ...guard, modified: Date.now() }, staleLockMs))) {
        if (await unlink(path).then(() => true, ignore)) removed++;
      }
    }
  }
  return removed;
}
