import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalArguments } from '../../lib/strategies/aggregates.ts';
import { isCanonicalJson } from '../../lib/strategies/canonical-json.ts';

/** The canonical form as canonicalArguments computes it the whole way: parsed, keys sorted, stringified. */
function wholeWay(text: string): string | null {
  const sort = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(sort);
    if (value === null || typeof value !== 'object') return value;
    const sorted: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) sorted[key] = sort((value as Record<string, unknown>)[key]);
    return sorted;
  };
  try {
    return JSON.stringify(sort(JSON.parse(text)));
  } catch {
    return null;
  }
}

/** Texts near the canonical form: JSON of any value, with keys sorted or not, spaced or not, and cut or spliced. */
const texts = fc.oneof(
  fc.jsonValue().map((value) => JSON.stringify(value)),
  fc.jsonValue().map((value) => wholeWay(JSON.stringify(value)) ?? ''),
  fc.jsonValue().map((value) => JSON.stringify(value, null, 1)),
  fc.tuple(fc.jsonValue(), fc.nat(), fc.nat(), fc.string({ maxLength: 4 })).map(([value, from, length, insert]) => {
    const text = wholeWay(JSON.stringify(value)) ?? '';
    const at = from % (text.length + 1);
    return text.slice(0, at) + insert + text.slice(at + (length % 3));
  }),
  fc
    .dictionary(
      fc.string({ unit: 'binary', maxLength: 6 }),
      fc.oneof(fc.string({ unit: 'binary' }), fc.integer(), fc.double()),
    )
    .map((value) => wholeWay(JSON.stringify(value)) ?? ''),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom(
    '{"path":"src/a.ts"}',
    '{"b":1,"a":2}',
    '{"a":1,"a":2}',
    '{"10":1,"9":2}',
    '{"__proto__":1}',
    '{"a":-0}',
    '{"a":1.5}',
    '{"a":1e3}',
    '{"a":12345678901234567890}',
    '{"a":"\\u0041"}',
    '{"a":"\\/"}',
    '{"a":"\\ud800"}',
    '{"a":"\ud800"}',
    '{"a\\n":1}',
    '{"a":"x\\n\\t\\"\\\\y"}',
    '[1,[2,{"a":[]}],{}]',
    ' {"a":1}',
    '{"a":1}x',
    '[1,]',
    '{"a":1,}',
    '"x"',
    'truex',
    'nul',
  ),
);

describe('isCanonicalJson', () => {
  it('holds only for texts that are their own canonical form, and for the plain ones among them (property)', () => {
    fc.assert(
      fc.property(texts, (text) => {
        if (isCanonicalJson(text)) expect(wholeWay(text)).toBe(text);
      }),
      { numRuns: 5000 },
    );
    for (const text of ['{"path":"src/a.ts"}', '{"a":"x\\n\\t\\"\\\\y","b":[1,-2,true,null,{}]}', '[]', '"x"', '0'])
      expect(isCanonicalJson(text)).toBe(true);
    for (const text of ['{"b":1,"a":2}', '{"a":1,"a":2}', '{"10":1,"9":2}', '{"__proto__":1}', '{"a":-0}', '{"a":1.5}'])
      expect(isCanonicalJson(text)).toBe(false);
  });
});

describe('canonicalArguments', () => {
  it('is what it was before the unparsed check, for any text (property)', () => {
    fc.assert(
      fc.property(texts, (text) => {
        expect(canonicalArguments(text)).toBe(canonicalArgumentsBefore(text));
      }),
      { numRuns: 5000 },
    );
  });

  it('is what it was before the unparsed check: raw text where sorting the keys runs out of stack', () => {
    for (const depth of [10, 100, 1000, 5000, 20000]) {
      for (const text of [
        `${'['.repeat(depth)}1${']'.repeat(depth)}`,
        `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`,
      ]) {
        expect(canonicalArguments(text) === canonicalArgumentsBefore(text), `depth ${depth}`).toBe(true);
      }
    }
  });
});

/** canonicalArguments as it was before texts already canonical were taken unparsed (the reference). */
function canonicalArgumentsBefore(argumentsText: string): string {
  try {
    return JSON.stringify(sortKeysBefore(JSON.parse(argumentsText)));
  } catch {
    return `raw:${argumentsText}`;
  }
}

function sortKeysBefore(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let index = 0; index < value.length; index += 1) {
      const sorted = sortKeysBefore(value[index]);
      if (sorted !== value[index]) {
        copy ??= value.slice();
        copy[index] = sorted;
      }
    }
    return copy ?? value;
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  let inOrder = true;
  for (let index = 0; index < keys.length; index += 1) {
    const key = keys[index]!;
    if (key === '__proto__' || (index > 0 && keys[index - 1]! > key)) {
      inOrder = false;
      break;
    }
  }
  if (inOrder) {
    let copy: Record<string, unknown> | undefined;
    for (const key of keys) {
      const sorted = sortKeysBefore(record[key]);
      if (sorted !== record[key]) {
        copy ??= { ...record };
        copy[key] = sorted;
      }
    }
    return copy ?? record;
  }
  const sorted: Record<string, unknown> = {};
  for (const key of keys.sort()) sorted[key] = sortKeysBefore(record[key]);
  return sorted;
}
