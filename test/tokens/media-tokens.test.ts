import { describe, expect, it } from 'vitest';
import type { PromptItem } from '../../lib/items.ts';
import { approximateTokenCounter, countPromptTokens, ITEM_OVERHEAD_TOKENS } from '../../lib/tokens/index.ts';
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
    expect(countPromptTokens(prompt, [], tokenCounterFor('anthropic:claude-sonnet-4-5'))).toBe(text + 1366);
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
});
