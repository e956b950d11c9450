import { describe, expect, it } from 'vitest';
import { describePart, imagePlaceholder } from '../../lib/content.ts';
import type { PromptItem } from '../../lib/items.ts';
import { ANTHROPIC_MAX_IMAGE_SIDE } from '../../lib/models/anthropic-model.ts';
import { convertToModelMessages } from '../../lib/models/convert-to-model-messages.ts';
import { mediaSupport } from '../../lib/models/media-parts.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import {
  approximateTokenCounter,
  claudeTokenCounter,
  countPromptTokens,
  ITEM_OVERHEAD_TOKENS,
} from '../../lib/tokens/index.ts';
import { MAX_IMAGE_TOKENS, mediaTokens, OPENAI_LOW_DETAIL_TOKENS } from '../../lib/tokens/media-tokens.ts';
import { tokenCounterFor } from '../../lib/tokens/model-limits.ts';

const blob = 'b'.repeat(64);

describe('image and file token estimates', () => {
  it.each([
    { name: 'a 200x150 image', part: { width: 200, height: 150 }, tokens: 40 },
    { name: 'a 1000x1000 image', part: { width: 1000, height: 1000 }, tokens: 1334 },
    { name: 'a 2000x1500 image, over the cap', part: { width: 2000, height: 1500 }, tokens: MAX_IMAGE_TOKENS },
    { name: 'an image of unknown size', part: {}, tokens: MAX_IMAGE_TOKENS },
  ])('count $name by width * height / 750, at most the cap', ({ part, tokens }) => {
    expect(mediaTokens([{ type: 'input_image', blob, media_type: 'image/png', bytes: 1, ...part }])).toBe(tokens);
  });

  it.each([
    // Shortest side 800 -> 768: 1229x768, 3 x 2 tiles.
    { name: 'a 1280x800 screenshot', part: { width: 1280, height: 800 }, tokens: 85 + 170 * 6 },
    // Fits 2048 first (2048x1024), then 1536x768: 3 x 2 tiles.
    { name: 'a 4096x2048 image', part: { width: 4096, height: 2048 }, tokens: 85 + 170 * 6 },
    { name: 'a 200x150 image', part: { width: 200, height: 150 }, tokens: 85 + 170 },
    { name: 'a low-detail image', part: { width: 1280, height: 800, detail: 'low' as const }, tokens: 85 },
    { name: 'an image of unknown size', part: {}, tokens: 85 + 170 * 8 },
  ])("count $name by OpenAI's tiles for an OpenAI model", ({ part, tokens }) => {
    expect(mediaTokens([{ type: 'input_image', blob, media_type: 'image/png', bytes: 1, ...part }], 'openai')).toBe(
      tokens,
    );
    expect(OPENAI_LOW_DETAIL_TOKENS).toBe(85);
  });

  it("count with the rule of the model's provider in a prompt, with or without a tokenizer", () => {
    const image = { type: 'input_image' as const, blob, media_type: 'image/png', bytes: 9, width: 1280, height: 800 };
    const prompt: PromptItem[] = [{ type: 'message', role: 'user', content: [image] }];
    const text = countPromptTokens([{ type: 'message', role: 'user', content: '[image/png 1280x800, 1 KB]' }], [], {
      name: 'approximate',
      count: approximateTokenCounter.count,
    });
    const openai = tokenCounterFor('openai:gpt-4o');
    expect(openai.images).toBe('openai');
    expect(countPromptTokens(prompt, [], openai)).toBe(text + 1105);
    expect(countPromptTokens(prompt, [], tokenCounterFor('openai:gpt-4o', { o200k_base: (t) => t.length }))).toBe(
      ITEM_OVERHEAD_TOKENS + '[image/png 1280x800, 1 KB]'.length + 1105,
    );
    // Claude's text is counted at 3 characters a token (lib/tokens/token-counter.ts).
    const claude = tokenCounterFor('anthropic:claude-sonnet-4-5');
    const claudeText = countPromptTokens(
      [{ type: 'message', role: 'user', content: '[image/png 1280x800, 1 KB]' }],
      [],
      {
        name: 'approximate',
        count: claudeTokenCounter.count,
      },
    );
    expect(countPromptTokens(prompt, [], claude)).toBe(claudeText + 1366);
  });

  it('count a PDF per 100 KB started, and text parts not at all', () => {
    const pdf = (bytes: number) => ({
      type: 'input_file' as const,
      filename: 'a.pdf',
      blob,
      media_type: 'application/pdf',
      bytes,
    });
    expect(mediaTokens([pdf(1)])).toBe(MAX_IMAGE_TOKENS);
    expect(mediaTokens([pdf(250 * 1024)])).toBe(3 * MAX_IMAGE_TOKENS);
    expect(mediaTokens([{ type: 'input_text', text: 'x'.repeat(10_000) }])).toBe(0);
    expect(mediaTokens('text')).toBe(0);
  });

  it('are part of a prompt count, in messages and in tool outputs', () => {
    const image = { type: 'input_image' as const, blob, media_type: 'image/png', bytes: 9, width: 300, height: 250 };
    const prompt: PromptItem[] = [
      { type: 'message', role: 'user', content: [image] },
      { type: 'function_call', call_id: 'c1', name: 'shot', arguments: '{}' },
      { type: 'function_call_output', call_id: 'c1', output: [image] },
    ];
    const withoutImages: PromptItem[] = [
      { type: 'message', role: 'user', content: '[image/png 300x250, 1 KB]' },
      prompt[1]!,
      { type: 'function_call_output', call_id: 'c1', output: '[image/png 300x250, 1 KB]' },
    ];
    const text = countPromptTokens(withoutImages, [], approximateTokenCounter);
    expect(countPromptTokens(prompt, [], approximateTokenCounter)).toBe(text + 2 * 100);
    expect(text).toBeGreaterThan(3 * ITEM_OVERHEAD_TOKENS);
  });

  describe('as the provider receives them', () => {
    const shot = { type: 'input_image' as const, blob, media_type: 'image/png', bytes: 9, width: 1280, height: 800 };
    const loop = (image: typeof shot): PromptItem[] => [
      { type: 'message', role: 'user', content: 'look', seq: 1 },
      { type: 'function_call', call_id: 'c1', name: 'computer', arguments: '{}', seq: 2 },
      { type: 'function_call_output', call_id: 'c1', output: [{ type: 'input_text', text: 'done' }, image], seq: 3 },
    ];
    // What shorten_images leaves of the screenshot: the placeholder the provider gets in its place.
    const pruned = (image: typeof shot): PromptItem[] => [
      ...loop(image).slice(0, 2),
      {
        type: 'function_call_output',
        call_id: 'c1',
        output: [
          { type: 'input_text', text: 'done' },
          { type: 'input_text', text: imagePlaceholder(image, 3) },
        ],
        seq: 3,
      },
    ];
    // What a Chat Completions model takes (a tool result's images after its tool message), and Workers AI (none there).
    const chat = mediaSupport(
      resolveModel('openai-compatible:gpt-4o', {
        OPENAI_COMPATIBLE_BASE_URL: 'http://127.0.0.1:9/v1',
        OPENAI_COMPATIBLE_IMAGES: 'true',
      }),
    );
    const workers = { toolResultMedia: false, fileUrls: false, imageBytesOnly: true, assistantMedia: false };
    const anthropic = { toolResultMedia: true, fileUrls: true, maxImageSide: ANTHROPIC_MAX_IMAGE_SIDE };
    const encoders = { o200k_base: (text: string) => text.length };

    it.each([
      { name: 'an approximate', counter: tokenCounterFor('openai-compatible:local-model', {}, chat) },
      { name: 'a BPE', counter: tokenCounterFor('openai-compatible:gpt-4o', encoders, chat) },
    ])('count a tool-result screenshot on Chat Completions as the image it sends ($name counter)', ({ counter }) => {
      expect(chat.toolResultMedia).toBe('after');
      expect(countPromptTokens(loop(shot), [], counter)).toBeGreaterThan(
        countPromptTokens(pruned(shot), [], counter) + 1000,
      );
    });

    it.each([
      { name: 'an approximate', counter: tokenCounterFor('openai-compatible:local-model', {}, chat) },
      { name: 'a BPE', counter: tokenCounterFor('openai-compatible:gpt-4o', encoders, chat) },
    ])(
      'count with a Chat Completions screenshot its label and the user message after the tool message ($name counter)',
      ({ counter }) => {
        // What the model is sent (lib/models/tool-media.ts): the tool message with the image's
        // placeholder, then a user message of its label and the image.
        const read = { ...shot, data: new Uint8Array([1, 2, 3]) };
        const wire = JSON.stringify(convertToModelMessages(loop(read), { toolResultMedia: 'after', fileUrls: false }));
        const placeholder = '[image 1: in the message after the tool results]';
        const label = 'Image 1 of tool call c1:';
        expect(wire).toContain(JSON.stringify(`done\n${placeholder}`));
        expect(wire).toContain(
          `{"role":"user","content":[{"type":"text","text":${JSON.stringify(label)}},{"type":"file"`,
        );
        const sent: PromptItem[] = [
          ...loop(shot).slice(0, 2),
          { type: 'function_call_output', call_id: 'c1', output: `done\n${placeholder}`, seq: 3 },
          { type: 'message', role: 'user', content: label },
        ];
        const image = mediaTokens([shot], counter.images);
        expect(countPromptTokens(loop(shot), [], counter)).toBe(countPromptTokens(sent, [], counter) + image);
        // Against the prompt without the screenshot (its placeholder in its place): the image, its
        // label and the user message's overhead more, the tool message's text as sent.
        const toolText = (text: string) => counter.count(`done\n${text}`);
        expect(countPromptTokens(loop(shot), [], counter) - countPromptTokens(pruned(shot), [], counter)).toBe(
          image +
            ITEM_OVERHEAD_TOKENS +
            counter.count(label) +
            toolText(placeholder) -
            toolText(imagePlaceholder(shot, 3)),
        );
      },
    );

    it.each([
      {
        name: 'an approximate',
        counter: tokenCounterFor('workers-ai:@cf/meta/llama-3.2-11b-vision-instruct', {}, workers),
      },
      { name: 'a BPE', counter: tokenCounterFor('openai-compatible:gpt-4o', encoders, workers) },
    ])(
      'count a tool-result screenshot where the model takes none there as its placeholder ($name counter)',
      ({ counter }) => {
        expect(countPromptTokens(loop(shot), [], counter)).toBe(countPromptTokens(pruned(shot), [], counter));
        expect(countPromptTokens(loop(shot), [], counter)).toBeLessThan(100);
        // Counted again (the counts of unchanging items are kept): the same.
        expect(countPromptTokens(loop(shot), [], counter)).toBe(countPromptTokens(pruned(shot), [], counter));
      },
    );

    it('count a tool output sent as user text (answered after other items) by its images', () => {
      const counter = tokenCounterFor('openai-compatible:gpt-4o', encoders, workers);
      const [, call, output] = loop(shot);
      const late: PromptItem[] = [call!, { type: 'message', role: 'user', content: 'wait', seq: 4 }, output!];
      const tokens = countPromptTokens(late, [], counter);
      expect(tokens).toBeGreaterThan(countPromptTokens([call!, late[1]!, pruned(shot)[2]!], [], counter) + 1000);
    });

    it("count an Anthropic model's screenshot by its tokens, one over 8000 pixels a side as its placeholder", () => {
      const counter = tokenCounterFor('anthropic:claude-sonnet-4-5', {}, anthropic);
      const described: PromptItem[] = [
        ...loop(shot).slice(0, 2),
        { type: 'function_call_output', call_id: 'c1', output: `done\n${describePart(shot)}`, seq: 3 },
      ];
      expect(countPromptTokens(loop(shot), [], counter)).toBe(countPromptTokens(described, [], counter) + 1366);
      const page = { ...shot, height: 9000 };
      expect(countPromptTokens(loop(page), [], counter)).toBe(countPromptTokens(pruned(page), [], counter));
    });

    it("count an assistant message's image as its placeholder where the model takes none there", () => {
      const reply: PromptItem[] = [{ type: 'message', role: 'assistant', content: [shot], seq: 5 }];
      const text: PromptItem[] = [{ type: 'message', role: 'assistant', content: imagePlaceholder(shot, 5), seq: 5 }];
      const counter = tokenCounterFor('anthropic:claude-sonnet-4-5', {}, anthropic);
      expect(countPromptTokens(reply, [], counter)).toBe(countPromptTokens(text, [], counter));
    });
  });
});
