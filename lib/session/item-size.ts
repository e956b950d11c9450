import { TailgateError } from '../errors.ts';
import type { Item } from '../items.ts';
import { mediaParts } from '../content.ts';
import { contentOf, withoutMedia } from './attachments.ts';

/**
 * The UTF-8 length of `text` (a lone surrogate counted as U+FFFD, as TextEncoder writes it),
 * counted without encoding it: every item of every append is measured, and a buffer allocated
 * for each costs more the more the process holds.
 */
export function utf8Bytes(text: string): number {
  let bytes = text.length;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (code < 0x80) continue;
    if (code < 0x800) bytes += 1;
    else if (code >= 0xd800 && code < 0xdc00 && (text.charCodeAt(index + 1) & 0xfc00) === 0xdc00) {
      // A surrogate pair: 2 code units, 4 bytes.
      bytes += 2;
      index += 1;
    } else bytes += 2;
  }
  return bytes;
}

/**
 * At least the UTF-8 bytes of JSON.stringify(value), counted without serializing it: a string
 * at most 6 bytes a UTF-16 code unit (`\uXXXX`, the longest a unit is written as), a number
 * at most 24, keys and values then separators.
 */
export function jsonBytesBound(value: unknown): number {
  if (typeof value === 'string') return 6 * value.length + 2;
  if (typeof value !== 'object' || value === null) return 24;
  let bound = 2;
  if (Array.isArray(value)) for (const element of value) bound += jsonBytesBound(element) + 1;
  else for (const [key, field] of Object.entries(value)) bound += 6 * key.length + 4 + jsonBytesBound(field);
  return bound;
}

/**
 * One item above the configured size (1 MiB by default) is refused with 413: an item sent
 * (`input`), or one a model answered (`output`: its turn fails, none of its output stored, as
 * every stored item can be exported and imported again, which holds items to the size too). Image and file
 * payloads do not count: they are stored apart, under MAX_IMAGE_BYTES and MAX_FILE_BYTES. An
 * item without them whose bound (jsonBytesBound) is within the size is not serialized to be
 * measured: nearly every item is far below it.
 */
export function checkItemSizes(
  items: readonly Item[],
  maxItemBytes: number,
  /** `output`: a model's answer; else the request's field holding the items, and each item's place in it. */
  where: { source: 'output' } | { name?: string; positions?: readonly number[] } = {},
): void {
  items.forEach((item, index) => {
    if (mediaParts(contentOf(item)).length === 0 && jsonBytesBound(item) <= maxItemBytes) return;
    const size = utf8Bytes(JSON.stringify(item, withoutMedia));
    if (size <= maxItemBytes) return;
    const limit = `is ${size} bytes; one item may hold at most ${maxItemBytes}`;
    if ('source' in where)
      throw new TailgateError('payload_too_large', `the model's output item ${index} ${limit}`, {
        index,
        size,
        limit: maxItemBytes,
        source: 'output',
      });
    const { name = 'input', positions } = where;
    const position = positions?.[index] ?? index;
    throw new TailgateError('payload_too_large', `${name}[${position}]: the item ${limit}`, {
      field: `${name}.${position}`,
      index: position,
      size,
      limit: maxItemBytes,
    });
  });
}
