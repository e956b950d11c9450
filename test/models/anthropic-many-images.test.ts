import { afterEach, describe, expect, it } from 'vitest';
import type { ContentPart } from '../../lib/content.ts';
import { sha256Hex } from '../../lib/hash.ts';
import type { PromptItem } from '../../lib/items.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { runTurn } from '../../lib/turn/index.ts';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { imageBlocks, withoutBreakpoints } from '../support/messages-body.ts';
import { servicesFor } from '../support/recording-model.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * The Messages API holds every image of a request with more than 20 to 2000 pixels a side
 * ("At least one of the image dimensions exceed max allowed size for many-image requests: 2000
 * pixels"), images in tool results included. Such a request gets each larger image as its text
 * placeholder, as one over 8000 pixels always does.
 */

let provider: FakeProvider | undefined;
afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

const image = (width: number, height: number, n: number): ContentPart => {
  const data = pngBytes(width, height, 8, n);
  return {
    type: 'input_image',
    blob: String(n % 10).repeat(64),
    media_type: 'image/png',
    bytes: data.length,
    width,
    height,
    data,
  } as ContentPart;
};

const env = (url: string) => ({ ANTHROPIC_API_KEY: 'sk-ant-test', ANTHROPIC_BASE_URL: url, MODEL_MAX_RETRIES: '0' });

async function sentBody(prompt: PromptItem[]): Promise<any> {
  provider = await startFakeProvider(() => ({ text: fixture('anthropic-message-text.json') }));
  const model = resolveModel('anthropic:claude-sonnet-4-5', env(provider.baseURL));
  await model.generate({ prompt, tools: [], maxOutputTokens: 64 });
  return provider.requests[0]!.body;
}

describe('anthropic: a request with more than 20 images', () => {
  it('gets no image over 2000 pixels a side: the large ones go as placeholders', async () => {
    const small = Array.from({ length: 20 }, (_, n) => image(800, 600, n));
    const prompt: PromptItem[] = [
      { type: 'function_call', call_id: 'toolu_a', name: 'screenshot', arguments: '{}', seq: 1 },
      { type: 'function_call_output', call_id: 'toolu_a', output: [image(2560, 1600, 21)], seq: 2 },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Compare' }, ...small], seq: 3 },
    ];
    const body = await sentBody(prompt);
    expect(imageBlocks(body)).toHaveLength(20);
    expect(JSON.stringify(body)).toContain('[image omitted: image/png 2560x1600');
  });

  it('whose newest image is over 2000 pixels gets the newest 20 as they are, the oldest as placeholders', async () => {
    // Lowering the side would hide the screenshot just taken: the oldest go instead, four at a time.
    const small = Array.from({ length: 20 }, (_, n) => image(800, 600, n));
    const prompt: PromptItem[] = [
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Compare' }, ...small], seq: 1 },
      { type: 'function_call', call_id: 'toolu_a', name: 'screenshot', arguments: '{}', seq: 2 },
      { type: 'function_call_output', call_id: 'toolu_a', output: [image(2560, 1600, 21)], seq: 3 },
    ];
    const body = await sentBody(prompt);
    const blocks = imageBlocks(body);
    expect(blocks).toHaveLength(17);
    expect(JSON.stringify(body)).not.toContain('[image omitted: image/png 2560x1600');
    expect(JSON.stringify(body).match(/\[image omitted: image\/png 800x600, 1 KB, item 1\]/g)).toHaveLength(4);
  });

  it('20 images, one of them large, all go as images', async () => {
    const prompt: PromptItem[] = [
      {
        type: 'message',
        role: 'user',
        content: [...Array.from({ length: 19 }, (_, n) => image(800, 600, n)), image(2560, 1600, 19)],
        seq: 1,
      },
    ];
    expect(imageBlocks(await sentBody(prompt))).toHaveLength(20);
  });

  it("a turn's receipt counts the large images sent as placeholders", async () => {
    provider = await startFakeProvider(() => ({ text: fixture('anthropic-message-text.json') }));
    const model = resolveModel('anthropic:claude-sonnet-4-5', env(provider.baseURL));
    const store = new MemoryStore();
    const sessions = new SessionLog(store);
    const services = servicesFor(sessions, store, model);
    await sessions.create({ id: 'many' });
    const shots = Array.from({ length: 21 }, (_, n) => ({
      type: 'input_image' as const,
      image_url: dataUrl('image/png', pngBytes(n < 3 ? 2560 : 800, n < 3 ? 1600 : 600, 8, n)),
    }));
    await runTurn(services, 'many', {
      input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Compare' }, ...shots] }],
      strategy_config: { full_images: 30 },
    });
    await services.settle();
    expect(provider.requests).toHaveLength(1);
    expect(imageBlocks(provider.requests[0]!.body)).toHaveLength(18);
    const turn = await sessions.getTurn('many', 1);
    expect(turn.receipt?.media_as_text).toBe(3);
  });
});

/** A computer-use loop of `count` screenshots, one per tool result, each of `width` x `height`. */
function screenshotLoop(count: number, width = 800, height = 600): PromptItem[] {
  const prompt: PromptItem[] = [{ type: 'message', role: 'user', content: 'Use the computer', seq: 1 }];
  for (let n = 0; n < count; n++) {
    const call_id = `toolu_${n}`;
    prompt.push(
      { type: 'function_call', call_id, name: 'computer', arguments: '{"action":"screenshot"}', seq: 2 + 2 * n },
      { type: 'function_call_output', call_id, output: [image(width, height, n)], seq: 3 + 2 * n },
    );
  }
  return prompt;
}

/** The seqs named by the image placeholders of a Messages request body, in order. */
function placeholderSeqs(body: any): number[] {
  return [...JSON.stringify(body).matchAll(/\[image omitted: image\/png 800x600, 1 KB, item (\d+)\]/g)].map((match) =>
    Number(match[1]),
  );
}

describe('anthropic: a computer-use loop of screenshots over 2000 pixels a side', () => {
  const retinaLoop = (count: number) => screenshotLoop(count, 2560, 1600);
  const seqs = (body: unknown) =>
    [...JSON.stringify(body).matchAll(/\[image omitted: image\/png 2560x1600, 1 KB, item (\d+)\]/g)].map((match) =>
      Number(match[1]),
    );

  it('sends the newest 20 at most, as they are, the oldest as placeholders four at a time', async () => {
    const at20 = await sentBody(retinaLoop(20));
    await provider!.close();
    expect(imageBlocks(at20)).toHaveLength(20);
    const at21 = await sentBody(retinaLoop(21));
    await provider!.close();
    const at24 = await sentBody(retinaLoop(24));
    await provider!.close();
    const at25 = await sentBody(retinaLoop(25));
    expect(imageBlocks(at21)).toHaveLength(17);
    expect(seqs(at21)).toEqual([3, 5, 7, 9]);
    expect(imageBlocks(at24)).toHaveLength(20);
    expect(seqs(at24)).toEqual([3, 5, 7, 9]);
    expect(imageBlocks(at25)).toHaveLength(17);
    expect(seqs(at25)).toEqual([3, 5, 7, 9, 11, 13, 15, 17]);
    // The newest screenshot is always sent; the prefix of 21 holds up to 24.
    expect(JSON.stringify(at25)).not.toContain('item 51]');
    const shared = withoutBreakpoints(at21).slice(0, -2);
    expect(withoutBreakpoints(at24).slice(0, shared.length)).toEqual(shared);
  });
});

describe('anthropic: a request over 100 images', () => {
  it('gets the oldest as placeholders, twenty at a time, never more than 100 images', async () => {
    const body = await sentBody(screenshotLoop(105));
    expect(imageBlocks(body)).toHaveLength(85);
    // The oldest twenty screenshots (items 3, 5, ..., 41) go as the placeholders shorten_images writes.
    expect(placeholderSeqs(body)).toEqual(Array.from({ length: 20 }, (_, n) => 3 + 2 * n));
  });

  it('100 images all go as images', async () => {
    const body = await sentBody(screenshotLoop(100));
    expect(imageBlocks(body)).toHaveLength(100);
    expect(placeholderSeqs(body)).toEqual([]);
  });

  it('the placeholders move only every twenty images: the prefix of 101 holds up to 120', async () => {
    const first = await sentBody(screenshotLoop(101));
    await provider!.close();
    const later = await sentBody(screenshotLoop(120));
    await provider!.close();
    const next = await sentBody(screenshotLoop(121));
    expect(imageBlocks(first)).toHaveLength(81);
    expect(imageBlocks(later)).toHaveLength(100);
    expect(imageBlocks(next)).toHaveLength(81);
    expect(placeholderSeqs(next)).toHaveLength(40);
    // The earlier request's messages, but its last two (its breakpoints' and the newest), open the later one's.
    const shared = withoutBreakpoints(first).slice(0, -2);
    expect(withoutBreakpoints(later).slice(0, shared.length)).toEqual(shared);
  });

  it("a turn's receipt counts the oldest images sent as placeholders", async () => {
    provider = await startFakeProvider(() => ({ text: fixture('anthropic-message-text.json') }));
    const model = resolveModel('anthropic:claude-sonnet-4-5', env(provider.baseURL));
    const store = new MemoryStore();
    const sessions = new SessionLog(store);
    const services = servicesFor(sessions, store, model);
    await sessions.create({ id: 'most' });
    const shots = Array.from({ length: 103 }, (_, n) => ({
      type: 'input_image' as const,
      image_url: dataUrl('image/png', pngBytes(800, 600, 8, n)),
    }));
    await runTurn(services, 'most', {
      input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Compare' }, ...shots] }],
      strategy_config: { full_images: 200 },
    });
    await services.settle();
    expect(provider.requests).toHaveLength(1);
    expect(imageBlocks(provider.requests[0]!.body)).toHaveLength(83);
    const turn = await sessions.getTurn('most', 1);
    expect(turn.receipt?.media_as_text).toBe(20);
  });
});

describe('anthropic: the oldest images of a message over 100 images', () => {
  it('are not read from storage: only the images sent are', async () => {
    provider = await startFakeProvider(() => ({ text: fixture('anthropic-message-text.json') }));
    const model = resolveModel('anthropic:claude-sonnet-4-5', env(provider.baseURL));
    const store = new MemoryStore();
    const sessions = new SessionLog(store);
    const services = servicesFor(sessions, store, model);
    await sessions.create({ id: 'unread' });
    const shots = Array.from({ length: 103 }, (_, n) => pngBytes(800, 600, 8, n));
    const content: ContentPart[] = [
      { type: 'input_text', text: 'Compare' },
      ...shots.map((bytes) => ({ type: 'input_image' as const, image_url: dataUrl('image/png', bytes) })),
    ];
    const blobs = new Set(shots.map((bytes) => sha256Hex(bytes)));
    const read: string[] = [];
    const get = store.get.bind(store);
    store.get = (key, options) => {
      const sha256 = key.slice(-64);
      if (blobs.has(sha256)) read.push(sha256);
      return get(key, options);
    };
    await runTurn(services, 'unread', {
      input: [{ type: 'message', role: 'user', content }],
      strategy_config: { full_images: 200 },
    });
    await services.settle();
    expect(imageBlocks(provider.requests[0]!.body)).toHaveLength(83);
    // The turn's own images go from the bytes its request brought: none is read back.
    expect(read).toEqual([]);
    await runTurn(services, 'unread', { input: 'again', strategy_config: { full_images: 200 } });
    await services.settle();
    expect(imageBlocks(provider.requests[1]!.body)).toHaveLength(83);
    // Read from the history, the 20 oldest go as placeholders: their blobs are not read.
    expect(new Set(read)).toEqual(new Set(shots.slice(20).map((bytes) => sha256Hex(bytes))));
  });
});

describe('anthropic: an image of unknown size (an https URL)', () => {
  const url = (n: number): ContentPart => ({ type: 'input_image', image_url: `https://example.com/shot-${n}.png` });

  it('goes as a placeholder in a request over 20 images, as Anthropic could refuse it there', async () => {
    const prompt: PromptItem[] = [
      {
        type: 'message',
        role: 'user',
        content: [url(1), ...Array.from({ length: 20 }, (_, n) => image(800, 600, n))],
        seq: 1,
      },
    ];
    const body = await sentBody(prompt);
    expect(imageBlocks(body)).toHaveLength(20);
    expect(JSON.stringify(body)).not.toContain('https://example.com/shot-1.png"');
    expect(JSON.stringify(body)).toContain('[image omitted: image https://example.com/shot-1.png, item 1]');
  });

  it('so does a WebP stored without its size (before its header was read)', async () => {
    const { width: _w, height: _h, ...webp } = image(800, 600, 20) as Extract<ContentPart, { type: 'input_image' }>;
    const prompt: PromptItem[] = [
      {
        type: 'message',
        role: 'user',
        content: [{ ...webp, media_type: 'image/webp' }, ...Array.from({ length: 20 }, (_, n) => image(800, 600, n))],
        seq: 1,
      },
    ];
    const body = await sentBody(prompt);
    expect(imageBlocks(body)).toHaveLength(20);
    expect(JSON.stringify(body)).toContain('[image omitted: image/webp, 1 KB, item 1]');
  });

  it('goes by its URL in a request of 20 images', async () => {
    const prompt: PromptItem[] = [
      {
        type: 'message',
        role: 'user',
        content: [...Array.from({ length: 19 }, (_, n) => image(800, 600, n)), url(1)],
        seq: 1,
      },
    ];
    const blocks = imageBlocks(await sentBody(prompt)) as any[];
    expect(blocks).toHaveLength(20);
    expect(blocks.at(-1).source).toEqual({ type: 'url', url: 'https://example.com/shot-1.png' });
  });
});

describe('anthropic: an image over 5 MiB once in base64', () => {
  // The Messages API refuses a request holding one ("image exceeds 5 MB maximum: 5242884 bytes >
  // 5242880 bytes"), measured on the base64 it is sent as: 3 MiB and 3/4 of its bytes at most.
  const sized = (bytes: number, n: number): ContentPart => ({ ...image(1280, 800, n), bytes }) as ContentPart;

  it('goes as a text placeholder, in a message and in a tool result, and one at the limit as an image', async () => {
    const prompt: PromptItem[] = [
      { type: 'message', role: 'user', content: [sized(3_932_161, 1), sized(3_932_160, 2)], seq: 1 },
      { type: 'function_call', call_id: 'toolu_a', name: 'screenshot', arguments: '{}', seq: 2 },
      { type: 'function_call_output', call_id: 'toolu_a', output: [sized(4_500_000, 3)], seq: 3 },
    ];
    const body = await sentBody(prompt);
    expect(imageBlocks(body)).toHaveLength(1);
    const sent = JSON.stringify(body);
    expect(sent).toContain('[image omitted: image/png 1280x800, 3840 KB, item 1]');
    expect(sent).toContain('[image omitted: image/png 1280x800, 4395 KB, item 3]');
  });
});
