import { afterEach, describe, expect, it } from 'vitest';
import type { ContentPart } from '../../lib/content.ts';
import type { PromptItem } from '../../lib/items.ts';
import { ANTHROPIC_MANY_IMAGES } from '../../lib/models/anthropic-model.ts';
import { oldestOver } from '../../lib/models/media-parts.ts';
import { OPENAI_MANY_IMAGES } from '../../lib/models/openai-compatible-model.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { runTurn } from '../../lib/turn/index.ts';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { imageBlocks, withoutBreakpoints } from '../support/messages-body.ts';
import { servicesFor } from '../support/recording-model.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * A request's images (and files) together: Anthropic refuses a request over 32 MB (413 `request_too_large`),
 * OpenAI one over 50 MB of images. A screenshot loop passes either within a few dozen steps
 * whatever each screenshot weighs, so the oldest of a request's images go as text placeholders
 * once their base64 passes the provider's `manyImages.mostBytes`, a fifth of it at a time.
 */

let provider: FakeProvider | undefined;
afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

/** A PNG of 1280x800 of `bytes` bytes in all, each `n` its own. */
const screenshot = (bytes: number, n: number): Uint8Array => pngBytes(1280, 800, bytes - 45, n);

/** A stored screenshot as a prompt carries it: its blob's reference and its bytes. */
const stored = (data: Uint8Array, n: number): ContentPart =>
  ({
    type: 'input_image',
    blob: n.toString(16).padStart(64, '0'),
    media_type: 'image/png',
    bytes: data.length,
    width: 1280,
    height: 800,
    data,
  }) as ContentPart;

/** A computer-use loop of `count` screenshots of 1,000,000 bytes, one per tool result. */
function screenshotLoop(shots: readonly Uint8Array[], count: number): PromptItem[] {
  const prompt: PromptItem[] = [{ type: 'message', role: 'user', content: 'Use the computer', seq: 1 }];
  for (let n = 0; n < count; n++) {
    const call_id = `toolu_${n}`;
    prompt.push(
      { type: 'function_call', call_id, name: 'computer', arguments: '{"action":"screenshot"}', seq: 2 + 2 * n },
      { type: 'function_call_output', call_id, output: [stored(shots[n]!, n)], seq: 3 + 2 * n },
    );
  }
  return prompt;
}

/** The seqs named by the image placeholders of a request body, in order. */
function placeholderSeqs(body: unknown): number[] {
  return [...JSON.stringify(body).matchAll(/\[image omitted: image\/png 1280x800, \d+ KB, item (\d+)\]/g)].map(
    (match) => Number(match[1]),
  );
}

const anthropicEnv = (url: string) => ({
  ANTHROPIC_API_KEY: 'sk-ant-test',
  ANTHROPIC_BASE_URL: url,
  MODEL_MAX_RETRIES: '0',
});

async function anthropicBody(prompt: PromptItem[]): Promise<{ body: any; raw: number }> {
  provider = await startFakeProvider(() => ({ text: fixture('anthropic-message-text.json') }));
  const model = resolveModel('anthropic:claude-sonnet-4-5', anthropicEnv(provider.baseURL));
  await model.generate({ prompt, tools: [], maxOutputTokens: 64 });
  const body = provider.requests[0]!.body;
  const raw = JSON.stringify(body).length;
  await provider.close();
  provider = undefined;
  return { body, raw };
}

const MIB = 1024 * 1024;
const base64Of = (blocks: any[]) => blocks.reduce((sum, block) => sum + block.source.data.length, 0);

describe('oldestOver: how many of the oldest images go as text', () => {
  it('none under the limit; past it, those before the first fifth-step that covers the excess', () => {
    expect(oldestOver([4, 4, 4], 12)).toBe(0);
    // 13 over 12 by 1: the first step is 2 (a fifth of 12), so the images before 2 go: one of 4.
    expect(oldestOver([4, 4, 4, 1], 12)).toBe(1);
    // Over by 5: three steps of 2 (6) cover it; two images start before 6.
    expect(oldestOver([4, 4, 4, 4, 1], 12)).toBe(2);
    // Over by 7: four steps (8); the third image starts at 8, so two go.
    expect(oldestOver([4, 4, 4, 4, 3], 12)).toBe(2);
    // A count (each weighing 1) over 100 goes twenty at a time.
    expect(oldestOver(new Array(101).fill(1), 100)).toBe(20);
    expect(oldestOver(new Array(120).fill(1), 100)).toBe(20);
    expect(oldestOver(new Array(121).fill(1), 100)).toBe(40);
  });

  it('what stays is within the limit, and the cut only moves forward as images are added', () => {
    const weights = Array.from({ length: 200 }, (_, n) => 1 + ((n * 7919) % 13));
    let last = 0;
    for (let count = 1; count <= weights.length; count++) {
      const some = weights.slice(0, count);
      const cut = oldestOver(some, 40);
      const kept = some.slice(cut).reduce((sum, weight) => sum + weight, 0);
      expect(kept).toBeLessThanOrEqual(40);
      expect(cut).toBeGreaterThanOrEqual(last);
      last = cut;
    }
  });
});

describe('anthropic: a request whose images pass 24 MiB of base64', () => {
  const shots = Array.from({ length: 23 }, (_, n) => screenshot(1_000_000, n));

  it('gets its oldest screenshots as placeholders, and stays under the 32 MB Anthropic takes', async () => {
    expect(ANTHROPIC_MANY_IMAGES.mostBytes).toBe(24 * MIB);
    const whole = await anthropicBody(screenshotLoop(shots, 18));
    expect(imageBlocks(whole.body)).toHaveLength(18);
    expect(placeholderSeqs(whole.body)).toEqual([]);

    const over = await anthropicBody(screenshotLoop(shots, 19));
    const blocks = imageBlocks(over.body);
    // 19 screenshots come to 25,333,384 bytes of base64: the oldest four go (a step of 4.8 MiB).
    expect(blocks).toHaveLength(15);
    expect(placeholderSeqs(over.body)).toEqual([3, 5, 7, 9]);
    expect(base64Of(blocks)).toBeLessThanOrEqual(24 * MIB);
    expect(over.raw).toBeLessThan(32_000_000);
    // The newest go as they are.
    expect(blocks.at(-1).source.data).toBe(Buffer.from(shots[18]!).toString('base64'));
  });

  it('the placeholders hold while the next screenshots come, so the prefix stays cached', async () => {
    const first = await anthropicBody(screenshotLoop(shots, 19));
    const later = await anthropicBody(screenshotLoop(shots, 22));
    const next = await anthropicBody(screenshotLoop(shots, 23));
    expect(placeholderSeqs(later.body)).toEqual([3, 5, 7, 9]);
    expect(imageBlocks(later.body)).toHaveLength(18);
    expect(placeholderSeqs(next.body)).toEqual([3, 5, 7, 9, 11, 13, 15, 17]);
    expect(imageBlocks(next.body)).toHaveLength(15);
    // The earlier request's messages, but its last two (its breakpoints' and the newest), open the later one's.
    const shared = withoutBreakpoints(first.body).slice(0, -2);
    expect(withoutBreakpoints(later.body).slice(0, shared.length)).toEqual(shared);
  });

  it("a turn's receipt counts them, and their blobs are not read", async () => {
    provider = await startFakeProvider(() => ({ text: fixture('anthropic-message-text.json') }));
    const model = resolveModel('anthropic:claude-sonnet-4-5', anthropicEnv(provider.baseURL));
    const store = new MemoryStore();
    const sessions = new SessionLog(store);
    const services = servicesFor(sessions, store, model);
    await sessions.create({ id: 'shots' });
    const content: ContentPart[] = [
      { type: 'input_text', text: 'Compare' },
      ...shots.slice(0, 19).map((bytes) => ({ type: 'input_image' as const, image_url: dataUrl('image/png', bytes) })),
    ];
    await runTurn(services, 'shots', {
      input: [{ type: 'message', role: 'user', content }],
      strategy_config: { full_images: 200 },
    });
    await services.settle();
    const reads: string[] = [];
    const get = store.get.bind(store);
    store.get = (key, options) => {
      if (key.includes('/blob/')) reads.push(key);
      return get(key, options);
    };
    await runTurn(services, 'shots', { input: 'again', strategy_config: { full_images: 200 } });
    await services.settle();
    expect(provider.requests).toHaveLength(2);
    for (const request of provider.requests) {
      expect(imageBlocks(request.body)).toHaveLength(15);
      expect(JSON.stringify(request.body).length).toBeLessThan(32_000_000);
    }
    expect((await sessions.getTurn('shots', 1)).receipt?.media_as_text).toBe(4);
    expect((await sessions.getTurn('shots', 2)).receipt?.media_as_text).toBe(4);
    // Read from the history, only the 15 blobs sent are read.
    expect(new Set(reads).size).toBe(15);
  });
});

describe('openai: a request past 500 images or 45 MiB of base64', () => {
  const env = (url: string) => ({ OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: url, MODEL_MAX_RETRIES: '0' });

  async function openaiBody(prompt: PromptItem[], name = 'gpt-4.1'): Promise<any> {
    provider = await startFakeProvider(() => ({ text: fixture('openai-chat-text.json') }));
    await resolveModel(`openai:${name}`, env(provider.baseURL)).generate({ prompt, tools: [], maxOutputTokens: 64 });
    const body = provider.requests[0]!.body;
    await provider.close();
    provider = undefined;
    return body;
  }

  const imageParts = (body: any): any[] =>
    body.messages.flatMap((message: any) =>
      Array.isArray(message.content) ? message.content.filter((part: any) => part.type === 'image_url') : [],
    );

  it('gets the oldest as placeholders past 45 MiB, and every image under it', async () => {
    expect(OPENAI_MANY_IMAGES).toEqual({ most: 500, mostBytes: 45 * MIB });
    const shots = Array.from({ length: 36 }, (_, n) => screenshot(1_000_000, n));
    expect(imageParts(await openaiBody(screenshotLoop(shots, 35)))).toHaveLength(35);
    const body = await openaiBody(screenshotLoop(shots, 36));
    // 36 come to 48,000,096 bytes of base64, over 47,185,920 by 814,176: the oldest 8 go (a step of 9 MiB).
    expect(imageParts(body)).toHaveLength(28);
    expect(placeholderSeqs(body)).toEqual([3, 5, 7, 9, 11, 13, 15, 17]);
  });

  it('gets the oldest as placeholders past 500 images, a hundred at a time', async () => {
    const small = Array.from({ length: 501 }, (_, n) => pngBytes(1280, 800, 8, n));
    const body = await openaiBody(screenshotLoop(small, 501));
    expect(imageParts(body)).toHaveLength(401);
  });
});

describe('anthropic: a request whose PDF and screenshots pass 24 MiB of base64 together', () => {
  /** A PDF of `bytes` bytes: its header, padding, its end. */
  const pdf = (bytes: number): Uint8Array => {
    const data = new Uint8Array(bytes).fill(48);
    data.set(new TextEncoder().encode('%PDF-1.4\n'), 0);
    data.set(new TextEncoder().encode('\n%%EOF\n'), bytes - 7);
    return data;
  };
  const documents = (body: any): any[] =>
    body.messages.flatMap((message: any) =>
      Array.isArray(message.content) ? message.content.filter((block: any) => block.type === 'document') : [],
    );

  it('weighs the PDF too: the oldest go as placeholders, PDF first, and the request stays under 32 MB', async () => {
    const data = pdf(6_000_000);
    const report: ContentPart = {
      type: 'input_file',
      filename: 'report.pdf',
      blob: 'f'.repeat(64),
      media_type: 'application/pdf',
      bytes: data.length,
      data,
    } as ContentPart;
    const shots = Array.from({ length: 18 }, (_, n) => screenshot(1_000_000, n));
    const [first, ...loop] = screenshotLoop(shots, 18);
    const prompt: PromptItem[] = [
      { ...first!, type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Fill in the form' }, report] },
      ...loop,
    ];
    const { body, raw } = await anthropicBody(prompt);
    // The PDF's 8,000,000 bytes of base64 and the 18 screenshots' 24,000,048 are over 24 MiB by
    // 6,834,224: two steps of 5,033,164 cover it, and the PDF and two screenshots start before them.
    expect(documents(body)).toHaveLength(0);
    expect(JSON.stringify(body)).toContain('[application/pdf report.pdf, 5859 KB]');
    expect(placeholderSeqs(body)).toEqual([3, 5]);
    expect(imageBlocks(body)).toHaveLength(16);
    expect(raw).toBeLessThan(32_000_000);
  });
});
