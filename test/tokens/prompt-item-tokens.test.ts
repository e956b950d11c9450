import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ContentPart } from '../../lib/content.ts';
import type { PromptItem } from '../../lib/items.ts';
import type { ImageTokenRule } from '../../lib/tokens/media-tokens.ts';
import { adjacentAnswers } from '../../lib/models/convert-to-model-messages.ts';
import { loopReasoning } from '../../lib/models/reasoning-parts.ts';
import {
  approximateTokenCounter,
  countItemTokens,
  promptItemTokens,
  reasoningTokens,
  type TokenCounter,
} from '../../lib/tokens/token-counter.ts';

/**
 * promptItemTokens counts a prompt in one loop: each item as countItemTokens counts it alone,
 * told whether a tool output goes as a tool result (`adjacentAnswers`), plus the reasoning the
 * current tool loop sends with it (`loopReasoning`).
 */
function oneByOne(prompt: readonly PromptItem[], counter: TokenCounter): number[] {
  const sent = loopReasoning(prompt);
  return prompt.map(
    (item, index) =>
      countItemTokens(item, counter, () => adjacentAnswers(prompt).has(index)) +
      reasoningTokens(sent.get(index), counter),
  );
}

const parts = fc.array(
  fc.oneof(
    fc.string({ maxLength: 40 }).map((text): ContentPart => ({ type: 'input_text', text })),
    fc.constant<ContentPart>({ type: 'input_image', image_url: 'https://example.com/shot.png' }),
    fc.constant<ContentPart>({ type: 'input_file', file_url: 'https://example.com/report.pdf' }),
  ),
  { minLength: 1, maxLength: 3 },
);
const content = fc.oneof(fc.string({ maxLength: 60 }), parts);
const reasoning = fc.option(
  fc.array(
    fc.record({
      type: fc.constant('reasoning' as const),
      summary: fc.array(fc.record({ type: fc.constant('summary_text' as const), text: fc.string({ maxLength: 30 }) }), {
        maxLength: 2,
      }),
      encrypted_content: fc.option(fc.string({ maxLength: 30 }), { nil: undefined }),
    }),
    { minLength: 1, maxLength: 2 },
  ),
  { nil: undefined },
);
const call = fc.constantFrom('a', 'b', 'c');
const item: fc.Arbitrary<PromptItem> = fc.oneof(
  fc
    .record({
      role: fc.constantFrom<'system' | 'user' | 'assistant'>('system', 'user', 'assistant'),
      content,
      reasoning,
    })
    .map(({ role, content, reasoning }) => ({
      type: 'message' as const,
      role,
      content,
      ...(reasoning && role === 'assistant' ? { reasoning } : {}),
    })),
  fc
    .record({ call_id: call, arguments: fc.string({ maxLength: 40 }), reasoning })
    .map(({ call_id, reasoning, ...rest }) => ({
      type: 'function_call' as const,
      call_id,
      name: 'computer',
      ...rest,
      ...(reasoning ? { reasoning } : {}),
    })),
  fc.record({ call_id: call, output: content }).map((fields) => ({ type: 'function_call_output' as const, ...fields })),
);
const counter: fc.Arbitrary<TokenCounter> = fc.oneof(
  fc.constant(approximateTokenCounter),
  fc
    .record({ toolResultMedia: fc.boolean(), fileUrls: fc.boolean(), images: fc.constantFrom('anthropic', 'openai') })
    .map(({ images, ...media }) => ({
      ...approximateTokenCounter,
      images: images as ImageTokenRule,
      media: { ...media, imageBytesOnly: false, assistantMedia: false },
    })),
  // A counter of its own function: its counts of unchanging items are kept.
  fc.constant<TokenCounter>({ name: 'words', count: (text) => text.split(' ').length }),
);

describe('promptItemTokens', () => {
  it('counts each item as countItemTokens does alone, with the reasoning sent with it', () => {
    fc.assert(
      fc.property(fc.array(item, { maxLength: 12 }), counter, (prompt, counter) => {
        expect(promptItemTokens(prompt, counter)).toEqual(oneByOne(prompt, counter));
      }),
      { numRuns: 500 },
    );
  });
});
