import { describe, expect, it } from 'vitest';
import { describePart, mediaParts } from '../../lib/content.ts';
import { sha256Hex } from '../../lib/hash.ts';
import type { Item, PromptFunctionCallOutputItem, PromptItem } from '../../lib/items.ts';
import { imageSize, sniffMediaType } from '../../lib/media.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { listAll } from '../../lib/store/object-store.ts';
import { CountingStore } from '../support/counting-store.ts';
import { dataUrl, jpegBytes, PNG_IEND, pdfBytes, pngBytes } from '../support/media-fixtures.ts';
import { SessionLog } from '../support/session-log.ts';

const LIMITS = { maxImageBytes: 4096, maxFileBytes: 4096 };

function world() {
  const store = new CountingStore(new MemoryStore());
  const log = new SessionLog(store, { attachmentLimits: LIMITS });
  return { store, log };
}

const screenshot = (call_id: string, bytes: Uint8Array): Item => ({
  type: 'function_call_output',
  call_id,
  output: [
    { type: 'input_text', text: 'clicked' },
    { type: 'input_image', image_url: dataUrl('image/png', bytes), detail: 'high' },
  ],
});

function outputOf(item: PromptItem | undefined) {
  return (item as PromptFunctionCallOutputItem).output;
}

async function blobs(store: MemoryStore | CountingStore): Promise<string[]> {
  return (await listAll(store, '')).map((object) => object.key).filter((key) => key.includes('/blob/'));
}

describe('media types and sizes from the bytes', () => {
  it('reads png, jpeg, gif, webp and pdf magic numbers, and nothing else', () => {
    expect(sniffMediaType(pngBytes(1, 1))).toBe('image/png');
    expect(sniffMediaType(jpegBytes(1, 1))).toBe('image/jpeg');
    expect(sniffMediaType(new TextEncoder().encode('GIF89a\x10\x00\x20\x00'))).toBe('image/gif');
    expect(sniffMediaType(new TextEncoder().encode('RIFF\0\0\0\0WEBPVP8 '))).toBe('image/webp');
    expect(sniffMediaType(pdfBytes())).toBe('application/pdf');
    expect(sniffMediaType(new TextEncoder().encode('hello'))).toBeUndefined();
  });

  it('reads width and height from PNG, JPEG and GIF headers', () => {
    expect(imageSize(pngBytes(1280, 800))).toEqual({ width: 1280, height: 800 });
    expect(imageSize(jpegBytes(640, 480))).toEqual({ width: 640, height: 480 });
    expect(imageSize(new TextEncoder().encode('GIF89a\x10\x00\x20\x00'))).toEqual({ width: 16, height: 32 });
    expect(imageSize(pdfBytes())).toBeUndefined();
  });

  it('describes an image as the echo model and placeholders show it', () => {
    const part = { type: 'input_image' as const, blob: 'a'.repeat(64), media_type: 'image/png', bytes: 145_408 };
    expect(describePart({ ...part, width: 1280, height: 800 })).toBe('[image/png 1280x800, 142 KB]');
    expect(describePart({ type: 'input_image', image_url: 'https://example.com/a.png' })).toBe(
      '[image https://example.com/a.png]',
    );
    expect(describePart({ type: 'input_image', image_url: 'DATA:image/png;base64,AAAA' })).toBe('[image inline]');
  });
});

describe('mediaParts', () => {
  it('gives the image and file parts in order, and one frozen empty array for a content without any', () => {
    const image = { type: 'input_image' as const, image_url: 'https://example.com/a.png' };
    const file = { type: 'input_file' as const, file_url: 'https://example.com/b.pdf' };
    const text = { type: 'input_text' as const, text: 'hello' };
    expect(mediaParts([text, image, text, file])).toEqual([image, file]);
    expect(mediaParts([image])).toEqual([image]);
    const none = [mediaParts('hello'), mediaParts(''), mediaParts([text]), mediaParts([text, text])];
    for (const parts of none) {
      expect(parts).toEqual([]);
      expect(parts).toBe(none[0]);
      expect(Object.isFrozen(parts)).toBe(true);
    }
  });
});

const bytesOf = (text: string) => Uint8Array.from(text, (char) => char.charCodeAt(0));
/** A whole 1x1 GIF, its trailer 0x3b last. */
const gif = Uint8Array.from(Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64'));
/** A whole lossless 1000x700 WebP: its RIFF size (0x42) and 8 are its 74 bytes. */
const webp = Uint8Array.from(
  Buffer.from(
    'UklGRkIAAABXRUJQVlA4TDUAAAAv58OuAAfQhCY0of8BAUnS//2BEf3P+M9//vOf//znP//5z3/+85///Oc///nPf/7zn/9/BwA=',
    'base64',
  ),
);
const png = pngBytes(4, 4, 40);
const jpeg = jpegBytes(4, 4);
const withRiffSize = (bytes: Uint8Array, size: number) => {
  const copy = bytes.slice();
  new DataView(copy.buffer).setUint32(4, size, true);
  return copy;
};

/** Images whose bytes begin as their type does but stop short of its end, or lack a part it needs. */
const cutShort = [
  { name: 'a PNG of its signature alone', type: 'image/png', bytes: png.subarray(0, 8) },
  { name: 'a PNG cut short of its IEND chunk', type: 'image/png', bytes: png.subarray(0, png.length - 20) },
  { name: 'a PNG cut inside its IEND chunk', type: 'image/png', bytes: png.subarray(0, png.length - 1) },
  {
    name: 'a PNG with no IHDR chunk after its signature',
    type: 'image/png',
    bytes: Uint8Array.from([...png.subarray(0, 8), ...bytesOf('\0\0\0\rIDAT'), ...new Array(17).fill(0), ...PNG_IEND]),
  },
  { name: 'a JPEG cut short of its EOI marker', type: 'image/jpeg', bytes: jpeg.subarray(0, jpeg.length - 2) },
  {
    name: 'a JPEG whose EOI is more than 32 bytes before its end',
    type: 'image/jpeg',
    bytes: Uint8Array.from([...jpeg, ...new Array(31).fill(0)]),
  },
  { name: 'a GIF cut short of its trailer', type: 'image/gif', bytes: gif.subarray(0, gif.length - 1) },
  { name: 'a WebP shorter than its RIFF size', type: 'image/webp', bytes: webp.subarray(0, webp.length - 2) },
  { name: 'a WebP longer than its RIFF size', type: 'image/webp', bytes: Uint8Array.from([...webp, 0, 0]) },
];

describe('an image whose bytes run to its end', () => {
  it('is taken whole: PNG to IEND, JPEG to EOI, GIF to its trailer, WebP to its RIFF size', async () => {
    const { log } = world();
    await log.create({ id: 's1' });
    const whole = [
      { type: 'image/png', bytes: png },
      { type: 'image/jpeg', bytes: jpeg },
      // Some encoders write bytes after EOI: up to 30 of them still end the file.
      { type: 'image/jpeg', bytes: Uint8Array.from([...jpeg, ...new Array(30).fill(0)]) },
      { type: 'image/gif', bytes: gif },
      { type: 'image/webp', bytes: webp },
      // An odd RIFF size is followed by one padding byte.
      { type: 'image/webp', bytes: withRiffSize(Uint8Array.from([...webp, 0]), webp.length - 7) },
    ];
    for (const { type, bytes } of whole) {
      const part = { type: 'input_image' as const, image_url: dataUrl(type, bytes) };
      const [item] = await log.storeAttachments('s1', [{ type: 'message', role: 'user', content: [part] }]);
      expect(item, `${type} of ${bytes.length} bytes`).toMatchObject({
        content: [{ type: 'input_image', media_type: type, bytes: bytes.length }],
      });
    }
  });

  it('is refused when cut short, with the details every image refusal has', async () => {
    const { log } = world();
    await log.create({ id: 's1' });
    const part = { type: 'input_image' as const, image_url: 'data:image/png;base64,iVBORw0KGgo=' };
    const refused = log.storeAttachments('s1', [{ type: 'message', role: 'user', content: [part] }]);
    await expect(refused).rejects.toMatchObject({
      code: 'invalid_request',
      message: 'items[0].content[0]: the bytes are not a whole image/png (cut short?)',
      details: { part: 'items[0].content[0]', field: 'items.0.content.0' },
    });
  });
});

describe('URL schemes', () => {
  it('are read in any case: DATA: and HTTPS:, stored as data: and https:', async () => {
    const { log } = world();
    await log.create({ id: 's1' });
    const content = [
      { type: 'input_image' as const, image_url: `DATA:image/png;base64,${Buffer.from(png).toString('base64')}` },
      { type: 'input_image' as const, image_url: 'Data:IMAGE/PNG;BASE64,' + Buffer.from(png).toString('base64') },
      { type: 'input_image' as const, image_url: 'HTTPS://example.com/A.png' },
      { type: 'input_file' as const, file_url: 'Https://example.com/a.pdf' },
    ];
    const [item] = await log.storeAttachments('s1', [{ type: 'message', role: 'user', content }]);
    expect(item).toMatchObject({
      content: [
        { type: 'input_image', media_type: 'image/png', bytes: png.length },
        { type: 'input_image', media_type: 'image/png', bytes: png.length },
        { type: 'input_image', image_url: 'https://example.com/A.png' },
        { type: 'input_file', file_url: 'https://example.com/a.pdf' },
      ],
    });
  });
});

describe('SessionLog.storeAttachments', () => {
  it('stores a data: image once as a blob of the generation and keeps a reference in the log', async () => {
    const { store, log } = world();
    await log.create({ id: 's1' });
    const bytes = pngBytes(1280, 800, 100, 7);
    const first = await log.storeAttachments('s1', [screenshot('c1', bytes)]);
    const again = await log.storeAttachments('s1', [screenshot('c2', bytes)]);
    await log.append('s1', [{ type: 'function_call', call_id: 'c1', name: 'shot', arguments: '{}' }, ...first]);
    await log.append('s1', [{ type: 'function_call', call_id: 'c2', name: 'shot', arguments: '{}' }, ...again]);

    const sha256 = sha256Hex(bytes);
    const stored = await blobs(store);
    expect(stored).toHaveLength(1);
    const scope = await log.scope('s1');
    expect(stored[0]).toBe(`sessions/s1/blob/${scope.generation}/${sha256}`);
    const { items } = await log.listItems('s1', { limit: 10 });
    const output = items.find((item) => item.type === 'function_call_output' && item.call_id === 'c1');
    expect(output).toMatchObject({
      output: [
        { type: 'input_text', text: 'clicked' },
        {
          type: 'input_image',
          detail: 'high',
          blob: sha256,
          media_type: 'image/png',
          bytes: bytes.length,
          width: 1280,
          height: 800,
        },
      ],
    });
    expect(JSON.stringify(items)).not.toContain('data:');
    expect(await log.readBlob('s1', sha256)).toEqual(bytes);
  });

  it('takes the common aliases image/jpg and image/pjpeg for JPEG bytes, stored as image/jpeg', async () => {
    const { log } = world();
    await log.create({ id: 's1' });
    for (const declared of ['image/jpg', 'image/pjpeg', 'image/JPG']) {
      const part = { type: 'input_image' as const, image_url: dataUrl(declared, jpegBytes(640, 480)) };
      const [item] = await log.storeAttachments('s1', [{ type: 'message', role: 'user', content: [part] }]);
      expect(item, declared).toMatchObject({
        content: [{ type: 'input_image', media_type: 'image/jpeg', width: 640, height: 480 }],
      });
    }
    const png = { type: 'input_image' as const, image_url: dataUrl('image/jpg', pngBytes(2, 2)) };
    const refused = log.storeAttachments('s1', [{ type: 'message', role: 'user', content: [png] }]);
    await expect(refused).rejects.toMatchObject({
      message: 'items[0].content[0]: declared image/jpg but the bytes are image/png',
    });
  });

  it('keeps https URLs as given and costs no storage call without inline payloads', async () => {
    const { store, log } = world();
    await log.create({ id: 's1' });
    const items: Item[] = [
      { type: 'message', role: 'user', content: [{ type: 'input_image', image_url: 'https://example.com/a.png' }] },
    ];
    const before = store.operations;
    expect(await log.storeAttachments('s1', items)).toBe(items);
    expect(store.operations).toBe(before);
  });

  it('stores a file_data PDF with its filename', async () => {
    const { log } = world();
    await log.create({ id: 's1' });
    const data = Buffer.from(pdfBytes()).toString('base64');
    const [item] = await log.storeAttachments('s1', [
      { type: 'message', role: 'user', content: [{ type: 'input_file', filename: 'a.pdf', file_data: data }] },
    ]);
    expect(item).toMatchObject({
      content: [{ type: 'input_file', filename: 'a.pdf', media_type: 'application/pdf', bytes: pdfBytes().length }],
    });
  });

  it.each([
    {
      name: 'an image over MAX_IMAGE_BYTES',
      part: { type: 'input_image', image_url: dataUrl('image/png', pngBytes(10, 10, 5000)) },
      code: 'payload_too_large',
      message: 'items[1].content[1] is 5045 bytes; at most 4096 are accepted (MAX_IMAGE_BYTES raises it)',
    },
    {
      name: 'a file over MAX_FILE_BYTES',
      part: {
        type: 'input_file',
        filename: 'big.pdf',
        file_data: Buffer.from([...pdfBytes(), ...new Uint8Array(5000)]).toString('base64'),
      },
      code: 'payload_too_large',
      message: [
        `items[1].content[1] is ${pdfBytes().length + 5000} bytes;`,
        'at most 4096 are accepted (MAX_FILE_BYTES raises it)',
      ].join(' '),
    },
    {
      name: 'bytes that are no image',
      part: { type: 'input_image', image_url: dataUrl('image/png', new TextEncoder().encode('not a png')) },
      code: 'invalid_request',
      message: 'items[1].content[1]: the bytes are not one of image/png, image/jpeg, image/gif, image/webp',
    },
    {
      name: 'a declared type that the bytes contradict',
      part: { type: 'input_image', image_url: dataUrl('image/jpeg', pngBytes(10, 10)) },
      code: 'invalid_request',
      message: 'items[1].content[1]: declared image/jpeg but the bytes are image/png',
    },
    {
      name: 'an image URL that is neither https nor data:',
      part: { type: 'input_image', image_url: 'http://example.com/a.png' },
      code: 'invalid_request',
      message: 'items[1].content[1]: image_url must be an https:// or data: URL',
    },
    {
      name: 'an https image_url that does not parse as a URL',
      part: { type: 'input_image', image_url: 'https://exa mple.com/a.png' },
      code: 'invalid_request',
      message: 'items[1].content[1]: image_url must be an https:// or data: URL',
    },
    {
      name: 'a data: URL that is not base64',
      part: { type: 'input_image', image_url: 'data:image/png,rawtext' },
      code: 'invalid_request',
      message: 'items[1].content[1]: image_url is not a base64 data: URL',
    },
    {
      name: 'a PDF as an image',
      part: { type: 'input_image', image_url: dataUrl('application/pdf', pdfBytes()) },
      code: 'invalid_request',
      message: 'items[1].content[1]: the bytes are not one of image/png, image/jpeg, image/gif, image/webp',
    },
    ...cutShort.map(({ name, type, bytes }) => ({
      name,
      part: { type: 'input_image', image_url: dataUrl(type, bytes) },
      code: 'invalid_request',
      message: `items[1].content[1]: the bytes are not a whole ${type} (cut short?)`,
    })),
    {
      name: 'file_data without a filename',
      part: { type: 'input_file', file_data: Buffer.from(pdfBytes()).toString('base64') },
      code: 'invalid_request',
      message: 'items[1].content[1]: file_data needs a filename',
    },
    {
      name: 'a file that is no PDF',
      part: { type: 'input_file', filename: 'a.png', file_data: Buffer.from(pngBytes(1, 1)).toString('base64') },
      code: 'invalid_request',
      message: 'items[1].content[1]: the bytes are not one of application/pdf',
    },
    {
      name: 'file_data that is not base64',
      part: { type: 'input_file', filename: 'a.pdf', file_data: '%%%' },
      code: 'invalid_request',
      message: 'items[1].content[1]: file_data is not base64',
    },
    {
      name: 'a javascript: image_url',
      part: { type: 'input_image', image_url: 'javascript:alert(document.domain)' },
      code: 'invalid_request',
      message: 'items[1].content[1]: image_url must be an https:// or data: URL',
    },
    ...['AA=', 'A=', 'AAAAA='].map((text) => ({
      name: `base64 padded short of a whole quad (${text})`,
      part: { type: 'input_image', image_url: `data:image/png;base64,${text}` },
      code: 'invalid_request',
      message: 'items[1].content[1]: image_url is not a base64 data: URL',
    })),
    {
      name: 'a blob reference sent by a client',
      part: { type: 'input_image', blob: 'a'.repeat(64), media_type: 'image/png', bytes: 10 },
      code: 'invalid_request',
      message:
        'items[1].content[1]: blob, media_type and bytes are written by the service; send the image or file itself',
    },
    {
      name: 'a file_url that is not https',
      part: { type: 'input_file', file_url: 'ftp://example.com/a.pdf' },
      code: 'invalid_request',
      message: 'items[1].content[1]: file_url must be an https:// URL',
    },
    {
      name: 'an https file_url that does not parse as a URL',
      part: { type: 'input_file', file_url: 'https://[::1/a.pdf' },
      code: 'invalid_request',
      message: 'items[1].content[1]: file_url must be an https:// URL',
    },
  ])('refuses $name with an error naming the part, and stores nothing', async ({ part, code, message }) => {
    const { store, log } = world();
    await log.create({ id: 's1' });
    const good = { type: 'input_image' as const, image_url: dataUrl('image/png', pngBytes(2, 2)) };
    const items = [
      { type: 'message', role: 'user', content: [good] },
      { type: 'message', role: 'user', content: [good, part] },
    ] as Item[];
    const refused = log.storeAttachments('s1', items);
    await expect(refused).rejects.toMatchObject({ code, message });
    expect(await blobs(store)).toEqual([]);
  });
});

describe('SessionLog.storeAttachments without a payload to store', () => {
  it('refuses a part that is not an https:// URL, and lets https:// URLs through as they are', async () => {
    const { log } = world();
    await log.create({ id: 's1' });
    for (const part of [
      { type: 'input_image', image_url: 'javascript:alert(document.domain)' },
      { type: 'input_image', image_url: 'http://example.com/a.png' },
      { type: 'input_file', file_url: 'javascript:alert(1)' },
    ]) {
      const items = [{ type: 'message', role: 'user', content: [part] }] as Item[];
      await expect(log.storeAttachments('s1', items)).rejects.toMatchObject({ code: 'invalid_request' });
    }
    const linked = [
      {
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_image', image_url: 'https://example.com/a.png' },
          { type: 'input_file', file_url: 'https://example.com/a.pdf' },
        ],
      },
    ] as Item[];
    expect(await log.storeAttachments('s1', linked)).toBe(linked);
  });
});

describe('SessionLog.readMedia', () => {
  it('reads the blob of each image in the prompt it is given, once, and no other', async () => {
    const { store, log } = world();
    await log.create({ id: 's1' });
    const shown = pngBytes(8, 8, 10, 1);
    const pruned = pngBytes(8, 8, 10, 2);
    const [a, b, c] = (await log.storeAttachments('s1', [
      screenshot('c1', shown),
      screenshot('c2', shown),
      screenshot('c3', pruned),
    ])) as PromptItem[];
    const scope = await log.scope('s1');
    const before = store.counts.get;
    const hydrated = await log.readMedia(scope, [a!, b!]);
    expect(store.counts.get - before).toBe(1);
    expect(mediaParts(outputOf(hydrated[0]))[0]?.data).toEqual(shown);
    expect(mediaParts(outputOf(c))[0]?.data).toBeUndefined();
  });

  it('refuses a blob whose bytes do not match its hash', async () => {
    const { store, log } = world();
    await log.create({ id: 's1' });
    const [item] = await log.storeAttachments('s1', [screenshot('c1', pngBytes(8, 8))]);
    const scope = await log.scope('s1');
    const [key] = await blobs(store);
    await store.delete(key!);
    await store.put(key!, pngBytes(9, 9));
    await expect(log.readMedia(scope, [item as PromptItem])).rejects.toMatchObject({ code: 'corrupt_object' });
  });
});
