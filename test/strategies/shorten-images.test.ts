import { describe, expect, it } from 'vitest';
import type { ContentPart } from '../../lib/content.ts';
import type { PromptItem } from '../../lib/items.ts';
import { callsBeforeImage, computeAggregates } from '../../lib/strategies/aggregates.ts';
import { preparePrompt } from '../../lib/strategies/prepare-prompt.ts';
import { selectTail, tailRequirement } from '../../lib/strategies/select-tail.ts';
import { imagePlaceholder } from '../../lib/content.ts';
import { shortenImages, wholeImages } from '../../lib/strategies/shorten-images.ts';
import { resolveStrategyConfig } from '../../lib/strategies/strategy-config.ts';
import { call, imageParts, sequenced, user, type SequencedPromptItem } from './history-fixtures.ts';

const config = (full: number, size: number) =>
  resolveStrategyConfig({ request: { full_images: full, image_epoch_size: size } });

/** A computer-use session: a user message, then `steps` calls each answered by text and one screenshot. */
function screenshots(steps: number, textChars = 40): SequencedPromptItem[] {
  const items: PromptItem[] = [user('use the computer')];
  for (let step = 1; step <= steps; step += 1) {
    items.push(call(`c${step}`, 'computer', `{"step":${step}}`), {
      type: 'function_call_output',
      call_id: `c${step}`,
      output: [{ type: 'input_text', text: `${step}:`.padEnd(textChars, '.') }, ...imageParts(1, 1000 + step)],
    });
  }
  return sequenced(items);
}

function partsOf(item: PromptItem): ContentPart[] {
  const content = item.type === 'message' ? item.content : item.type === 'function_call_output' ? item.output : '';
  return typeof content === 'string' ? [] : content;
}

const wholeIn = (items: readonly PromptItem[]) =>
  items.flatMap(partsOf).filter((part) => part.type === 'input_image').length;
const placeholdersIn = (items: readonly PromptItem[]) =>
  items.flatMap(partsOf).filter((part) => part.type === 'input_text' && part.text.startsWith('[image omitted:')).length;

describe('wholeImages', () => {
  it.each([
    [0, 0],
    [3, 3],
    [4, 4],
    [7, 7],
    [8, 3],
    [12, 7],
    [13, 3],
  ])('full 3, epochs of 5: %i images -> %i whole', (images, whole) => {
    expect(wholeImages(images, config(3, 5))).toBe(whole);
  });

  it('keeps exactly full_images with epochs of 1, and none with full 0 and epochs of 1', () => {
    for (const images of [1, 2, 5, 40]) {
      expect(wholeImages(images, config(3, 1))).toBe(Math.min(3, images));
      expect(wholeImages(images, config(0, 1))).toBe(0);
    }
  });
});

describe('shorten_images', () => {
  it('replaces the older images of outputs and messages with placeholders naming the image and its item', () => {
    const history = sequenced([
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'look' }, ...imageParts(2, 640)] },
      ...screenshots(3).slice(1),
    ]);
    const prompt = preparePrompt(history, 'shorten_images', { config: config(2, 1) });
    // 5 images: the message's two and three screenshots; the newest two stay whole.
    expect(wholeIn(prompt.items)).toBe(2);
    expect(placeholdersIn(prompt.items)).toBe(3);
    expect(prompt.items[0]).toEqual({
      ...history[0],
      compacted: true,
      content: [
        { type: 'input_text', text: 'look' },
        { type: 'input_text', text: '[image omitted: image/png 640x800, 23 KB, item 1]' },
        { type: 'input_text', text: '[image omitted: image/png 640x800, 23 KB, item 1]' },
      ],
    });
    expect(partsOf(prompt.items[2]!)[1]).toEqual({
      type: 'input_text',
      text: '[image omitted: image/png 1001x800, 36 KB, item 3]',
    });
    // Items left whole are the history's own objects; the stored history is untouched.
    expect(prompt.items.at(-1)).toBe(history.at(-1));
    expect(prompt.items[1]).toBe(history[1]);
    expect(wholeIn(history)).toBe(5);
  });

  it('prunes within one item from its oldest part, and names an https image by its URL', () => {
    const parts: ContentPart[] = [
      { type: 'input_image', image_url: 'https://example.com/a.png' },
      ...imageParts(1, 10),
      { type: 'input_text', text: 'two shots' },
    ];
    const prompt = preparePrompt([{ type: 'message', role: 'user', content: parts }], 'shorten_images', {
      config: config(1, 1),
    });
    expect(partsOf(prompt.items[0]!)).toEqual([
      { type: 'input_text', text: '[image omitted: image https://example.com/a.png]' },
      parts[1],
      parts[2],
    ]);
    expect(imagePlaceholder({ type: 'input_image', image_url: 'data:image/png;base64,AAAA' }, 7)).toBe(
      '[image omitted: image inline, item 7]',
    );
  });

  it('changes nothing while the history holds no more images than it keeps, nor text or synthetic items', () => {
    const history = screenshots(3);
    const prompt = preparePrompt(history, 'shorten_images', { config: config(3, 5) });
    expect(prompt.items).toEqual(history);
    const notice: PromptItem = {
      type: 'message',
      role: 'user',
      content: [{ type: 'input_text', text: 'notice' }, ...imageParts(1, 5)],
      synthetic: 'inbox',
    };
    const withNotice = shortenImages.apply([...screenshots(6), notice], config(0, 1), {});
    expect(withNotice.at(-1)).toBe(notice);
    expect(placeholdersIn(withNotice)).toBe(6);
  });

  it('keeps the prompt before the newest whole image byte-identical between boundary moves', () => {
    const cfg = config(3, 5);
    let previous: PromptItem[] | undefined;
    let moves = 0;
    for (let steps = 1; steps <= 40; steps += 1) {
      const { items } = preparePrompt(screenshots(steps), 'shorten_images', { config: cfg });
      const moved = steps > 3 && wholeImages(steps, cfg) === 3;
      if (previous !== undefined && !moved) {
        // The new prompt is the previous one plus the new step: the whole prompt is a stable prefix.
        expect(JSON.stringify(items.slice(0, previous.length))).toBe(JSON.stringify(previous));
      } else if (previous !== undefined) {
        moves += 1;
        expect(placeholdersIn(items)).toBe(placeholdersIn(previous) + 5);
      }
      expect(wholeIn(items)).toBe(wholeImages(steps, cfg));
      previous = items;
    }
    expect(moves).toBe(7);
  });

  it('with the default list, keeps the prefix up to the notice byte-identical while neither boundary moves', () => {
    const cfg = resolveStrategyConfig({});
    let previous: { prefix: string; whole: number; notice: number } | undefined;
    let compared = 0;
    for (let steps = 60; steps <= 140; steps += 1) {
      // Outputs over 400 characters, so the tool strategy compacts some and places its notice.
      const prompt = preparePrompt(screenshots(steps, 450), undefined, { config: cfg });
      const prefix = JSON.stringify(prompt.items.slice(0, prompt.stablePrefixLength));
      const whole = wholeImages(steps, cfg);
      const current = { prefix, whole, notice: prompt.stablePrefixLength };
      expect(prompt.stablePrefixLength).toBeGreaterThan(0);
      if (previous !== undefined && whole === previous.whole + 1 && current.notice === previous.notice) {
        expect(prefix).toBe(previous.prefix);
        compared += 1;
      }
      previous = current;
    }
    expect(compared).toBeGreaterThan(40);
  });

  it('needs the calls from the one before its oldest whole image, stored whole, beside the tool strategies', () => {
    const history = screenshots(30);
    const aggregates = computeAggregates(history);
    expect(aggregates.images).toBe(30);
    // Full 3, epochs of 5, 30 images: 3 + (27 mod 5) = 5 whole, the oldest of them after 26 calls.
    expect(callsBeforeImage(aggregates, 5)).toBe(26);
    expect(shortenImages.tailCalls?.(config(3, 5), aggregates)).toBe(5);
    const tools = resolveStrategyConfig({
      request: { epoch_tool_call_threshold: 2, epoch_full_tool_calls: 1, epoch_compacted_tool_calls: 0, epoch_size: 1 },
    });
    const both = { ...tools, full_images: 3, image_epoch_size: 5 };
    expect(tailRequirement('shorten_tools_epoch', both, aggregates)).toEqual({ toolCalls: 2, seqs: [], wholeCalls: 2 });
    expect(tailRequirement('shorten_tools_epoch,shorten_images', both, aggregates)).toEqual({
      toolCalls: 5,
      seqs: [],
      wholeCalls: 5,
    });
    // Before a tool strategy, it needs the tail whole (a stored view must not compact it first).
    expect(tailRequirement('shorten_images,shorten_tools_epoch', both, aggregates)).toEqual({
      toolCalls: 5,
      seqs: [],
    });
    // Alone it keeps every tool item, so it needs the whole history.
    expect(tailRequirement('shorten_images', both, aggregates)).toEqual({ toolCalls: 'all', seqs: [] });
    const list = 'shorten_tools_epoch,shorten_images';
    const view = selectTail(history, tailRequirement(list, both, aggregates));
    expect(view.length).toBeLessThan(history.length / 2);
    expect(JSON.stringify(preparePrompt(view, list, { config: both, aggregates }))).toBe(
      JSON.stringify(preparePrompt(history, list, { config: both })),
    );
  });

  it('keeps every image of the newest input whole, the older pruned as without it, on a tail view too', () => {
    const cfg = config(3, 16);
    // Three screenshots, then one message of 20 photos as the newest turn's input.
    const history = sequenced([
      ...screenshots(3),
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'compare' }, ...imageParts(20, 7)] },
    ]);
    const inputFromSeq = history.at(-1)!.seq;
    const plain = preparePrompt(history, 'shorten_images', { config: cfg });
    const prompt = preparePrompt(history, 'shorten_images', { config: cfg, inputFromSeq });
    // 23 images, 3 + (20 mod 16) = 7 whole: without the input's seq, 16 of its photos are pruned.
    expect(placeholdersIn(plain.items)).toBe(16);
    expect(prompt.items.at(-1)).toBe(history.at(-1));
    // The images before it are pruned as before: every screenshot, the prompt before it unchanged.
    expect(placeholdersIn(prompt.items)).toBe(3);
    expect(JSON.stringify(prompt.items.slice(0, -1))).toBe(JSON.stringify(plain.items.slice(0, -1)));
    // Without a seq in the input (the preview of a session, no input), the prompt is as before.
    expect(preparePrompt(history, 'shorten_images', { config: cfg, inputFromSeq: 99 }).items).toEqual(plain.items);
    const list = 'shorten_tools_epoch,shorten_images';
    const aggregates = computeAggregates(history);
    const view = selectTail(history, tailRequirement(list, cfg, aggregates));
    expect(JSON.stringify(preparePrompt(view, list, { config: cfg, aggregates, inputFromSeq }))).toBe(
      JSON.stringify(preparePrompt(history, list, { config: cfg, inputFromSeq })),
    );
  });

  it("with full_images 0 sends no image at all, the newest input's neither", () => {
    const history = sequenced([
      ...screenshots(2),
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'compare' }, ...imageParts(2, 7)] },
    ]);
    const prompt = preparePrompt(history, 'shorten_images', {
      config: config(0, 1),
      inputFromSeq: history.at(-1)!.seq,
    });
    expect(placeholdersIn(prompt.items)).toBe(4);
  });

  it('counts images before the first call, and needs every call then', () => {
    const history = sequenced([
      { type: 'message', role: 'user', content: imageParts(2, 9) },
      ...screenshots(2).slice(1),
    ]);
    const aggregates = computeAggregates(history);
    expect(aggregates.images).toBe(4);
    expect([1, 2, 3, 4, 5].map((newest) => callsBeforeImage(aggregates, newest))).toEqual([2, 1, 0, 0, 0]);
    expect(shortenImages.tailCalls?.(config(4, 1), aggregates)).toBe(2);
    expect(shortenImages.tailCalls?.(config(0, 1), aggregates)).toBe(0);
  });
});
