import { crc32 } from 'node:zlib';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  apiCaller,
  axeViolations,
  INSPECTOR_HOOK_MS,
  type InspectorNode,
  startInspectorNode,
} from '../support/inspector-node.ts';

/**
 * The chat box's image against the API's limits, in Debian's Chromium against the Node server
 * (functions/node.ts, files in a temporary DATA_DIR) with small MAX_BODY_BYTES and
 * MAX_IMAGE_BYTES: an image the API would refuse (too large for either, or of a type it does not
 * take) is refused in place with the reason, before anything is sent.
 */
const TOKEN = 'ui-limits-token';
const MAX_BODY_BYTES = 8192;
const MAX_IMAGE_BYTES = 6144;
let node: InspectorNode;

beforeAll(async () => {
  node = await startInspectorNode({
    API_TOKEN: TOKEN,
    MAX_BODY_BYTES: String(MAX_BODY_BYTES),
    MAX_IMAGE_BYTES: String(MAX_IMAGE_BYTES),
  });
}, INSPECTOR_HOOK_MS);

afterAll(() => node?.close());

const call = apiCaller(() => node.origin, TOKEN);

/** A 1x1 PNG. */
const DOT = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=',
  'base64',
);

/** A whole PNG of `bytes` bytes: the 1x1 one with a private chunk of zeros before its IEND chunk. */
function pngOf(bytes: number): Buffer {
  const padding = Buffer.concat([Buffer.from('paDd'), Buffer.alloc(bytes - DOT.length - 12)]);
  const length = Buffer.alloc(4);
  length.writeUInt32BE(padding.length - 4);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(padding));
  return Buffer.concat([DOT.subarray(0, -12), length, padding, crc, DOT.subarray(-12)]);
}

/** Session `id`'s view, in a tab of its own holding the token, with the turns it posts counted. */
async function open(id: string): Promise<{ page: Page; posted: () => number }> {
  await call('POST', '/v1/sessions', { id });
  const context = await node.browser.newContext({ viewport: { width: 1400, height: 1000 } });
  await context.addInitScript((value) => sessionStorage.setItem('tailgate.token', value), TOKEN);
  const page = await context.newPage();
  let posts = 0;
  page.on('request', (request) => {
    if (request.method() === 'POST' && request.url().endsWith(`/v1/sessions/${id}/turns`)) posts++;
  });
  await page.goto(`${node.origin}/ui#/s/${id}`);
  await page.locator('#timeline-more').filter({ hasText: '0 turns' }).waitFor();
  return { page, posted: () => posts };
}

/** Pastes a file of `type` named `name` into the chat input, as a clipboard holding it does. */
async function paste(page: Page, name: string, type: string, bytes: Buffer): Promise<void> {
  await page.evaluate(
    ([name, type, bytes]) => {
      const data = new DataTransfer();
      data.items.add(new File([new Uint8Array(bytes)], name, { type }));
      document
        .getElementById('chat-input')!
        .dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true }));
    },
    [name, type, [...bytes]] as const,
  );
}

describe("the chat box's image within the API's limits", () => {
  it('an image over MAX_BODY_BYTES as base64, or over MAX_IMAGE_BYTES, is refused before it is sent', {
    timeout: 60_000,
  }, async () => {
    const { page, posted } = await open('too-large');
    const error = page.locator('#chat-image-error');
    // 6100 bytes take 8136 as base64: with the message around them, over the 8192 a request may hold.
    await page.locator('#chat-image').setInputFiles({ name: 'wide.png', mimeType: 'image/png', buffer: pngOf(6100) });
    expect(await page.locator('#chat-attached').textContent()).toBe('');
    await expect
      .poll(() => error.textContent())
      .toMatch(
        new RegExp(
          '^wide\\.png is not attached: it is 6100 bytes, sent as base64 in a request of 8\\d{3} bytes, ' +
            'and the API takes requests of at most 8192 bytes \\(MAX_BODY_BYTES\\)\\.$',
        ),
      );
    expect(await error.getAttribute('role')).toBe('alert');
    expect(await page.locator('#chat-image').inputValue()).toBe('');
    await paste(page, 'big.png', 'image/png', pngOf(MAX_IMAGE_BYTES + 1));
    expect(await page.locator('#chat-attached').textContent()).toBe('');
    await expect
      .poll(() => error.textContent())
      .toBe(
        'big.png is not attached: it is 6145 bytes, and the API takes images of at most 6144 bytes (MAX_IMAGE_BYTES).',
      );
    expect(await page.locator('#chat-attached').textContent()).toBe('');
    expect(await axeViolations(page)).toEqual([]);
    // One that fits is attached, and the reason goes.
    await page.locator('#chat-image').setInputFiles({ name: 'fits.png', mimeType: 'image/png', buffer: pngOf(5000) });
    await expect.poll(() => page.locator('#chat-attached').textContent()).toBe('fits.png (5000 bytes) Remove');
    expect(await error.isHidden()).toBe(true);
    // With a long input the request would be too large: not sent, said in the box, both kept.
    await page.locator('#chat-input').fill('x'.repeat(2000));
    await page.locator('#chat-send').click();
    await expect
      .poll(() => page.locator('#chat-output').textContent())
      .toMatch(
        new RegExp(
          '^Not sent: the request would be \\d+ bytes, and the API takes requests of at most 8192 bytes ' +
            '\\(MAX_BODY_BYTES\\)\\. A shorter input or a smaller image fits\\.$',
        ),
      );
    expect(await page.locator('#chat-send').isEnabled()).toBe(true);
    expect(await page.locator('#chat-attached').textContent()).toBe('fits.png (5000 bytes) Remove');
    expect(posted()).toBe(0);
    // A shorter input goes, with the image.
    await page.locator('#chat-input').fill('what is this?');
    await page.locator('#chat-send').click();
    await expect.poll(() => page.locator('#chat-output').textContent()).toContain('[turn 1 completed]');
    expect(posted()).toBe(1);
    const items = (await call('GET', '/v1/sessions/too-large/items')).items as any[];
    expect(items.find((item) => item.role === 'user').content).toEqual([
      { type: 'input_text', text: 'what is this?' },
      expect.objectContaining({ type: 'input_image', media_type: 'image/png', bytes: 5000 }),
    ]);
    await page.context().close();
  });

  it('a turn of exactly MAX_BODY_BYTES, with text or an image alone, is sent and taken; one over is not sent', {
    timeout: 60_000,
  }, async () => {
    const { page, posted } = await open('at-the-limit');
    const image = pngOf(3000);
    // The body the chat box sends for `text` and the image (as fetch sends it: UTF-8).
    const body = (text: string) =>
      JSON.stringify({
        input: [
          {
            type: 'message',
            role: 'user',
            content: [
              { type: 'input_text', text },
              { type: 'input_image', image_url: `data:image/png;base64,${image.toString('base64')}` },
            ],
          },
        ],
        stream: true,
      });
    const fits = 'x'.repeat(MAX_BODY_BYTES - Buffer.byteLength(body('')));
    expect(Buffer.byteLength(body(fits))).toBe(MAX_BODY_BYTES);
    await page.locator('#chat-image').setInputFiles({ name: 'edge.png', mimeType: 'image/png', buffer: image });
    await expect.poll(() => page.locator('#chat-attached').textContent()).toBe('edge.png (3000 bytes) Remove');
    await page.locator('#chat-input').fill(`${fits}x`);
    await page.locator('#chat-send').click();
    await expect
      .poll(() => page.locator('#chat-output').textContent())
      .toBe(
        `Not sent: the request would be ${MAX_BODY_BYTES + 1} bytes, and the API takes requests of at most ` +
          `${MAX_BODY_BYTES} bytes (MAX_BODY_BYTES). A shorter input or a smaller image fits.`,
      );
    expect(posted()).toBe(0);
    await page.locator('#chat-input').fill(fits);
    await page.locator('#chat-send').click();
    await expect.poll(() => page.locator('#chat-output').textContent()).toContain('[turn 1 completed]');
    expect(posted()).toBe(1);
    // The largest image whose turn alone (no text) fits is attached and taken; one byte more (four
    // of base64) is not attached.
    const around = JSON.stringify({
      input: [
        { type: 'message', role: 'user', content: [{ type: 'input_image', image_url: 'data:image/png;base64,' }] },
      ],
      stream: true,
    });
    const largest = 3 * Math.floor((MAX_BODY_BYTES - Buffer.byteLength(around)) / 4);
    await page
      .locator('#chat-image')
      .setInputFiles({ name: 'over.png', mimeType: 'image/png', buffer: pngOf(largest + 1) });
    await expect
      .poll(() => page.locator('#chat-image-error').textContent())
      .toBe(
        `over.png is not attached: it is ${largest + 1} bytes, sent as base64 in a request of ` +
          `${Buffer.byteLength(around) + 4 * (largest / 3 + 1)} bytes, and the API takes requests of at most ` +
          `${MAX_BODY_BYTES} bytes (MAX_BODY_BYTES).`,
      );
    await page
      .locator('#chat-image')
      .setInputFiles({ name: 'most.png', mimeType: 'image/png', buffer: pngOf(largest) });
    await expect.poll(() => page.locator('#chat-attached').textContent()).toBe(`most.png (${largest} bytes) Remove`);
    await page.locator('#chat-input').fill('');
    await page.locator('#chat-send').click();
    await expect.poll(() => page.locator('#chat-output').textContent()).toContain('[turn 2 completed]');
    expect(posted()).toBe(2);
    await page.context().close();
  });

  it('a pasted image of a type the API does not take is refused, saying which it takes', {
    timeout: 60_000,
  }, async () => {
    const { page, posted } = await open('wrong-type');
    await page.locator('#chat-input').focus();
    await paste(page, 'shot.bmp', 'image/bmp', Buffer.from('BM'));
    const error = page.locator('#chat-image-error');
    expect(await page.locator('#chat-attached').textContent()).toBe('');
    await expect
      .poll(() => error.textContent())
      .toBe('shot.bmp is not attached: it is image/bmp, and the API takes PNG, JPEG, GIF or WebP images.');
    // An image attached before stays when a refused one is pasted.
    await paste(page, 'dot.png', 'image/png', DOT);
    await expect.poll(() => page.locator('#chat-attached').textContent()).toBe('dot.png (68 bytes) Remove');
    expect(await error.isHidden()).toBe(true);
    await paste(page, 'icon.svg', 'image/svg+xml', Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>'));
    await expect
      .poll(() => error.textContent())
      .toBe('icon.svg is not attached: it is image/svg+xml, and the API takes PNG, JPEG, GIF or WebP images.');
    expect(await page.locator('#chat-attached').textContent()).toBe('dot.png (68 bytes) Remove');
    // Remove takes the reason with the image.
    await page.getByRole('button', { name: 'Remove' }).click();
    expect(await error.isHidden()).toBe(true);
    expect(posted()).toBe(0);
    await page.context().close();
  });
});
