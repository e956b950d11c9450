import { describe, expect, it } from 'vitest';
import type { PromptItem } from '../../lib/items.ts';
import {
  approximateTokenCounter,
  countPromptTokens,
  ITEM_OVERHEAD_TOKENS,
  tokenCounterFor,
} from '../../lib/tokens/index.ts';
import { LOW_DETAIL_IMAGE_TOKENS, MAX_IMAGE_TOKENS, mediaTokens } from '../../lib/tokens/media-tokens.ts';

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

  describe('an image with detail: low', () => {
    const low = (part: object) => ({ type: 'input_image' as const, blob, media_type: 'image/png', bytes: 1, ...part });
    const prompt = (detail: 'low' | 'high' | 'auto'): PromptItem[] => [
      { type: 'message', role: 'user', content: [low({ width: 1000, height: 1000, detail })] },
      { type: 'function_call', call_id: 'c1', name: 'shot', arguments: '{}' },
      { type: 'function_call_output', call_id: 'c1', output: [low({ detail })] },
    ];

    it('counts 85 tokens flat for an OpenAI model, whatever its size, in messages and tool outputs', () => {
      const counter = tokenCounterFor('openai:gpt-4.1-mini');
      const text = countPromptTokens(prompt('high'), [], counter) - 1334 - MAX_IMAGE_TOKENS;
      expect(LOW_DETAIL_IMAGE_TOKENS).toBe(85);
      expect(countPromptTokens(prompt('low'), [], counter)).toBe(text + 2 * LOW_DETAIL_IMAGE_TOKENS);
      expect(mediaTokens([low({ width: 4000, height: 3000, detail: 'low' })], counter)).toBe(85);
    });

    it.each(['anthropic:claude-sonnet-4-5', 'openai-compatible:some-model', 'echo'])(
      'counts by the size for %s, whose provider has no detail rule',
      (model) => {
        const counter = tokenCounterFor(model);
        expect(countPromptTokens(prompt('low'), [], counter)).toBe(countPromptTokens(prompt('high'), [], counter));
        expect(mediaTokens([low({ width: 1000, height: 1000, detail: 'low' })], counter)).toBe(1334);
      },
    );

    it.each(['high' as const, 'auto' as const])('detail %s counts by the size for OpenAI too', (detail) => {
      const counter = tokenCounterFor('openai:gpt-4o');
      expect(mediaTokens([low({ width: 1000, height: 1000, detail })], counter)).toBe(1334);
    });
  });
});
