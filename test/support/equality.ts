import { expect } from 'vitest';
import { RepeatedCalls } from '../../lib/repeated-calls.ts';

/**
 * `toEqual` compares a RepeatedCalls (lib/repeated-calls.ts) by its entries, with another or with
 * a plain object of them: its entries are private fields, which an equality on own properties
 * would not see (two maps of one size would be equal). Registered once per worker (setupFiles
 * run again for each file of a worker that shares its modules).
 */
const registered = Symbol.for('tailgate.repeatedCallsTester');
const global = globalThis as { [registered]?: true };
if (!global[registered]) {
  global[registered] = true;
  expect.addEqualityTesters([
    function repeatedCalls(a: unknown, b: unknown, customTesters) {
      if (!(a instanceof RepeatedCalls) && !(b instanceof RepeatedCalls)) return undefined;
      const plain = (value: unknown) => (value instanceof RepeatedCalls ? Object.fromEntries(value.entries()) : value);
      return this.equals(plain(a), plain(b), customTesters);
    },
  ]);
}
