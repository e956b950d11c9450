import { sha256Hex, md5Hex } from '../hash.ts';
import { contentText } from '../content.ts';
import {
  PREVIEW_CHARS,
  outputLength,
  type PayloadRef,
  type PromptItem,
  type PromptFunctionCallItem,
  type PromptFunctionCallOutputItem,
} from '../items.ts';

/** Outputs longer than this many characters are compacted. */
export const OUTPUT_LIMIT = 400;
/** String values inside call arguments longer than this many characters are compacted. */
export const ARGUMENT_LIMIT = 200;

/**
 * The most characters a compacted form adds beyond its limit (the two markers, with room
 * for 16-digit lengths). A compacted text is at most `limit + COMPACTED_OVERHEAD` long.
 */
export const COMPACTED_OVERHEAD = marker(10 ** 16 - 1, '00000').length + omission(10 ** 16 - 1).length;

/**
 * What a stored record keeps of a payload (the `PayloadRef` shape of lib/items.ts): length,
 * hashes, and `PREVIEW_CHARS` characters of head and tail (the whole text when shorter).
 * The session store uses it for out-of-line outputs; {@link compactText} gives the same
 * result from the ref as from the full text.
 */
export function previewOf(text: string): PayloadRef {
  return {
    sha256: sha256Hex(text),
    md5: md5Hex(text),
    length: text.length,
    head: text.slice(0, PREVIEW_CHARS),
    tail: text.length <= PREVIEW_CHARS ? text : text.slice(text.length - PREVIEW_CHARS),
  };
}

/**
 * The hash-stamped compacted form of a text longer than `limit`, built only from its
 * length, the first 5 hex digits of its MD5, and its head and tail, so the full text and
 * its {@link previewOf} ref give identical bytes. Returns null when the text is at or under
 * the limit: such a value must be kept byte for byte.
 *
 * Example (limit 400, a 15,432-character output):
 * `[compacted: 15432 chars, md5 a1b2c. A shortened account of the original, not the real
 * content; do not reuse it as-is.]\n<first 150 chars>\n[... 15182 chars omitted ...]\n<last 100 chars>`
 */
export function compactText(source: string | PayloadRef, limit: number): string | null {
  const length = typeof source === 'string' ? source.length : source.length;
  if (length <= limit) return null;
  const md5Prefix = (typeof source === 'string' ? md5Hex(source) : source.md5).slice(0, 5);
  const headChars = Math.min(PREVIEW_CHARS, Math.floor((limit * 3) / 8));
  const tailChars = Math.min(PREVIEW_CHARS, Math.floor(limit / 4));
  const headSource = typeof source === 'string' ? source : source.head;
  const tailSource = typeof source === 'string' ? source : source.tail;
  let head = headSource.slice(0, headChars);
  let tail = tailChars === 0 ? '' : tailSource.slice(tailSource.length - tailChars);
  // Never cut a surrogate pair in half: the result must stay well-formed text.
  if (head.length > 0 && isHighSurrogate(head.charCodeAt(head.length - 1))) head = head.slice(0, -1);
  if (tail.length > 0 && isLowSurrogate(tail.charCodeAt(0))) tail = tail.slice(1);
  return `${marker(length, md5Prefix)}${head}${omission(length - head.length - tail.length)}${tail}`;
}

function marker(length: number, md5Prefix: string): string {
  return (
    `[compacted: ${length} chars, md5 ${md5Prefix}. A shortened account of the original, not the real ` +
    `content; do not reuse it as-is.]\n`
  );
}

function omission(omitted: number): string {
  return `\n[... ${omitted} chars omitted ...]\n`;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

/**
 * A function_call_output with its output compacted (limit {@link OUTPUT_LIMIT}), or the
 * same item when it is short or already compacted. The compacted copy drops `output_ref`
 * (nothing is left to fetch) and carries `compacted: true`; its keys are in a fixed order,
 * so an inline output and an out-of-line one give identical JSON.
 */
export function compactOutputItem(item: PromptFunctionCallOutputItem): PromptFunctionCallOutputItem {
  if (item.compacted || outputLength(item) <= OUTPUT_LIMIT) return item;
  const { output_ref: outputRef, output, compacted: _compacted, ...rest } = item;
  const text = compactText(outputRef ?? contentText(output), OUTPUT_LIMIT)!;
  return { ...rest, output: text, compacted: true };
}

/**
 * A function_call with every string value of its JSON arguments longer than
 * {@link ARGUMENT_LIMIT} compacted (recursively, in objects and arrays; keys untouched), or
 * the same item when nothing is that long. Unparseable arguments count as one string value, as
 * do arguments nested more than COMPACTED_DEPTH deep (walking and writing them again would run
 * out of stack). When something was compacted the arguments are re-serialized with JSON.stringify.
 */
export function compactCallItem(item: PromptFunctionCallItem): PromptFunctionCallItem {
  if (item.compacted || item.arguments.length <= ARGUMENT_LIMIT) return item;
  let compactedArguments: string;
  let parsed: unknown;
  let parseable = true;
  try {
    parsed = JSON.parse(item.arguments);
  } catch {
    parseable = false;
  }
  if (parseable && !nestedBeyond(parsed, COMPACTED_DEPTH)) {
    const state = { changed: false };
    const value = compactValue(parsed, state);
    if (!state.changed) return item;
    compactedArguments = JSON.stringify(value);
  } else {
    compactedArguments = compactText(item.arguments, ARGUMENT_LIMIT)!;
  }
  const { arguments: _arguments, compacted: _compacted, ...rest } = item;
  return { ...rest, arguments: compactedArguments, compacted: true };
}

/** A call or output compacted as compactCallItem or compactOutputItem does; a message as it is. */
export function compactToolItem(item: PromptItem): PromptItem {
  if (item.type === 'function_call') return compactCallItem(item);
  return item.type === 'function_call_output' ? compactOutputItem(item) : item;
}

/** Levels of arrays and objects compactCallItem walks in arguments. */
const COMPACTED_DEPTH = 256;

/** Whether `value` holds arrays or objects nested more than `depth` deep (not reading past that). */
function nestedBeyond(value: unknown, depth: number): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (depth === 0) return true;
  for (const entry of Object.values(value)) if (nestedBeyond(entry, depth - 1)) return true;
  return false;
}

function compactValue(value: unknown, state: { changed: boolean }): unknown {
  if (typeof value === 'string') {
    const text = compactText(value, ARGUMENT_LIMIT);
    if (text === null) return value;
    state.changed = true;
    return text;
  }
  if (Array.isArray(value)) return value.map((entry) => compactValue(entry, state));
  if (value !== null && typeof value === 'object') {
    const copy: Record<string, unknown> = {};
    for (const [key, entry] of Object.entries(value)) {
      // defineProperty, so a `__proto__` key stays a plain key as JSON.parse made it.
      Object.defineProperty(copy, key, {
        value: compactValue(entry, state),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return copy;
  }
  return value;
}
