import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonBytesBound, utf8Bytes } from '../../lib/session/item-size.ts';

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

describe('jsonBytesBound', () => {
  const stored = (value: unknown) => new TextEncoder().encode(JSON.stringify(value)).length;

  it('is at least the UTF-8 bytes of the JSON of any item-like value, escapes and lone surrogates included', () => {
    const text = fc.string({ unit: 'binary' });
    const items = fc.oneof(
      fc.record({ type: fc.constant('message'), role: fc.constant('user'), content: text }),
      fc.record({ type: fc.constant('function_call'), call_id: text, name: text, arguments: text }),
      fc.record({
        type: fc.constant('function_call_output'),
        call_id: text,
        output: fc.array(fc.record({ type: fc.constant('input_text'), text })),
      }),
      fc.jsonValue(),
    );
    fc.assert(
      fc.property(items, (item) => {
        expect(jsonBytesBound(item)).toBeGreaterThanOrEqual(stored(item));
      }),
      { numRuns: 500 },
    );
    for (const worst of ['\u0000\u001f', '\ud800', '\u2028"\\', '😀', -1.2345678901234567e-308, [[]], { '\n': null }])
      expect(jsonBytesBound(worst)).toBeGreaterThanOrEqual(stored(worst));
  });
});
