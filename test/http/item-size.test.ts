import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { utf8Bytes } from '../../functions/item-size.ts';

describe('utf8Bytes', () => {
  const encoded = (text: string) => new TextEncoder().encode(text).length;

  it('counts the bytes TextEncoder writes: one to four a character, a lone surrogate as U+FFFD', () => {
    for (const text of ['', 'a', 'é', '€', '😀', '\ud83d', '\ude00', 'x\ud83dy', '\ude00\ud83d', '\ud83d\ud83d\ude00'])
      expect(utf8Bytes(text)).toBe(encoded(text));
    expect(utf8Bytes('a é € 😀')).toBe(1 + 1 + 2 + 1 + 3 + 1 + 4);
  });

  it('counts the bytes TextEncoder writes for any string of UTF-16 code units', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary' }),
        fc.string({ unit: fc.integer({ min: 0xd7f0, max: 0xe010 }).map((code) => String.fromCharCode(code)) }),
        (text, surrogates) => {
          expect(utf8Bytes(text)).toBe(encoded(text));
          expect(utf8Bytes(surrogates + text)).toBe(encoded(surrogates + text));
        },
      ),
      { numRuns: 500 },
    );
  });
});
