import { encodeBase64 } from '../../lib/media.ts';

/**
 * Image and file bytes for tests: the headers that lib/media.ts reads (magic number, size) and
 * the end it checks, padded with `padding` bytes so a test can choose the size.
 */

function concat(...parts: number[][]): Uint8Array {
  return Uint8Array.from(parts.flat());
}

const u32 = (value: number) => [(value >>> 24) & 255, (value >>> 16) & 255, (value >>> 8) & 255, value & 255];
const u16 = (value: number) => [(value >>> 8) & 255, value & 255];

/** The IEND chunk that ends every PNG: no data, then its CRC. */
export const PNG_IEND = [0, 0, 0, 0, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82];

/**
 * A PNG signature and IHDR chunk of `width` x `height`, then `padding` bytes of `fill`, then
 * the IEND chunk, so the file runs to its end as lib/media.ts checks it.
 */
export function pngBytes(width: number, height: number, padding = 0, fill = 0): Uint8Array {
  const signature = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
  const ihdr = [...u32(13), ...[0x49, 0x48, 0x44, 0x52], ...u32(width), ...u32(height), 8, 6, 0, 0, 0, ...u32(0)];
  return concat(signature, ihdr, new Array<number>(padding).fill(fill), PNG_IEND);
}

/** A JPEG with an APP0 segment, then a SOF0 frame of `width` x `height`. */
export function jpegBytes(width: number, height: number): Uint8Array {
  const app0 = [0xff, 0xe0, ...u16(16), 0x4a, 0x46, 0x49, 0x46, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0];
  const sof0 = [0xff, 0xc0, ...u16(17), 8, ...u16(height), ...u16(width), 3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1];
  return concat([0xff, 0xd8], app0, sof0, [0xff, 0xd9]);
}

/** The smallest PDF header. */
export function pdfBytes(): Uint8Array {
  return new TextEncoder().encode('%PDF-1.4\n%%EOF\n');
}

/** `bytes` as a `data:` URL of `mediaType`. */
export function dataUrl(mediaType: string, bytes: Uint8Array): string {
  return `data:${mediaType};base64,${encodeBase64(bytes)}`;
}

/** A user message of `text` and `count` distinct small PNGs (a message of many photos). */
export function photosMessage(count: number, text: string) {
  return {
    type: 'message',
    role: 'user',
    content: [
      { type: 'input_text', text },
      ...Array.from({ length: count }, (_, index) => ({
        type: 'input_image',
        image_url: dataUrl('image/png', pngBytes(64, 48, index + 1, index)),
      })),
    ],
  };
}
