import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BPE_RUN_CHARS, bpeTokenEncoders, countInPieces } from '../../functions/token-encoders.ts';
import { deepFreeze } from '../../lib/deep-readonly.ts';
import type { PromptItem } from '../../lib/items.ts';
import {
  approximateTokenCounter,
  countItemTokens,
  countPromptTokens,
  FALLBACK_CONTEXT_LIMIT,
  ITEM_OVERHEAD_TOKENS,
  modelFamily,
  resolveTokenBudget,
  tokenCounterFor,
} from '../../lib/tokens/index.ts';

const defaults = { context_limit: 0, response_reserve: 0 };

describe('token counting', () => {
  it.each([
    ['openai:gpt-4o', 'o200k_base', 128_000],
    ['openai:gpt-4.1-mini', 'o200k_base', 1_047_576],
    ['openai:o3-mini', 'o200k_base', 200_000],
    ['openai:gpt-4', 'cl100k_base', 8_192],
    ['openai:gpt-3.5-turbo', 'cl100k_base', 16_385],
    ['anthropic:claude-sonnet-4-5', 'approximate', 200_000],
    ['openai-compatible:llama-3', 'approximate', FALLBACK_CONTEXT_LIMIT],
  ])('%s counts with %s and has a window of %i tokens', (model, counter, limit) => {
    const budget = resolveTokenBudget(model, defaults, { encoders: bpeTokenEncoders });
    expect(budget.counter.name).toBe(counter);
    expect(budget.contextLimit).toBe(limit);
    expect(budget.promptLimit).toBe(limit - budget.responseReserve);
  });

  it('echo has no window unless one is configured', () => {
    expect(resolveTokenBudget('echo', defaults).promptLimit).toBe(Number.POSITIVE_INFINITY);
    expect(resolveTokenBudget('echo', { context_limit: 1000, response_reserve: 100 }).promptLimit).toBe(900);
  });

  it('the configured limit and reserve win over the family; max_output_tokens raises the reserve', () => {
    const budget = resolveTokenBudget(
      'openai:gpt-4o',
      { context_limit: 5000, response_reserve: 500 },
      { maxOutputTokens: 800 },
    );
    expect(budget).toMatchObject({ contextLimit: 5000, responseReserve: 800, promptLimit: 4200 });
  });

  it("a set context_limit takes a family's default reserve down to a quarter of it, as an unknown model's", () => {
    const claude = resolveTokenBudget('anthropic:claude-sonnet-4-5', { context_limit: 12000, response_reserve: 0 });
    expect(claude).toMatchObject({ responseReserve: 3000, promptLimit: 9000 });
    expect(resolveTokenBudget('openai:gpt-5', { context_limit: 12000, response_reserve: 0 }).responseReserve).toBe(
      3000,
    );
    // A window the reserve fits a quarter of keeps it; one set with it is kept as set.
    expect(
      resolveTokenBudget('anthropic:claude-sonnet-4-5', { context_limit: 100000, response_reserve: 0 }).responseReserve,
    ).toBe(16384);
    expect(
      resolveTokenBudget('anthropic:claude-sonnet-4-5', { context_limit: 12000, response_reserve: 6000 })
        .responseReserve,
    ).toBe(6000);
    const unknown = resolveTokenBudget('openai-compatible:llama3.2', { context_limit: 12000, response_reserve: 0 });
    expect(unknown.responseReserve).toBe(3000);
    expect(
      resolveTokenBudget('openai-compatible:llama3.2', { context_limit: 0, response_reserve: 0 }).responseReserve,
    ).toBe(4096);
  });

  it('without encoders (the Workers bundle) every model is approximated', () => {
    expect(tokenCounterFor('openai:gpt-4o').name).toBe('approximate');
    expect(modelFamily('workers-ai:@cf/meta/llama-3.1-8b-instruct')).toBeNull();
  });

  it('the real tokenizers count known texts exactly', () => {
    expect(bpeTokenEncoders.o200k_base!('hello world')).toBe(2);
    expect(bpeTokenEncoders.cl100k_base!('hello world')).toBe(2);
    expect(bpeTokenEncoders.o200k_base!('<|endoftext|>')).toBeGreaterThan(1);
  });

  it('the BPE counter is given long runs of one kind of character in pieces, other text whole', () => {
    // gpt-tokenizer's BPE takes time quadratic in such a run: a 60,000-character tool output of
    // base64 or one repeated character would cost seconds of CPU a turn counted whole.
    const given: string[] = [];
    const recording = (text: string) => {
      given.push(text);
      return bpeTokenEncoders.o200k_base!(text);
    };
    const prose = 'The quick brown fox jumps over the lazy dog. '.repeat(2000);
    expect(countInPieces(recording, prose)).toBe(bpeTokenEncoders.o200k_base!(prose));
    expect(given).toEqual([prose]);
    for (const run of ['x'.repeat(60_000), ' '.repeat(60_000), 'A/b+'.repeat(15_000), '\u{1F600}'.repeat(30_000)]) {
      given.length = 0;
      const text = `before ${run} after`;
      const counted = countInPieces(recording, text);
      expect(Math.max(...given.map((piece) => piece.length))).toBeLessThanOrEqual(BPE_RUN_CHARS + 'before '.length);
      expect(given.join('')).toBe(text);
      expect(counted).toBeGreaterThan(0);
    }
    // Eight x's a token whole, and so in pieces of 256.
    expect(bpeTokenEncoders.o200k_base!('x'.repeat(60_000))).toBe(7500);
  });

  it('the approximation is ceil(chars / 4) and a prompt adds a fixed overhead per item', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ maxLength: 200 }), { maxLength: 20 }), (texts) => {
        const prompt: PromptItem[] = texts.map((content) => ({ type: 'message', role: 'user', content }));
        const expected = texts.reduce((sum, text) => sum + ITEM_OVERHEAD_TOKENS + Math.ceil(text.length / 4), 0);
        expect(countPromptTokens(prompt, [], approximateTokenCounter)).toBe(expected);
      }),
      { numRuns: 100 },
    );
  });

  it("Claude's estimate does not undercount: over 3.5 characters a token, where the text is not at hand too", () => {
    // Claude's tokenizers take about 3.5 characters a token of English, fewer of code and JSON.
    const prose = 'The quick brown fox jumps over the lazy dog while the session keeps its history. '.repeat(50);
    const code = JSON.stringify({ items: Array.from({ length: 100 }, (_, n) => ({ id: n, ok: n % 2 === 0 })) });
    const outputRef = { sha256: 'a'.repeat(64), md5: 'b'.repeat(32), length: 35_000, head: 'head', tail: 'tail' };
    const referenced: PromptItem = { type: 'function_call_output', call_id: 'c', output: '', output_ref: outputRef };
    for (const counter of [
      tokenCounterFor('anthropic:claude-sonnet-4-5'),
      tokenCounterFor('anthropic:claude-opus-4-1', {}, { toolResultMedia: true, fileUrls: true }),
      resolveTokenBudget('anthropic:claude-haiku-4-5', defaults, { encoders: bpeTokenEncoders }).counter,
    ]) {
      for (const text of [prose, code]) expect(counter.count(text)).toBeGreaterThan(text.length / 3.5);
      expect(countItemTokens(referenced, counter)).toBeGreaterThan(outputRef.length / 3.5);
    }
    // Other models without a tokenizer keep the approximation.
    expect(tokenCounterFor('openai-compatible:llama-3').count(prose)).toBe(approximateTokenCounter.count(prose));
  });

  it('the approximation stays within a factor of two of o200k on English prose', () => {
    const text = 'The quick brown fox jumps over the lazy dog while the session keeps its history. '.repeat(50);
    const real = bpeTokenEncoders.o200k_base!(text);
    const approximate = approximateTokenCounter.count(text);
    expect(approximate / real).toBeGreaterThan(0.5);
    expect(approximate / real).toBeLessThan(2);
  });
});

describe('counts kept for unchanging items', () => {
  /** A counter that counts characters, and how often it was asked. */
  const counting = () => {
    const calls: string[] = [];
    const count = (text: string) => {
      calls.push(text);
      return text.length;
    };
    return { calls, count, counter: (images?: 'openai') => ({ name: 'test', count, ...(images ? { images } : {}) }) };
  };
  const frozen = (item: PromptItem) => deepFreeze(item) as PromptItem;

  it('counts a frozen item once per counting function and image rule, whatever counter object carries them', () => {
    const { calls, counter } = counting();
    const item = frozen({ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hello world' }] });
    const first = countItemTokens(item, counter());
    // A turn makes its counter anew: the same function keeps the count.
    expect(countItemTokens(item, counter())).toBe(first);
    expect(first).toBe(ITEM_OVERHEAD_TOKENS + 'hello world'.length);
    expect(calls).toHaveLength(1);
    expect(countItemTokens(item, counter('openai'))).toBe(first);
    expect(calls).toHaveLength(2);
    const other = counting();
    expect(countItemTokens(item, other.counter())).toBe(first);
    expect(other.calls).toHaveLength(1);
  });

  it('counts again what may change: an item not frozen, or frozen with parts that are not', () => {
    const { calls, counter } = counting();
    const item: PromptItem = { type: 'message', role: 'user', content: 'one' };
    expect(countItemTokens(item, counter())).toBe(ITEM_OVERHEAD_TOKENS + 3);
    item.content = 'three';
    expect(countItemTokens(item, counter())).toBe(ITEM_OVERHEAD_TOKENS + 5);
    const parts = [{ type: 'input_text' as const, text: 'ab' }];
    const shallow = Object.freeze({ type: 'message', role: 'user', content: parts }) as PromptItem;
    expect(countItemTokens(shallow, counter())).toBe(ITEM_OVERHEAD_TOKENS + 2);
    parts[0]!.text = 'abcd';
    expect(countItemTokens(shallow, counter())).toBe(ITEM_OVERHEAD_TOKENS + 4);
    const referenced = Object.freeze({
      type: 'function_call_output',
      call_id: 'c',
      output: '',
      output_ref: { sha256: 'a'.repeat(64), length: 4000, head: 'head' },
    }) as PromptItem;
    const before = countItemTokens(referenced, counter());
    (referenced as { output_ref: { length: number } }).output_ref.length = 8000;
    expect(countItemTokens(referenced, counter())).toBe(before + 1000);
    expect(calls).toHaveLength(4);
  });
});
