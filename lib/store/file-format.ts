import { Buffer } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import { closeSync, fstatSync, openSync, readSync, statSync, writeSync, writevSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { getPriority } from 'node:os';
import process from 'node:process';
import { StorageError } from '../errors.ts';
import { sha256Hex } from '../hash.ts';
import { canonicalEtag } from './etag.ts';
import type { ObjectInfo, PutOptions } from './object-store.ts';

/**
 * The file store's on-disk format: how key segments are escaped into names, the tags of
 * objects, directories, locks and temp files, the header line of an object file, and the
 * small file-system helpers the store uses.
 */

export interface Header {
  /** Per-key version, counting writes since the key was (re)created. */
  v: number;
  e: string;
  m: Record<string, string>;
  t?: string;
  u: number;
  /** The key, in the objects whose name is mapped (`escapeName`): the name does not say it. */
  k?: string;
}

/**
 * Unique strings without a call of randomBytes each: 64 random bits drawn once per process,
 * then a counter. Etags, lock tokens and temp names need only to differ from every other one
 * (another process draws other bits; a process restarted under the same pid too), not to be
 * unpredictable; a randomBytes call per name was about 0.3 s of a 100,000-item load's event loop.
 */
const processBits = randomBytes(8).toString('hex');
let issued = 0;

/** A string that no other call, in this process or any other, returns: 16 hex digits and a counter. */
export function uniqueTag(): string {
  return `${processBits}${(issued++).toString(36)}`;
}

/** The header of a put's new object: its version, a new etag (the version and a unique tag), the put's metadata. */
export function newHeader(key: string, name: string, version: number, options: PutOptions): Header {
  return {
    v: version,
    e: `${version}-${uniqueTag()}`,
    m: { ...(options.metadata ?? {}) },
    ...(options.contentType !== undefined ? { t: options.contentType } : {}),
    u: Date.now(),
    ...(name.includes(MAPPED) ? { k: key } : {}),
  };
}

/**
 * The permissions of what the store makes: its user's alone, whatever the umask (docs/SECURITY.md,
 * "What the operator keeps secret": whoever reads the store reads every conversation).
 */
export const PRIVATE_FILE = 0o600;
export const PRIVATE_DIRECTORY = 0o700;

export const OBJECT = '~o';
export const DIRECTORY = '~d';
export const LOCK = '~l';
export const TEMP = '~t';
export const BREAKER = '~b';
/** Stands between a long segment's escaped start and the hash of the whole segment. */
export const MAPPED = '~h';
export const NEWLINE = 0x0a;
export const MAX_LIST_LIMIT = 1000;
export const SAFE_BYTE = /^[a-z0-9._-]$/;

/**
 * Most file systems allow 255 bytes per name; the tag and a temp suffix (`~t<pid>-<12 hex>`)
 * need the rest.
 */
export const MAX_ESCAPED_SEGMENT = 230;
/** How much of a long segment's escaped form a mapped name keeps, before `~h` and the hash. */
const MAPPED_PREFIX = 160;

function escapeBytes(segment: string): string {
  let escaped = '';
  for (const byte of Buffer.from(segment)) {
    const char = String.fromCharCode(byte);
    escaped += SAFE_BYTE.test(char) ? char : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return escaped;
}

/** A directory segment's name: escaped, and at most MAX_ESCAPED_SEGMENT bytes. */
export function escapeSegment(segment: string, key: string): string {
  const escaped = escapeBytes(segment);
  if (escaped.length > MAX_ESCAPED_SEGMENT) {
    throw new StorageError(
      `file store: a directory segment of key ${key} is too long (${escaped.length} bytes escaped, at most ` +
        `${MAX_ESCAPED_SEGMENT})`,
      { key },
    );
  }
  return escaped;
}

/**
 * Why the file store cannot hold keys under `keyPrefix`, or null: every segment of the
 * prefix is a directory, whose name may not be mapped as an object's is (a listing tells keys
 * from directory names), so each must fit MAX_ESCAPED_SEGMENT bytes once escaped (upper case
 * and non-ASCII count three a byte). Such a prefix would fail every read and write.
 */
export function keyPrefixProblem(keyPrefix: string): string | null {
  for (const segment of keyPrefix.split('/').slice(0, -1)) {
    const escaped = escapeBytes(segment).length;
    if (escaped > MAX_ESCAPED_SEGMENT)
      return (
        `the file store keeps each segment as a directory name of at most ${MAX_ESCAPED_SEGMENT} bytes once ` +
        `escaped (upper case counts three a byte); the segment ${segment.slice(0, 24)}... takes ${escaped}: ` +
        'use a shorter or lower-case one'
      );
  }
  return null;
}

/**
 * An object's name: its last segment escaped or, when that is longer than
 * MAX_ESCAPED_SEGMENT, mapped to its first escaped bytes, `~h` and 40 hex characters of the
 * segment's SHA-256 (its header then holds the key). Any key of up to 1,024 bytes fits.
 */
export function escapeName(segment: string): string {
  const escaped = escapeBytes(segment);
  if (escaped.length <= MAX_ESCAPED_SEGMENT) return escaped;
  let cut = MAPPED_PREFIX;
  // Not inside a `%XX`.
  const percent = escaped.lastIndexOf('%', cut - 1);
  if (percent > cut - 3) cut = percent;
  return `${escaped.slice(0, cut)}${MAPPED}${sha256Hex(segment).slice(0, 40)}`;
}

export function unescapeSegment(escaped: string): string | undefined {
  // Safe bytes only (most names, records' among them): the name is the segment.
  if (!escaped.includes('%')) return escaped;
  const bytes: number[] = [];
  for (let index = 0; index < escaped.length; index++) {
    const char = escaped[index]!;
    if (char === '%') {
      const byte = Number.parseInt(escaped.slice(index + 1, index + 3), 16);
      if (Number.isNaN(byte)) return undefined;
      bytes.push(byte);
      index += 2;
    } else {
      bytes.push(char.charCodeAt(0));
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

/** `path` opened for reading, or null when there is no such file. */
export function openSyncIfExists(path: string): number | null {
  try {
    return openSync(path, 'r');
  } catch (error) {
    const code = codeOf(error);
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    throw error;
  }
}

/** The header line of an object file, where its body starts, and the body's size. */
interface HeaderLine {
  header: Header;
  bodyStart: number;
  size: number;
  /**
   * The whole body, when the read that found the header line reached the end of the file (a
   * small object): valid only until the next header read, which reuses the buffer.
   */
  body?: Buffer;
}

/** Where header reads land: they are synchronous, so one buffer serves them all. */
const scratch = Buffer.allocUnsafe(4096);

/**
 * The header line of the object file open as `fd`, read synchronously: a header is a few
 * hundred bytes, in the page cache once written or read, and a listing reads one per object
 * it returns. Through the thread pool the round trips of its open, stat, read and close cost
 * far more than the reads themselves (docs/STORAGE.md, the file store).
 */
export function readHeaderSync(fd: number, key: string, fileSize?: number): HeaderLine {
  const chunks: Buffer[] = [];
  for (let position = 0; ; ) {
    const bytesRead = readSync(fd, scratch, 0, scratch.length, position);
    if (bytesRead === 0) throw new StorageError(`file store: object file of ${key} has no header`, { key });
    const newline = scratch.subarray(0, bytesRead).indexOf(NEWLINE);
    if (newline < 0) {
      // Copied: the next read lands in the scratch buffer again.
      chunks.push(Buffer.from(scratch.subarray(0, bytesRead)));
      position += bytesRead;
      continue;
    }
    chunks.push(scratch.subarray(0, newline));
    const header = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Header;
    const bodyStart = position + newline + 1;
    // A short read of a regular file ends at its end (an object file never changes once in
    // place): the file's size without an fstat, as for a listing's tombstones and small objects.
    if (bytesRead < scratch.length) {
      return {
        header,
        bodyStart,
        size: bytesRead - newline - 1,
        body: scratch.subarray(newline + 1, bytesRead),
      };
    }
    return { header, bodyStart, size: (fileSize ?? fstatSync(fd).size) - bodyStart };
  }
}

export interface HeaderRead {
  header: Header;
  size: number;
}

/** The header and body size of the object file at `path` (null: there is none), read synchronously. */
export function readHeaderAt(path: string, key: string): HeaderRead | null {
  const fd = openSyncIfExists(path);
  if (fd === null) return null;
  try {
    return readHeaderSync(fd, key);
  } finally {
    closeSync(fd);
  }
}

/** `length` bytes of the file open as `fd` from `position`, read synchronously. */
export function readSyncAt(fd: number, length: number, position: number, key: string): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let done = 0; done < length; ) {
    const bytesRead = readSync(fd, bytes, done, length - done, position + done);
    if (bytesRead === 0)
      throw new StorageError(`file store get ${key} failed: object file is truncated`, { operation: 'get', key });
    done += bytesRead;
  }
  return bytes;
}

/** Writes all of `bytes` to the file open as `fd` at `position`, synchronously. */
export function writeAllSync(fd: number, bytes: Uint8Array, position: number): void {
  for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done, bytes.length - done, position + done);
}

/** Linux's IOV_MAX: the most buffers one writev takes. */
const MAX_WRITEV_BUFFERS = 1024;

/**
 * Writes `parts`, one after another, to the file open as `fd` from `position`, synchronously: a
 * writev of up to MAX_WRITEV_BUFFERS of them at a time, and where one writes short (which POSIX
 * allows), the rest of its parts with writeAllSync.
 */
export function writePartsSync(fd: number, parts: readonly Uint8Array[], position: number): void {
  let at = position;
  for (let first = 0; first < parts.length; first += MAX_WRITEV_BUFFERS) {
    const batch = parts.slice(first, first + MAX_WRITEV_BUFFERS);
    let written = writevSync(fd, batch, at);
    for (const part of batch) {
      if (written < part.length) writeAllSync(fd, part.subarray(written), at + written);
      written = Math.max(0, written - part.length);
      at += part.length;
    }
  }
}

export function infoOf(key: string, header: Header, size: number): ObjectInfo {
  // Canonical (./etag.ts): objects written before kept their etag quoted.
  return { key, size, etag: canonicalEtag(header.e), uploaded: new Date(header.u), metadata: { ...header.m } };
}

/** Whether `path` exists: a missing file answers without an exception (an error's stack costs more than the stat). */
export function exists(path: string): boolean {
  try {
    return statSync(path, { throwIfNoEntry: false }) !== undefined;
  } catch (error) {
    const code = codeOf(error);
    if (code === 'ENOENT' || code === 'ENOTDIR') return false;
    throw error;
  }
}

/**
 * Whether a process exists. Signal 0 answers on Node. Deno without --allow-run may not send
 * it, nor read /proc without --allow-all (a SIGKILLed server's locks were then taken for a
 * live process's until `staleLockMs`): getpriority(2) answers there, under the --allow-sys its
 * servers run with, for any process (ESRCH: none). /proc answers last (Linux). When nothing can
 * tell, the process counts as alive and only the lock's age breaks it.
 */
export async function processAlive(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    const code = codeOf(error);
    if (code === 'ESRCH') return false;
    if (code === 'EPERM') return true; // It exists but belongs to someone else.
  }
  try {
    getPriority(pid);
    return true;
  } catch (error) {
    // A system error's own code is under `info` (`code` is ERR_SYSTEM_ERROR).
    if ((error as { info?: { code?: unknown } } | null)?.info?.code === 'ESRCH') return false;
  }
  try {
    await stat(`/proc/${pid}`);
    return true;
  } catch (error) {
    return !(codeOf(error) === 'ENOENT' && exists('/proc/self'));
  }
}

export function codeOf(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error
    ? String((error as { code: unknown }).code)
    : undefined;
}

export function asStorageError(operation: string, key: string, error: unknown): StorageError {
  if (error instanceof StorageError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new StorageError(`file store ${operation} ${key} failed: ${message}`, { operation, key });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
