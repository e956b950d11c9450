import { TailgateError } from '../lib/errors.ts';
import type { Item } from '../lib/items.ts';

const encoder = new TextEncoder();

/** The UTF-8 length of `text`. */
export function utf8Bytes(text: string): number {
  return encoder.encode(text).length;
}

/**
 * One item above the configured size (1 MiB by default) is refused with 413. Image and file
 * payloads do not count: they are stored apart, under MAX_IMAGE_BYTES and MAX_FILE_BYTES.
 */
export function checkItemSizes(items: readonly Item[], maxItemBytes: number): void {
  items.forEach((item, index) => {
    const size = utf8Bytes(JSON.stringify(item, withoutPayloads));
    if (size > maxItemBytes) {
      throw new TailgateError(
        'payload_too_large',
        `item ${index} is ${size} bytes; one item may hold at most ${maxItemBytes}`,
        {
          index,
          size,
          limit: maxItemBytes,
        },
      );
    }
  });
}

/** A JSON.stringify replacer that leaves out `data:` image URLs and `file_data`. */
function withoutPayloads(key: string, value: unknown): unknown {
  if (key === 'file_data' || (key === 'image_url' && typeof value === 'string' && value.startsWith('data:')))
    return undefined;
  return value;
}
