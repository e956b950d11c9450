/**
 * Media types read from the bytes themselves (magic numbers), and image sizes read from the
 * image header, so a declared type is never trusted alone.
 */

export const IMAGE_MEDIA_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const;
export const FILE_MEDIA_TYPES = ['application/pdf'] as const;

function startsWith(bytes: Uint8Array, prefix: readonly number[], at = 0): boolean {
  return prefix.every((byte, index) => bytes[at + index] === byte);
}

const ascii = (text: string) => [...text].map((char) => char.charCodeAt(0));

/** The media type the bytes are (png, jpeg, gif, webp, pdf), or undefined. */
export function sniffMediaType(bytes: Uint8Array): string | undefined {
  if (startsWith(bytes, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return 'image/png';
  if (startsWith(bytes, [0xff, 0xd8, 0xff])) return 'image/jpeg';
  if (startsWith(bytes, ascii('GIF87a')) || startsWith(bytes, ascii('GIF89a'))) return 'image/gif';
  if (startsWith(bytes, ascii('RIFF')) && startsWith(bytes, ascii('WEBP'), 8)) return 'image/webp';
  if (startsWith(bytes, ascii('%PDF-'))) return 'application/pdf';
  return undefined;
}

/**
 * Whether an image of `type` runs to its end, read without decoding it (a file cut short is
 * refused by the providers): a PNG's IHDR chunk right after its signature and IEND chunk last,
 * a JPEG's EOI marker (ff d9) in its last 32 bytes (some encoders write bytes after it), a GIF's
 * trailer (0x3b) last, a WebP's RIFF size and 8 its length (and one padding byte when odd).
 */
export function isWholeImage(bytes: Uint8Array, type: string): boolean {
  const end = bytes.length;
  if (type === 'image/png')
    return startsWith(bytes, [0, 0, 0, 13, ...ascii('IHDR')], 8) && startsWith(bytes, PNG_END, end - 12);
  if (type === 'image/jpeg') {
    for (let at = Math.max(2, end - 32); at < end - 1; at++)
      if (bytes[at] === 0xff && bytes[at + 1] === 0xd9) return true;
    return false;
  }
  if (type === 'image/gif') return bytes[end - 1] === 0x3b;
  if (type !== 'image/webp') return true;
  const size = end < 8 ? 0 : new DataView(bytes.buffer, bytes.byteOffset).getUint32(4, true) + 8;
  return end === size || (end === size + 1 && size % 2 === 1);
}

/** A PNG's IEND chunk: no data, then its CRC. */
const PNG_END = [0, 0, 0, 0, ...ascii('IEND'), 0xae, 0x42, 0x60, 0x82];

/**
 * Width and height from a PNG (IHDR), GIF (logical screen), JPEG (first SOFn marker) or WebP
 * (`webpSize`) header, or undefined when the header does not say.
 */
export function imageSize(bytes: Uint8Array): { width: number; height: number } | undefined {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const type = sniffMediaType(bytes);
  if (type === 'image/png' && bytes.length >= 24) return sized(view.getUint32(16), view.getUint32(20));
  if (type === 'image/gif' && bytes.length >= 10) return sized(view.getUint16(6, true), view.getUint16(8, true));
  if (type === 'image/webp') return webpSize(bytes, view);
  if (type !== 'image/jpeg') return undefined;
  let offset = 2;
  while (offset + 9 <= bytes.length && bytes[offset] === 0xff) {
    const marker = bytes[offset + 1]!;
    const isFrame = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
    if (isFrame) return sized(view.getUint16(offset + 7), view.getUint16(offset + 5));
    offset += 2 + view.getUint16(offset + 2);
  }
  return undefined;
}

/**
 * A WebP's size (RFC 9649), from the first chunk after its RIFF header (its FourCC and little-
 * endian size at 12, its data from 20): a simple lossy file's `VP8 ` key frame header (RFC 6386
 * 9.1: a frame tag whose first bit is 0, the start code 9d 01 2a, then the width and height in
 * the low 14 bits of a 16-bit word each, the top 2 bits their scaling); a simple lossless one's
 * `VP8L` header (the signature 0x2f, then in 32 bits the width minus one and the height minus
 * one in 14 bits each, the alpha hint, and a version that must be 0); an extended one's `VP8X`
 * canvas (after 4 bytes of flags and reserved bits, the width minus one and the height minus
 * one in 24 bits each, whose product must fit in 32 bits). Any other first chunk, or one too
 * short for what is read, says no size.
 */
function webpSize(bytes: Uint8Array, view: DataView): { width: number; height: number } | undefined {
  if (bytes.length < 20) return undefined;
  const chunk = String.fromCharCode(...bytes.subarray(12, 16));
  const size = view.getUint32(16, true);
  if (chunk === 'VP8 ' && size >= 10 && bytes.length >= 30) {
    const keyFrame = (bytes[20]! & 1) === 0;
    if (!keyFrame || !startsWith(bytes, [0x9d, 0x01, 0x2a], 23)) return undefined;
    return sized(view.getUint16(26, true) & 0x3fff, view.getUint16(28, true) & 0x3fff);
  }
  if (chunk === 'VP8L' && size >= 5 && bytes.length >= 25) {
    if (bytes[20] !== 0x2f) return undefined;
    const bits = view.getUint32(21, true);
    if (bits >>> 29 !== 0) return undefined;
    return sized((bits & 0x3fff) + 1, ((bits >>> 14) & 0x3fff) + 1);
  }
  if (chunk === 'VP8X' && size >= 10 && bytes.length >= 30) {
    const width = (view.getUint32(24, true) & 0xffffff) + 1;
    const height = (view.getUint32(26, true) >>> 8) + 1;
    return width * height <= 0xffffffff ? { width, height } : undefined;
  }
  return undefined;
}

function sized(width: number, height: number) {
  return width > 0 && height > 0 ? { width, height } : undefined;
}

/**
 * A `data:` URL's declared media type and decoded bytes, or undefined when it is not base64 data
 * (its scheme and `;base64` read in any case, as URL schemes are).
 */
export function parseDataUrl(url: string): { mediaType: string; bytes: Uint8Array } | undefined {
  const match = /^data:([\w.+-]+\/[\w.+-]+)?(?:;[\w-]+=[\w.-]+)*;base64,(.*)$/is.exec(url);
  if (!match) return undefined;
  const bytes = decodeBase64(match[2]!);
  return bytes ? { mediaType: (match[1] ?? '').toLowerCase(), bytes } : undefined;
}

/** Decodes standard base64 (whitespace ignored), or undefined when it is not base64. */
export function decodeBase64(text: string): Uint8Array | undefined {
  const clean = text.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(clean) || clean.length % 4 === 1) return undefined;
  // Padded, the text comes in whole quads (`AA=` and `AAAAA=` are not base64).
  if (clean.endsWith('=') && clean.length % 4 !== 0) return undefined;
  const binary = atob(clean);
  const bytes = new Uint8Array(binary.length);
  for (let index = 0; index < binary.length; index++) bytes[index] = binary.charCodeAt(index);
  return bytes;
}

/** Base64 of `bytes`. */
export function encodeBase64(bytes: Uint8Array): string {
  let binary = '';
  for (let index = 0; index < bytes.length; index += 0x8000)
    binary += String.fromCharCode(...bytes.subarray(index, index + 0x8000));
  return btoa(binary);
}
