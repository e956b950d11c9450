import { describe, expect, it } from 'vitest';
import { describePart, type InputImagePart } from '../../lib/content.ts';
import { sha256Hex } from '../../lib/hash.ts';
import { type PromptItem, storedItemSchema } from '../../lib/items.ts';
import { decodeBase64, encodeBase64, imageSize } from '../../lib/media.ts';
import { hydrateMedia } from '../../lib/session/attachments.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SessionLog } from '../support/session-log.ts';

// Whole WebP files as libwebp writes them (RFC 9649), one for each kind of first chunk.
const webp = (base64: string) => decodeBase64(base64)!;

/** A simple lossy file: a `VP8 ` chunk, 300x2. */
const lossy = webp('UklGRjoAAABXRUJQVlA4IC4AAACwAwCdASosAQIAP83m8HI/uDMsIagD8DmJaQAADHThw4cOHDhugAD+6MQAAAAA');
/** A simple lossless file: a `VP8L` chunk, 1000x700. */
const lossless = webp(
  'UklGRkIAAABXRUJQVlA4TDUAAAAv58OuAAfQhCY0of8BAUnS//2BEf3P+M9//vOf//znP//5z3/+85///Oc///nPf/7zn/9/BwA=',
);
/** A lossless file as wide as a `VP8L` header says (16383x2). */
const widest = webp('UklGRiQAAABXRUJQVlA4TBcAAAAv/n8AAAfQhCY0of8BAEX6/58i+p/6DwA=');
/** An extended file: a `VP8X` chunk (alpha), then `ALPH` and `VP8 `, 300x2. */
const extended = webp(
  'UklGRl4AAABXRUJQVlA4WAoAAAAQAAAAKwEAAQAAQUxQSAoAAAABB1DAiAhERP8D' +
    'VlA4IC4AAACwAwCdASosAQIAP83m8HI/uDMsIagD8DmJaQAADHThw4cOHDhugAD+6MQAAAAA',
);

/** `bytes` with the byte at `at` set to `value`. */
function withByte(bytes: Uint8Array, at: number, value: number): Uint8Array {
  const copy = bytes.slice();
  copy[at] = value;
  return copy;
}

describe('the size of a WebP', () => {
  it("is a simple lossy file's VP8 key frame size", () => {
    expect(imageSize(lossy)).toEqual({ width: 300, height: 2 });
  });

  it("is a simple lossless file's VP8L size", () => {
    expect(imageSize(lossless)).toEqual({ width: 1000, height: 700 });
    expect(imageSize(widest)).toEqual({ width: 16383, height: 2 });
  });

  it("is an extended file's VP8X canvas", () => {
    expect(imageSize(extended)).toEqual({ width: 300, height: 2 });
  });

  it('is read from the header alone: the first 30 bytes say it', () => {
    for (const [bytes, size] of [
      [lossy, { width: 300, height: 2 }],
      [lossless, { width: 1000, height: 700 }],
      [extended, { width: 300, height: 2 }],
    ] as const)
      expect(imageSize(bytes.subarray(0, 30))).toEqual(size);
  });

  it('is unknown, never a throw, for a header cut short', () => {
    for (const bytes of [lossy, lossless, widest, extended])
      for (let length = 0; length < 25; length++) expect(imageSize(bytes.subarray(0, length))).toBeUndefined();
    // VP8 and VP8X headers end at byte 30, VP8L's at 25.
    for (let length = 25; length < 30; length++) {
      expect(imageSize(lossy.subarray(0, length))).toBeUndefined();
      expect(imageSize(extended.subarray(0, length))).toBeUndefined();
      expect(imageSize(lossless.subarray(0, length))).toEqual({ width: 1000, height: 700 });
    }
  });

  it('is unknown for a bad header', () => {
    // A VP8 frame that is not a key frame, or without the start code.
    expect(imageSize(withByte(lossy, 20, lossy[20]! | 1))).toBeUndefined();
    expect(imageSize(withByte(lossy, 23, 0x9c))).toBeUndefined();
    // A VP8L signature other than 0x2f, or a version other than 0.
    expect(imageSize(withByte(lossless, 20, 0x2e))).toBeUndefined();
    expect(imageSize(withByte(lossless, 24, lossless[24]! | 0x20))).toBeUndefined();
    // A chunk shorter than its header.
    expect(imageSize(withByte(lossy, 16, 9))).toBeUndefined();
    expect(imageSize(withByte(lossless, 16, 4))).toBeUndefined();
    expect(imageSize(withByte(extended, 16, 9))).toBeUndefined();
    // A first chunk that is none of VP8, VP8L and VP8X (an extended file's ALPH without its VP8X).
    const alphFirst = new Uint8Array([...extended.subarray(0, 12), ...extended.subarray(30)]);
    expect(imageSize(alphFirst)).toBeUndefined();
    // A zero-sized VP8 frame.
    const zero = lossy.slice();
    zero.set([0, 0, 0, 0], 26);
    expect(imageSize(zero)).toBeUndefined();
  });

  it('is unknown for a VP8X canvas whose area is over 2^32 - 1 pixels', () => {
    const huge = extended.slice();
    huge.set([0xff, 0xff, 0xff, 0xff, 0xff, 0xff], 24);
    expect(imageSize(huge)).toBeUndefined();
    const largest = extended.slice();
    // 65536 x 65535 = 2^32 - 2^16 pixels: a canvas the spec allows.
    largest.set([0xff, 0xff, 0x00, 0xfe, 0xff, 0x00], 24);
    expect(imageSize(largest)).toEqual({ width: 65536, height: 65535 });
  });
});

describe('a stored WebP', () => {
  it('keeps the size its header says', async () => {
    const log = new SessionLog(new MemoryStore(), { attachmentLimits: { maxImageBytes: 4096, maxFileBytes: 4096 } });
    await log.create({ id: 's1' });
    const image_url = `data:image/webp;base64,${encodeBase64(lossless)}`;
    const [item] = await log.storeAttachments('s1', [
      { type: 'message', role: 'user', content: [{ type: 'input_image', image_url }] },
    ]);
    expect(item).toMatchObject({
      content: [{ type: 'input_image', media_type: 'image/webp', bytes: lossless.length, width: 1000, height: 700 }],
    });
  });

  it('stored before its size was read (no width or height) still parses, is read and described', async () => {
    const sha256 = sha256Hex(lossy);
    const part: InputImagePart = { type: 'input_image', blob: sha256, media_type: 'image/webp', bytes: lossy.length };
    const created_at = '2026-01-01T00:00:00.000Z';
    const stored: PromptItem = { type: 'message', role: 'user', content: [part], seq: 1, created_at };
    expect(storedItemSchema.parse(stored)).toEqual(stored);
    const store = new MemoryStore();
    await store.put(`blob/${sha256}`, lossy);
    const [read] = await hydrateMedia(store, [stored], (sha) => `blob/${sha}`, 4);
    const content = (read as Extract<PromptItem, { type: 'message' }>).content as InputImagePart[];
    expect(content[0]!.data).toEqual(lossy);
    expect(content[0]!.width).toBeUndefined();
    expect(describePart(content[0]!)).toBe(describePart(part));
  });
});
