import { type Stats, closeSync, fstatSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { compareKeys } from './object-store.ts';
import {
  type HeaderRead,
  MAPPED,
  codeOf,
  openSyncIfExists,
  readHeaderAt,
  readHeaderSync,
  unescapeSegment,
} from './file-format.ts';

/**
 * One directory of the file store (file.ts) as a listing sees it: its object and subdirectory
 * names turned back into keys, in the keys' byte order, computed only as far as the listing reads.
 */

/** An object or a subdirectory of a directory being listed. */
export interface DirectoryEntry {
  /** The key after the directory's own key (`base`); a subdirectory's ends in `/`. */
  tail: string;
  /** The file or directory name. */
  name: string;
  directory: boolean;
  /** A mapped name's header, read already for its key (`escapeName` in file-format.ts). */
  read: HeaderRead | null | undefined;
}

const TILDE = 0x7e;
const OBJECT_TAG = 0x6f; // `~o`
const DIRECTORY_TAG = 0x64; // `~d`

/**
 * The entries of `directory` (holding keys starting with `base`) whose keys start with `prefix`
 * (which starts with `base`) and, for objects, sort after `after`, in byte order of their keys.
 * `need`: how many the caller expects to take (a listing's limit and one more); those come
 * without sorting the rest of the directory, which is sorted only if the caller reads on. The
 * directory is read when the first entry is asked for, with one synchronous call, as the
 * headers are: through the thread pool it waited behind the fsyncs of the puts in flight.
 */
export function* directoryEntries(
  directory: string,
  base: string,
  prefix: string,
  after: string | undefined,
  need: number,
): Generator<DirectoryEntry> {
  let names: string[];
  try {
    names = readdirSync(directory);
  } catch (error) {
    if (codeOf(error) === 'ENOENT' || codeOf(error) === 'ENOTDIR') return;
    throw error;
  }
  // What a tail must start with: every key here starts with `base`.
  const rest = prefix.slice(base.length);
  const entries: DirectoryEntry[] = [];
  // Whether every tail is of safe bytes only (no `%`, not mapped): then UTF-16 order is byte order.
  let ascii = true;
  for (const name of names) {
    // Only `<segment>~o` and `<segment>~d`: locks, breakers and temp files are not listed.
    if (name.charCodeAt(name.length - 2) !== TILDE) continue;
    const tag = name.charCodeAt(name.length - 1);
    const isDirectory = tag === DIRECTORY_TAG;
    if (!isDirectory && tag !== OBJECT_TAG) continue;
    const stem = name.slice(0, -2);
    let tail: string | undefined;
    let read: HeaderRead | null | undefined;
    if (!isDirectory && stem.includes(MAPPED)) {
      // A mapped name keeps only the start of its segment: the header has the key.
      read = readHeaderAt(join(directory, name), base);
      const key = read?.header.k;
      tail = key?.startsWith(base) ? key.slice(base.length) : undefined;
      ascii = false;
    } else if (stem.includes('%')) {
      const segment = unescapeSegment(stem);
      tail = segment === undefined ? undefined : isDirectory ? `${segment}/` : segment;
      ascii = false;
    } else {
      // Safe bytes only (most names, records' among them): the name is the segment.
      tail = isDirectory ? `${stem}/` : stem;
    }
    if (tail === undefined || (rest !== '' && !tail.startsWith(rest))) continue;
    // Listed before `after`: not sorted (a directory may hold keys after it).
    if (!isDirectory && after !== undefined && compareKeys(base + tail, after) <= 0) continue;
    entries.push({ tail, name, directory: isDirectory, read });
  }
  // The tails sort as the keys do (each key is `base` and its tail).
  yield* ascending(
    entries,
    ascii ? (a, b) => (a.tail < b.tail ? -1 : a.tail > b.tail ? 1 : 0) : (a, b) => compareKeys(a.tail, b.tail),
    need,
  );
}

/**
 * `items` in ascending order (no two equal): the `need` smallest picked in one pass, each
 * compared with the largest picked so far (about one comparison an item, where a sort of a
 * directory of 1,200 names made ten), then, only if the caller reads past them, the rest sorted.
 */
export function* ascending<T>(items: T[], compare: (a: T, b: T) => number, need: number): Generator<T> {
  if (items.length <= 2 * need) {
    yield* items.sort(compare);
    return;
  }
  const first: T[] = [];
  const others: T[] = [];
  for (const item of items) {
    if (first.length === need) {
      if (compare(item, first[need - 1]!) > 0) {
        others.push(item);
        continue;
      }
      others.push(first.pop()!);
    }
    // Where `item` goes among the picked ones (binary search).
    let low = 0;
    let high = first.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (compare(first[middle]!, item) < 0) low = middle + 1;
      else high = middle;
    }
    first.splice(low, 0, item);
  }
  yield* first;
  yield* others.sort(compare);
}

/**
 * A listed object's header read before, with the identity of the file it was read from (its
 * fstat): a listing of a long session's records reads the same tombstones' headers again and
 * again (a claim lists 100 of them, the packer 1,000), each an open, a read and a close.
 */
interface KnownHeader {
  ino: number;
  size: number;
  mtimeMs: number;
  ctimeMs: number;
  read: HeaderRead;
}

const knownHeaders = new Map<string, KnownHeader>();
/** At most this many headers are kept (about 200 bytes each); the oldest kept goes first. */
const MAX_KNOWN_HEADERS = 20_000;

/**
 * How long after its last change (ctime) a file's header may be kept: longer than the file
 * system's timestamp granularity. File systems with timestamps finer than a millisecond stamp
 * at the kernel's clock tick (at most 10 ms); others (1 s, FAT's 2 s) get the longer wait.
 */
const SETTLED_FINE_MS = 100;
const SETTLED_COARSE_MS = 3_000;

/**
 * The header and body size of the object file at `path` (null: there is none), as `readHeaderAt`
 * reads them, from a header read before when a `stat` of the path shows the very file it was
 * read from: one call where a read takes three. Exact, whichever process writes:
 * - An object file never changes once it has its name (a put writes a new file and links or
 *   renames it into place; a delete removes the name), so a name shows other bytes only as
 *   another file, with another inode number, or the same number reused after the file was freed.
 * - A header is kept only when read through an open file (the fstat and the read are of one
 *   file), and only once its ctime is older than the read's start by more than the timestamp
 *   granularity (`SETTLED_*`): a file that reuses its inode number was created after that read
 *   (the number was in use until then), so its ctime is later than the kept one, and the stat
 *   (inode, size, mtime, ctime) differs. Anything that changes the file itself (a link to it,
 *   as an overwrite's `keepAside` makes) changes its ctime too, and the header is read again.
 * - Assumed: file timestamps from this machine's clock (a local file system, as the store
 *   requires), not stepped back by more than the settling time in between.
 */
export function readListedHeader(path: string, key: string): HeaderRead | null {
  const known = knownHeaders.get(path);
  if (known) {
    const info = statIfExists(path);
    if (
      info?.ino === known.ino &&
      info.size === known.size &&
      info.mtimeMs === known.mtimeMs &&
      info.ctimeMs === known.ctimeMs
    )
      return known.read;
    knownHeaders.delete(path);
    if (!info) return null;
  }
  const started = Date.now();
  const fd = openSyncIfExists(path);
  if (fd === null) return null;
  try {
    const info = fstatSync(fd);
    const { header, size } = readHeaderSync(fd, key, info.size);
    const read = { header, size };
    const settled = info.ctimeMs % 1 !== 0 ? SETTLED_FINE_MS : SETTLED_COARSE_MS;
    // No inode number (some file systems, some runtimes) or no ctime: nothing kept.
    if (typeof info.ino === 'number' && info.ino > 0 && started - info.ctimeMs > settled) {
      if (knownHeaders.size >= MAX_KNOWN_HEADERS) knownHeaders.delete(knownHeaders.keys().next().value!);
      knownHeaders.set(path, { ino: info.ino, size: info.size, mtimeMs: info.mtimeMs, ctimeMs: info.ctimeMs, read });
    }
    return read;
  } finally {
    closeSync(fd);
  }
}

/** The stat of `path`, or null when there is no such file. */
function statIfExists(path: string): Stats | null {
  try {
    return statSync(path);
  } catch (error) {
    if (codeOf(error) === 'ENOENT' || codeOf(error) === 'ENOTDIR') return null;
    throw error;
  }
}
