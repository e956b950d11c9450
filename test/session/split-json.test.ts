import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseInRuns, parseJsonBytes } from '../../lib/session/split-json.ts';

const encoder = new TextEncoder();

/** What parsing gives: the value as JSON (its keys in order) and the value, or the error's message. */
function outcome(parse: () => unknown): unknown {
  try {
    const value = parse();
    return { json: JSON.stringify(value), value };
  } catch (error) {
    return { error: `${(error as Error).name}: ${(error as Error).message}` };
  }
}

function wholeParse(bytes: Uint8Array): unknown {
  return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
}

/** Strings that look like the cuts and keys the split looks for, escapes, and characters beyond ASCII. */
const trickyText = fc.oneof(
  fc.constantFrom('},{', '}]', '"items":[', '\\', '"', '},{"type":"x"}', 'é', '😀', '\u2028', '\u0000', '\ud800', ''),
  fc.string({ maxLength: 8, unit: 'grapheme' }),
  fc.string({ maxLength: 4, unit: 'binary' }),
);
const trickyValue = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    trickyText,
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.constantFrom(null, true, false),
    fc.array(tie('value'), { maxLength: 3 }),
    fc.array(fc.record({ type: trickyText, text: tie('value') }), { maxLength: 3 }),
    fc.dictionary(trickyText, tie('value'), { maxKeys: 3 }),
  ),
})).value;
/** An element of the big array: an object, whose values hold nested objects in arrays (`},{` inside it) at times. */
const element = fc.oneof(
  fc.record({ type: trickyText, content: trickyValue }),
  fc.dictionary(trickyText, trickyValue, { maxKeys: 4 }),
);
/** A view-like body: other fields around `tail.items` (some named `items` too), before and after it. */
const viewLike = fc
  .record({
    before: fc.dictionary(trickyText, trickyValue, { maxKeys: 3 }),
    items: fc.array(element, { maxLength: 12 }),
    tailAfter: fc.option(fc.record({ chunk: trickyValue, drop: fc.array(fc.nat(), { maxLength: 3 }) })),
    after: fc.dictionary(trickyText, trickyValue, { maxKeys: 2 }),
    nested: fc.option(fc.record({ items: fc.array(element, { maxLength: 2 }) })),
  })
  .map(({ before, items, tailAfter, after, nested }) => ({
    ...before,
    ...(nested ? { aggregates: nested } : {}),
    tail: { from_seq: 1, items, ...(tailAfter ?? {}) },
    ...after,
  }));
const runBytes = fc.integer({ min: 1, max: 64 });

describe('parseJsonBytes', () => {
  it('gives what JSON.parse gives any view-like body, cut in runs of any size (property)', () => {
    fc.assert(
      fc.property(viewLike, runBytes, (value, run) => {
        const bytes = encoder.encode(JSON.stringify(value));
        const expected = wholeParse(bytes);
        const actual = parseJsonBytes(bytes, ['tail', 'items'], run);
        expect(JSON.stringify(actual)).toBe(JSON.stringify(expected));
        expect(actual).toStrictEqual(expected);
      }),
      { numRuns: 400 },
    );
  });

  it('gives what JSON.parse gives any JSON value at any path, the same value or the same error (property)', () => {
    const path = fc.constantFrom(['items'], ['tail', 'items'], ['a', 'b', 'items'], ['x"items']);
    fc.assert(
      fc.property(fc.oneof(trickyValue, viewLike, fc.jsonValue()), path, runBytes, (value, at, run) => {
        const bytes = encoder.encode(JSON.stringify(value) ?? 'null');
        expect(outcome(() => parseJsonBytes(bytes, at, run))).toStrictEqual(outcome(() => wholeParse(bytes)));
      }),
      { numRuns: 300 },
    );
  });

  it('gives JSON.parse error for a view-like body cut short, changed or not UTF-8 (property)', () => {
    const damage = fc.record({
      at: fc.nat(),
      cut: fc.nat({ max: 4 }),
      insert: fc.constantFrom('', ']', '}', ',', '{', '"', '\\', '},{', '},{"', 'x', '\ufeff', '\xff'),
    });
    fc.assert(
      fc.property(viewLike, runBytes, damage, (value, run, { at, cut, insert }) => {
        const text = JSON.stringify(value);
        const place = at % (text.length + 1);
        const bytes = encoder.encode(text.slice(0, place) + insert + text.slice(place + cut));
        if (insert === '\xff') bytes[place] = 0xff;
        expect(outcome(() => parseJsonBytes(bytes, ['tail', 'items'], run))).toStrictEqual(
          outcome(() => wholeParse(bytes)),
        );
      }),
      { numRuns: 400 },
    );
  });

  it('parses a large view in runs, its elements holding `},{` in strings and nested arrays, as JSON.parse does', () => {
    const items = Array.from({ length: 3_000 }, (_, index) =>
      index % 3 === 0
        ? { type: 'message', content: [{ type: 'input_text', text: `a},{"b":${index}}]` }, { type: 'x' }] }
        : { type: 'function_call_output', call_id: `c${index}`, output: `line},{\\"${index}é😀`.repeat(20) },
    );
    const view = { format: 'view', tail: { from_seq: 1, items }, z: { items: [{ a: 1 }, { b: '}]' }] } };
    const bytes = encoder.encode(JSON.stringify(view));
    expect(bytes.length).toBeGreaterThan(2 * 48 * 1024);
    const inRuns = parseInRuns(bytes, ['tail', 'items'], 48 * 1024);
    expect(inRuns).toStrictEqual(view);
    expect(JSON.stringify(inRuns)).toBe(JSON.stringify(view));
    expect(parseJsonBytes(bytes, ['tail', 'items'])).toStrictEqual(view);
    // A chunk: its items at the top.
    const chunk = encoder.encode(JSON.stringify({ format: 'chunk', record: 3, items }));
    expect(parseInRuns(chunk, ['items'], 48 * 1024)).toStrictEqual({ format: 'chunk', record: 3, items });
  });

  it('parses runs longer than its run buffer (an element larger than two runs) and runs after them', () => {
    const items = Array.from({ length: 40 }, (_, index) => ({
      type: 'function_call_output',
      call_id: `c${index}`,
      output: index % 10 === 3 ? `big},{"${index}é`.repeat(20_000) : `small ${index}`.repeat(100),
    }));
    const view = { format: 'view', tail: { from_seq: 1, items }, created_at: 'now' };
    const bytes = encoder.encode(JSON.stringify(view));
    expect(bytes.length).toBeGreaterThan(4 * 2 * 48 * 1024);
    for (let round = 0; round < 2; round++) {
      expect(parseInRuns(bytes, ['tail', 'items'], 48 * 1024)).toStrictEqual(view);
      expect(parseInRuns(bytes, ['tail', 'items'], 1024)).toStrictEqual(view);
    }
  });

  it('leaves to the whole parse a body with no array of objects at its path, or the array elsewhere', () => {
    const items = Array.from({ length: 50 }, (_, index) => ({ n: index }));
    const elsewhere = encoder.encode(JSON.stringify({ other: { items }, tail: { items: 'x' } }));
    expect(parseInRuns(elsewhere, ['tail', 'items'], 16)).toBeUndefined();
    expect(parseJsonBytes(elsewhere, ['tail', 'items'], 16)).toStrictEqual(wholeParse(elsewhere));
    const numbers = encoder.encode(JSON.stringify({ items: items.map(({ n }) => n) }));
    expect(parseInRuns(numbers, ['items'], 16)).toBeUndefined();
    const cut = encoder.encode(JSON.stringify({ tail: { items } }).slice(0, -3));
    expect(parseInRuns(cut, ['tail', 'items'], 16)).toBeUndefined();
    expect(() => parseJsonBytes(cut, ['tail', 'items'], 16)).toThrow(SyntaxError);
    // A byte order mark is no whitespace inside JSON, though a decoder drops one opening its text.
    const marked = encoder.encode(JSON.stringify({ tail: { items } }).replace(/\]/, ']\ufeff'));
    expect(() => wholeParse(marked)).toThrow(SyntaxError);
    expect(() => parseJsonBytes(marked, ['tail', 'items'], 16)).toThrow(SyntaxError);
    // Nor between two items, where a run cut exactly (after a cut inside an item) begins.
    const nested = JSON.stringify({ c: [{ a: 'x'.repeat(40) }, { b: 1 }] });
    const plain = JSON.stringify({ d: 'y'.repeat(40) });
    const between = encoder.encode(`{"items":[${nested},${plain},\ufeff${plain},${plain}]}`);
    expect(() => wholeParse(between)).toThrow(SyntaxError);
    expect(parseInRuns(between, ['items'], 30)).toBeUndefined();
    expect(() => parseJsonBytes(between, ['items'], 30)).toThrow(SyntaxError);
  });
});
