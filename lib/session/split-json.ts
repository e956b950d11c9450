import { decodeUtf8, toBytes } from '../store/object-store.ts';

/**
 * `JSON.parse(decodeUtf8(bytes))` for a stored object whose bulk is one array of objects (a
 * view's tail items, a chunk's items), at `path` (the keys from the top object down to it).
 *
 * A large body decoded whole is one string the engine allocates apart from its young heap
 * (fresh pages, hundreds of page faults for a view of a few hundred KiB), and that allocation
 * cost more than the parse itself. A body of two runs (RUN_BYTES) or more is decoded and parsed
 * in runs instead: the array's elements in runs cut where one element ends and the next begins
 * (`},{"`), each run parsed as an array and the runs joined, and the object around the array
 * parsed with a placeholder in its place.
 *
 * The result is always the one of the whole parse, and any error is the whole parse's own: each
 * piece is parsed from where the whole parse would be in the same state (just after the array's
 * `[`, at an element's start), so a piece parses only when its cut is a real boundary between
 * elements (a cut inside a string or a nested value leaves it unbalanced). Whenever something
 * does not fit (no such array, no cut, a piece that does not parse, a placeholder not at `path`),
 * the body is parsed whole.
 */
export function parseJsonBytes(bytes: Uint8Array, path: readonly string[], runBytes = RUN_BYTES): unknown {
  if (bytes.length < 2 * runBytes) return parseWhole(bytes);
  return parseInRuns(bytes, path, runBytes) ?? parseWhole(bytes);
}

/** About the bytes of one run of elements: well below the engine's large-object size. */
const RUN_BYTES = 48 * 1024;
/** Runs that may fail to parse (a cut inside an element, an end taken too late) before the body is parsed whole. */
const MAX_FAILED_CUTS = 8;

function parseWhole(bytes: Uint8Array): unknown {
  return JSON.parse(decodeUtf8(bytes));
}

// A piece decoded keeps a byte order mark it opens with: inside JSON one is no whitespace, so
// the piece fails to parse as the whole body would (decodeUtf8, for a whole body, drops it).
const pieceDecoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function decodePiece(bytes: Uint8Array): string {
  return pieceDecoder.decode(bytes);
}

const OPEN = 0x5b; // [
const CLOSE = 0x5d; // ]
const BRACE_OPEN = 0x7b; // {
const BRACE_CLOSE = 0x7d; // }
const COMMA = 0x2c; // ,
const QUOTE = 0x22; // "
const BACKSLASH = 0x5c; // backslash
/**
 * Stands in for the array while the object around it is parsed; no stored value holds it. Made
 * on first use: Workers refuse random values at a module's top level.
 */
let placeholder: string | undefined;

/**
 * The value of the JSON `bytes` parsed in runs of about `runBytes` as parseJsonBytes does, or
 * undefined where they are to be parsed whole (nothing parsed in runs: not UTF-8 JSON, no
 * array of objects at `path` found and cut).
 */
export function parseInRuns(bytes: Uint8Array, path: readonly string[], runBytes: number): unknown {
  try {
    return path.length === 0 ? undefined : splitParse(bytes, path, runBytes);
  } catch {
    return undefined;
  }
}

function splitParse(bytes: Uint8Array, path: readonly string[], runBytes: number): unknown {
  const key = toBytes(`${JSON.stringify(path[path.length - 1])}:`);
  const open = arrayStart(bytes, key);
  if (open === -1 || bytes[open + 1] !== BRACE_OPEN) return undefined;
  const parsed = parseElements(bytes, open + 1, runBytes);
  if (!parsed) return undefined;
  const { elements, close } = parsed;
  placeholder ??= `tailgate split ${crypto.randomUUID()}`;
  const around = JSON.parse(
    `${decodeUtf8(bytes.subarray(0, open))}${JSON.stringify(placeholder)}${decodePiece(bytes.subarray(close + 1))}`,
  ) as unknown;
  let holder: unknown = around;
  for (const step of path.slice(0, -1)) holder = isObject(holder) ? holder[step] : undefined;
  const last = path[path.length - 1]!;
  if (!isObject(holder) || holder[last] !== placeholder) return undefined;
  holder[last] = elements;
  return around;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The offset of the first `[` right after `key` (`"name":`), or -1. */
function arrayStart(bytes: Uint8Array, key: Uint8Array): number {
  for (let at = bytes.indexOf(OPEN, key.length); at !== -1; at = bytes.indexOf(OPEN, at + 1)) {
    let matched = true;
    for (let index = 0; index < key.length && matched; index++) matched = bytes[at - key.length + index] === key[index];
    if (matched) return at;
  }
  return -1;
}

/** The offset of the last `]` after `after` and before `before` that follows a `}` (where the array may end), or -1. */
function arrayEnd(bytes: Uint8Array, after: number, before: number): number {
  for (let at = bytes.lastIndexOf(CLOSE, before - 1); at > after + 1; at = bytes.lastIndexOf(CLOSE, at - 1))
    if (bytes[at - 1] === BRACE_CLOSE) return at;
  return -1;
}

/**
 * The offset of the first `}` of a `},{"` at or after `from` and before `end`, or -1: where one
 * element of the array may end and the next begin. Never inside a string, where a `"` is `\"`,
 * unless the string ends there; but inside an element at times (its nested objects in an array).
 */
function nextCut(bytes: Uint8Array, from: number, end: number): number {
  for (let at = bytes.indexOf(BRACE_CLOSE, from); at !== -1 && at + 3 < end; at = bytes.indexOf(BRACE_CLOSE, at + 1))
    if (bytes[at + 1] === COMMA && bytes[at + 2] === BRACE_OPEN && bytes[at + 3] === QUOTE) return at;
  return -1;
}

/**
 * The offset of the `}` ending the first element that ends at or after `from` and is followed by
 * another, read byte by byte from `start`, the start of an element (its strings and nesting
 * followed), or -1 when none does before `end`.
 */
function exactCut(bytes: Uint8Array, start: number, from: number, end: number): number {
  let depth = 0;
  for (let at = start; at < end; at++) {
    const byte = bytes[at];
    if (byte === QUOTE) {
      for (at++; at < end && bytes[at] !== QUOTE; at++) if (bytes[at] === BACKSLASH) at++;
    } else if (byte === BRACE_OPEN || byte === OPEN) depth++;
    else if ((byte === BRACE_CLOSE || byte === CLOSE) && --depth === 0 && at >= from && bytes[at + 1] === COMMA)
      return at;
  }
  return -1;
}

/**
 * The elements of the array whose first element starts at `start`, parsed in runs, and the
 * offset of its `]`; null when it is not found in MAX_FAILED_CUTS tries. Its end is taken at the
 * last `}]` of the body (nothing after a view's or a chunk's items holds one), or an earlier one
 * when the run up to it does not parse. Once a cut fell inside an element (their nested objects
 * in arrays), the runs after it are cut where exactCut finds their elements' ends.
 */
function parseElements(
  bytes: Uint8Array,
  start: number,
  runBytes: number,
): { elements: unknown[]; close: number } | null {
  const elements: unknown[] = [];
  let close = arrayEnd(bytes, start - 1, bytes.length);
  let exact = false;
  for (let failures = 0; close !== -1 && failures <= MAX_FAILED_CUTS; ) {
    const from = start + runBytes;
    const cut =
      close - from <= runBytes / 2 ? -1 : exact ? exactCut(bytes, start, from, close) : nextCut(bytes, from, close);
    const runEnd = cut === -1 ? close : cut + 1;
    const run = parseRun(bytes, start, runEnd);
    if (run) {
      for (const element of run) elements.push(element);
      if (runEnd === close) return { elements, close };
      start = runEnd + 1;
      continue;
    }
    failures += 1;
    // No cut: the array ends before. A cut inside an element: this run again, cut exactly.
    if (cut === -1) close = arrayEnd(bytes, start - 1, close);
    else if (exact) return null;
    else exact = true;
  }
  return null;
}

function parseRun(bytes: Uint8Array, start: number, end: number): unknown[] | null {
  try {
    return JSON.parse(decodePiece(bracketed(bytes, start, end))) as unknown[];
  } catch {
    return null;
  }
}

/**
 * Where runs are copied between `[` and `]`, so each decodes into one flat string: a run
 * decoded and then bracketed (`[${run}]`) is a joined string the parse copies whole first,
 * a second allocation of the run's size. Runs are parsed one at a time, synchronously; a run
 * longer than the buffer (an element larger than a run) is copied into bytes of its own.
 */
let runBuffer: Uint8Array | undefined;

/** `bytes` from `start` to `end` between `[` and `]`. */
function bracketed(bytes: Uint8Array, start: number, end: number): Uint8Array {
  const length = end - start + 2;
  runBuffer ??= new Uint8Array(2 * RUN_BYTES);
  const target = length <= runBuffer.length ? runBuffer.subarray(0, length) : new Uint8Array(length);
  target[0] = OPEN;
  target.set(bytes.subarray(start, end), 1);
  target[length - 1] = CLOSE;
  return target;
}
