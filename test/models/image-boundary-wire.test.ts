import { afterEach, describe, expect, it } from 'vitest';
import type { InputImagePart } from '../../lib/content.ts';
import { parseServiceConfig } from '../../lib/config.ts';
import type { Item, PromptItem } from '../../lib/items.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { callStateless, prepareStateless } from '../../lib/openai/stateless.ts';
import { preparePrompt } from '../../lib/strategies/prepare-prompt.ts';
import { wholeImages } from '../../lib/strategies/shorten-images.ts';
import { resolveStrategyConfig } from '../../lib/strategies/strategy-config.ts';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { weatherTool } from '../support/fake-providers/tool-loop.ts';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';

let provider: FakeProvider | undefined;
afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

const config = resolveStrategyConfig({ request: { full_images: 1, image_epoch_size: 2 } });
const screen = pngBytes(1280, 800, 40, 3);

/**
 * A computer-use history of `steps` steps as a turn reads it: a user message, then per step a
 * call and its output, a line of text and a screenshot (its blob read into `data`); the
 * screenshot of `oversized` steps is over Anthropic's 8000-pixel side.
 */
function history(steps: number, oversized: readonly number[] = []): PromptItem[] {
  const items: PromptItem[] = [{ type: 'message', role: 'user', content: 'Book a table', seq: 1 }];
  for (let step = 1; step <= steps; step += 1) {
    const call_id = `call_${step}`;
    const [width, height] = oversized.includes(step) ? [1280, 9000] : [1280, 800];
    const blob = String(step % 10).repeat(64);
    const shot: InputImagePart = {
      type: 'input_image',
      blob,
      media_type: 'image/png',
      bytes: screen.length,
      width,
      height,
      data: screen,
    };
    items.push(
      { type: 'function_call', call_id, name: 'get_weather', arguments: `{"location":"step ${step}"}`, seq: 2 * step },
      {
        type: 'function_call_output',
        call_id,
        output: [{ type: 'input_text', text: `step ${step} done` }, shot],
        seq: 2 * step + 1,
      },
    );
  }
  return items;
}

/** The wire `messages` of one request per history as `id` sends them, each prompt shortened by `shorten_images`. */
async function requestsFor(id: string, answer: string, histories: PromptItem[][]): Promise<any[]> {
  provider = await startFakeProvider(() => ({ text: fixture(answer) }));
  const model = resolveModel(id, {
    OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
    OPENAI_COMPATIBLE_IMAGES: 'true',
    OPENAI_COMPATIBLE_API_KEY: 'sk-test',
    ANTHROPIC_BASE_URL: provider.baseURL,
    ANTHROPIC_API_KEY: 'sk-ant-test',
    MODEL_MAX_RETRIES: '0',
  });
  for (const items of histories) {
    const prompt = preparePrompt(items, 'shorten_images', { config }).items;
    await model.generate({ prompt, tools: [weatherTool], maxOutputTokens: 64 });
  }
  return provider.requests.map((request) => request.body.messages);
}

describe("shorten_images' boundary move on the wire", () => {
  it('changes a Chat Completions request from the tool message of the first image it prunes on', async () => {
    // Full 1, size 2: 2 screenshots -> both whole; 3 -> the newest whole, the 2 before pruned; 4 -> the 2 newest.
    expect([wholeImages(2, config), wholeImages(3, config), wholeImages(4, config)]).toEqual([2, 1, 2]);
    const [two, three, four] = await requestsFor('openai-compatible:test-model', 'openai-chat-text.json', [
      history(2),
      history(3),
      history(4),
    ]);
    const image = (step: number) => ({
      role: 'user',
      content: [
        { type: 'text', text: `Image 1 of tool call call_${step}:` },
        { type: 'image_url', image_url: { url: `data:image/png;base64,${Buffer.from(screen).toString('base64')}` } },
      ],
    });
    const tool = (step: number, image: string) => ({
      role: 'tool',
      tool_call_id: `call_${step}`,
      content: `step ${step} done\n${image}`,
    });
    const attached = '[image 1: in the message after the tool results]';
    const pruned = (step: number) => `[image omitted: image/png 1280x800, 1 KB, item ${2 * step + 1}]`;
    // Whole, each screenshot follows its tool message in a user message.
    expect(two.map((message: any) => message.role)).toEqual([
      'user',
      'assistant',
      'tool',
      'user',
      'assistant',
      'tool',
      'user',
    ]);
    expect([two[2], two[3], two[5], two[6]]).toEqual([tool(1, attached), image(1), tool(2, attached), image(2)]);
    // The boundary move changes the request from the first pruned image's tool message on, as it
    // does a user message's image; the messages before it keep their bytes.
    expect(JSON.stringify(three.slice(0, 2))).toBe(JSON.stringify(two.slice(0, 2)));
    expect([three[2], three[4], three[6], three[7]]).toEqual([
      tool(1, pruned(1)),
      tool(2, pruned(2)),
      tool(3, attached),
      image(3),
    ]);
    expect(three).toHaveLength(8);
    // Until the next move, the next request starts with the bytes of this one's messages.
    expect(four).toHaveLength(three.length + 3);
    expect(JSON.stringify(four).startsWith(JSON.stringify(three).slice(0, -1))).toBe(true);
  });

  it('anthropic: the tool_result images go as image blocks until pruned, then as the placeholder', async () => {
    const [before, after] = await requestsFor('anthropic:claude-sonnet-4-5', 'anthropic-message-text.json', [
      history(2, [2]),
      history(3, [2]),
    ]);
    const toolResult = (messages: any[], index: number) => messages[index].content[0].content;
    expect(toolResult(before, 2)).toEqual([
      { type: 'text', text: 'step 1 done' },
      {
        type: 'image',
        source: { type: 'base64', media_type: 'image/png', data: Buffer.from(screen).toString('base64') },
      },
    ]);
    const placeholder = (step: number, height: number) => ({
      type: 'text',
      text: `[image omitted: image/png 1280x${height}, 1 KB, item ${2 * step + 1}]`,
    });
    expect(toolResult(after, 2)).toEqual([{ type: 'text', text: 'step 1 done' }, placeholder(1, 800)]);
    // An image over the side Anthropic takes went as the placeholder already: pruned, it reads the same.
    expect(toolResult(before, 4)).toEqual([{ type: 'text', text: 'step 2 done' }, placeholder(2, 9000)]);
    expect(toolResult(after, 4)).toEqual(toolResult(before, 4));
  });
});

/**
 * The Anthropic request bodies for `histories`, each shortened by `shorten_images` (`imageConfig`)
 * behind instructions, the user's first message standing for the end of the stable prefix (the
 * context notice of an epoch strategy), with a tool offered: all four breakpoints taken.
 */
async function anthropicBodies(imageConfig: typeof config, histories: PromptItem[][]): Promise<any[]> {
  provider = await startFakeProvider(() => ({ text: fixture('anthropic-message-text.json') }));
  const model = resolveModel('anthropic:claude-sonnet-4-5', {
    ANTHROPIC_BASE_URL: provider.baseURL,
    ANTHROPIC_API_KEY: 'sk-ant-test',
    MODEL_MAX_RETRIES: '0',
  });
  const instructions: PromptItem = { type: 'message', role: 'system', content: 'Operate the browser.' };
  for (const items of histories) {
    const prompt = [instructions, ...preparePrompt(items, 'shorten_images', { config: imageConfig }).items];
    await model.generate({ prompt, tools: [weatherTool], maxOutputTokens: 64, cacheBreakpoint: 1 });
  }
  return provider.requests.map((request) => request.body);
}

/**
 * A request as Anthropic caches it: its blocks in prefix order (tools, system, each message's
 * content blocks), each as its bytes without `cache_control`, and which of them carry one.
 */
function cacheBlocks(body: any): { blocks: string[]; marked: number[] } {
  const all: any[] = [...body.tools, ...body.system, ...body.messages.flatMap((message: any) => message.content)];
  const marked = all.flatMap((block, index) => (block.cache_control ? [index] : []));
  const blocks = all.map(({ cache_control: _mark, ...block }) => JSON.stringify(block));
  return { blocks, marked };
}

describe('anthropic: the cache across a boundary move past an image it never got', () => {
  it('sends every block again as it was, and the next request reads the cached prefix', async () => {
    // Full 1, size 1: 1 screenshot -> whole; 2 -> the first pruned (over 8000 pixels: already text).
    const oneByOne = resolveStrategyConfig({ request: { full_images: 1, image_epoch_size: 1 } });
    const [before, after] = await anthropicBodies(oneByOne, [history(1, [1]), history(2, [1])]);
    const sent = cacheBlocks(before);
    const next = cacheBlocks(after);
    // Byte for byte, the next request starts with every block of this one: the pruned
    // screenshot's tool_result reads as it did.
    expect(next.blocks.slice(0, sent.blocks.length)).toEqual(sent.blocks);
    expect(next.blocks).toHaveLength(sent.blocks.length + 2);
    // Blocks: 0 the tool, 1 the instructions, 2 the user's message (the stable end), 3 and 4
    // call_1 and its result, 5 and 6 call_2 and its result.
    expect(sent.marked).toEqual([0, 1, 3, 4]);
    // The instructions' breakpoint moves to the stable end once an item after it is compacted,
    // though this one changed no byte: Anthropic's cache key is the blocks, not where
    // cache_control stands (the sliding anchors move on every request), so the next request
    // still reads this one's whole prompt back (its last anchor, block 4, is within the 20
    // blocks the anchor at block 6 looks back over), and the stable end is cached before an
    // image boundary move changes the prompt after it.
    expect(next.marked).toEqual([0, 2, 5, 6]);
    expect(next.marked.at(-1)! - sent.marked.at(-1)!).toBeLessThan(20);
  });
});

describe('a stateless call (store: false) across a boundary move', () => {
  it('numbers its items by position for the placeholders too: a Chat Completions request keeps its bytes', async () => {
    provider = await startFakeProvider(() => ({ text: fixture('openai-chat-text.json') }));
    const env = {
      OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
      OPENAI_COMPATIBLE_IMAGES: 'true',
      OPENAI_COMPATIBLE_API_KEY: 'sk-test',
      MODEL_MAX_RETRIES: '0',
      FULL_IMAGES: '1',
      IMAGE_EPOCH_SIZE: '2',
    };
    const model = resolveModel('openai-compatible:test-model', env);
    const services = {
      env,
      model: () => model,
      config: parseServiceConfig({}),
      background: () => undefined,
      log: () => undefined,
      info: () => undefined,
    };
    // As a client resends its conversation: each call's items, the screenshots as data: URLs.
    const items = (steps: number): Item[] => [
      { type: 'message', role: 'user', content: 'Book a table' },
      ...Array.from({ length: steps }, (_, index): Item[] => [
        { type: 'function_call', call_id: `call_${index + 1}`, name: 'get_weather', arguments: '{}' },
        {
          type: 'function_call_output',
          call_id: `call_${index + 1}`,
          output: [{ type: 'input_image', image_url: dataUrl('image/png', pngBytes(1280, 800, 40, index + 1)) }],
        },
      ]).flat(),
    ];
    for (const steps of [3, 4]) {
      const request = { items: items(steps), instructions: null, tools: [weatherTool], model: model.id };
      await callStateless(services, await prepareStateless(services, request));
    }
    const [before, after] = provider.requests.map((request) => JSON.stringify(request.body.messages));
    // Both calls pruned the first two screenshots, numbered by their items' places; the boundary
    // did not move between them.
    expect(before).toContain('[image omitted: image/png 1280x800, 1 KB, item 3]');
    expect(before).toContain('[image omitted: image/png 1280x800, 1 KB, item 5]');
    expect(after!.startsWith(before!.slice(0, -1))).toBe(true);
  });
});
