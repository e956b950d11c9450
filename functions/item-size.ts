import { TailgateError } from '../lib/errors.ts';
import type { Item } from '../lib/items.ts';

const encoder = new TextEncoder();

/** The UTF-8 length of `text`. */
export function utf8Bytes(text: string): number {
  return encoder.encode(text).length;
}

/** One item above the configured size (1 MiB by default) is refused with 413. */
export function checkItemSizes(items: readonly Item[], maxItemBytes: number): void {
  items.forEach((item, index) => {
    const size = utf8Bytes(JSON.stringify(item));
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
