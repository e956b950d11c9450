import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalArguments } from '../../lib/strategies/aggregates.ts';
import { argumentsFingerprint, indexHistory } from '../../lib/strategies/history-index.ts';
import { call, output, sequenced } from './history-fixtures.ts';

/** Texts of one value written differently: keys in another order, spaced, numbers spelled otherwise. */
function variants(value: unknown, seed: number): string[] {
  const respell = (entry: unknown, depth: number): string => {
    if (entry === null) return seed % 3 === 0 ? '1e400' : 'null';
    if (typeof entry === 'number') {
      if (Object.is(entry, 0)) return seed % 2 === 0 ? '-0' : '0.0';
      return seed % 2 === 0 ? entry.toExponential() : String(entry);
    }
    if (typeof entry !== 'object') return JSON.stringify(entry);
    if (Array.isArray(entry)) return `[ ${entry.map((item) => respell(item, depth + 1)).join(' , ')} ]`;
    const keys = Object.keys(entry);
    if ((seed + depth) % 2 === 0) keys.reverse();
    const members = keys.map(
      (key) => `${JSON.stringify(key)} : ${respell((entry as Record<string, unknown>)[key], depth + 1)}`,
    );
    return `{ ${members.join(', ')} }`;
  };
  return [JSON.stringify(value), respell(value, 0)];
}

describe('argumentsFingerprint', () => {
  it('is the same for any two texts of the same canonical arguments (property)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.nat(), (value, seed) => {
        const [first, second] = variants(value, seed) as [string, string];
        expect(canonicalArguments(second)).toBe(canonicalArguments(first));
        expect(argumentsFingerprint(second)).toBe(argumentsFingerprint(first));
      }),
      { numRuns: 3000 },
    );
  });

  it('takes a number too large for a double as the null it is written as canonical', () => {
    for (const [large, plain] of [
      ['{"a":1e400}', '{"a":null}'],
      ['[-1e400,1]', '[null,1]'],
      ['1e999', 'null'],
    ] as const) {
      expect(canonicalArguments(large)).toBe(canonicalArguments(plain));
      expect(argumentsFingerprint(large)).toBe(argumentsFingerprint(plain));
    }
  });

  it('is found for arguments nested deeper than the stack goes, and tells their repeats', () => {
    const deep = `${'['.repeat(200_000)}${']'.repeat(200_000)}`;
    expect(() => argumentsFingerprint(deep)).not.toThrow();
    const history = sequenced([call('c1', 'f', deep), output('c1', 'a'), call('c2', 'f', deep), output('c2', 'b')]);
    const { history: index } = indexHistory(history);
    expect([index.isRepeat(0), index.isRepeat(1)]).toEqual([false, true]);
  });

  it('tells repeats among calls whose arguments hold numbers too large for a double', () => {
    const history = sequenced([
      call('c1', 'f', '{"a":null}'),
      output('c1', 'a'),
      call('c2', 'f', '{"a":1e400}'),
      output('c2', 'b'),
    ]);
    const { history: index } = indexHistory(history);
    expect(index.isRepeat(1)).toBe(true);
  });
});
