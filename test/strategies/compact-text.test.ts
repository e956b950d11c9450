import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { md5Hex } from '../../lib/hash.ts';
import type { PromptFunctionCallItem, PromptFunctionCallOutputItem } from '../../lib/items.ts';
import {
  ARGUMENT_LIMIT,
  COMPACTED_OVERHEAD,
  OUTPUT_LIMIT,
  compactCallItem,
  compactOutputItem,
  compactText,
  previewOf,
} from '../../lib/strategies/compact-text.ts';
import { deepFreeze } from './history-fixtures.ts';

describe('compactText', () => {
  it.each([
    ['an empty text', '', 400],
    ['a text at the limit', 'x'.repeat(400), 400],
    ['a short argument', 'y'.repeat(200), 200],
  ])('keeps %s as it is (null)', (_label, text, limit) => {
    expect(compactText(text, limit)).toBeNull();
  });

  it('states the length, the first 5 hex of the MD5, head and tail, and warns not to reuse it', () => {
    const text = `HEAD${'m'.repeat(5000)}TAIL`;
    const compacted = compactText(text, OUTPUT_LIMIT)!;
    expect(compacted).toContain(`${text.length} chars`);
    expect(compacted).toContain(`md5 ${md5Hex(text).slice(0, 5)}`);
    expect(compacted).toMatch(/not the real content; do not reuse it as-is/);
    expect(compacted.startsWith('[compacted:')).toBe(true);
    expect(compacted).toContain('\nHEAD');
    expect(compacted.endsWith('TAIL')).toBe(true);
    expect(compacted.length).toBeLessThan(text.length);
  });

  it('stays within the limit plus the fixed overhead, for any over-limit text and limit', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 1200, unit: 'binary' }),
        fc.integer({ min: 0, max: 600 }),
        (text, limit) => {
          const compacted = compactText(text, limit);
          if (text.length <= limit) return compacted === null;
          return compacted !== null && compacted.length <= limit + COMPACTED_OVERHEAD;
        },
      ),
      { numRuns: 200 },
    );
  });

  it('gives the same bytes from the full text and from its preview ref', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 0, maxLength: 3000, unit: 'binary' }),
        fc.constantFrom(ARGUMENT_LIMIT, OUTPUT_LIMIT),
        (text, limit) => {
          expect(compactText(previewOf(text), limit)).toBe(compactText(text, limit));
        },
      ),
      { numRuns: 200 },
    );
  });

  it('never splits a surrogate pair', () => {
    const text = '😀'.repeat(400);
    const compacted = compactText(text, OUTPUT_LIMIT)!;
    expect(compacted).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/);
  });
});

describe('compactOutputItem', () => {
  const long = 'r'.repeat(OUTPUT_LIMIT + 1);

  it('keeps an output at or under 400 characters byte-identical (same object)', () => {
    const item: PromptFunctionCallOutputItem = deepFreeze({
      type: 'function_call_output',
      call_id: 'c',
      output: 'r'.repeat(OUTPUT_LIMIT),
    });
    expect(compactOutputItem(item)).toBe(item);
  });

  it('compacts a longer one into a new item marked compacted', () => {
    const item: PromptFunctionCallOutputItem = deepFreeze({
      type: 'function_call_output',
      call_id: 'c',
      output: long,
      seq: 4,
    });
    const compacted = compactOutputItem(item);
    expect(compacted).toEqual({
      type: 'function_call_output',
      call_id: 'c',
      seq: 4,
      output: compactText(long, OUTPUT_LIMIT),
      compacted: true,
    });
    expect(item.output).toBe(long);
  });

  it('gives identical JSON for an inline output and an out-of-line one, dropping output_ref', () => {
    const inline: PromptFunctionCallOutputItem = { type: 'function_call_output', call_id: 'c', output: long, seq: 2 };
    const outOfLine: PromptFunctionCallOutputItem = {
      type: 'function_call_output',
      call_id: 'c',
      output: '',
      output_ref: previewOf(long),
      seq: 2,
    };
    expect(JSON.stringify(compactOutputItem(outOfLine))).toBe(JSON.stringify(compactOutputItem(inline)));
    expect('output_ref' in compactOutputItem(outOfLine)).toBe(false);
  });

  it('keeps a short out-of-line output whole, with its ref', () => {
    const item: PromptFunctionCallOutputItem = {
      type: 'function_call_output',
      call_id: 'c',
      output: '',
      output_ref: previewOf('short'),
    };
    expect(compactOutputItem(item)).toBe(item);
  });
});

describe('compactCallItem', () => {
  const call = (argumentsText: string): PromptFunctionCallItem =>
    deepFreeze({ type: 'function_call', call_id: 'c', name: 'tool', arguments: argumentsText });
  const long = 'a'.repeat(ARGUMENT_LIMIT + 50);

  it.each([
    ['short arguments', JSON.stringify({ path: 'x' })],
    ['a long text made of short values', JSON.stringify({ a: 'a'.repeat(150), b: 'b'.repeat(150) })],
    ['a value exactly at the limit', JSON.stringify({ a: 'a'.repeat(ARGUMENT_LIMIT) })],
    ['long keys only', JSON.stringify({ ['k'.repeat(300)]: 1 })],
  ])('keeps %s byte-identical', (_label, argumentsText) => {
    const item = call(argumentsText);
    expect(compactCallItem(item)).toBe(item);
  });

  it('compacts each long string value, recursively, and keeps the rest', () => {
    const value = { path: 'src/a.ts', content: long, nested: { list: [long, 3, 'short'] } };
    const compacted = compactCallItem(call(JSON.stringify(value)));
    expect(compacted.compacted).toBe(true);
    expect(JSON.parse(compacted.arguments)).toEqual({
      path: 'src/a.ts',
      content: compactText(long, ARGUMENT_LIMIT),
      nested: { list: [compactText(long, ARGUMENT_LIMIT), 3, 'short'] },
    });
  });

  it.each([
    ['unparseable arguments', `{oops ${long}`],
    ['a bare JSON string', JSON.stringify(long)],
  ])('handles %s as one string value', (_label, argumentsText) => {
    const compacted = compactCallItem(call(argumentsText));
    expect(compacted.compacted).toBe(true);
    const expected = argumentsText.startsWith('"')
      ? JSON.stringify(compactText(long, ARGUMENT_LIMIT))
      : compactText(argumentsText, ARGUMENT_LIMIT);
    expect(compacted.arguments).toBe(expected);
  });

  it('keeps a __proto__ key as a plain key', () => {
    const argumentsText = `{"__proto__":{"x":"${long}"}}`;
    const compacted = compactCallItem(call(argumentsText));
    expect(Object.keys(JSON.parse(compacted.arguments))).toEqual(['__proto__']);
  });
});

describe('compactCallItem of deeply nested arguments', () => {
  it('compacts arguments nested deeper than the stack goes as one text, and those 256 deep value by value', () => {
    const call = (text: string): PromptFunctionCallItem => ({
      type: 'function_call',
      call_id: 'c',
      name: 'f',
      arguments: text,
    });
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    expect(compactCallItem(call(deep)).arguments).toBe(compactText(deep, ARGUMENT_LIMIT));
    const long = 'x'.repeat(ARGUMENT_LIMIT + 1);
    const nested = `${'['.repeat(255)}[${JSON.stringify(long)}]${']'.repeat(255)}`;
    const compacted = `${'['.repeat(255)}[${JSON.stringify(compactText(long, ARGUMENT_LIMIT))}]${']'.repeat(255)}`;
    expect(compactCallItem(call(nested)).arguments).toBe(compacted);
  });
});
