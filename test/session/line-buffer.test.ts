import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LineBuffer } from '../../lib/session/line-buffer.ts';

describe('LineBuffer', () => {
  it('holds the UTF-8 of every line appended, text or bytes, growing from any capacity (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.string({ unit: 'grapheme', maxLength: 300 }), fc.boolean(), fc.boolean())),
        fc.integer({ min: 0, max: 64 }),
        (lines, capacity) => {
          const buffer = new LineBuffer(capacity);
          let expected = '';
          for (const [line, asBytes, newline] of lines) {
            const length = buffer.append(asBytes ? new TextEncoder().encode(line) : line, newline);
            expected += newline ? `${line}\n` : line;
            expect(length).toBe(new TextEncoder().encode(expected).length);
          }
          expect(new TextDecoder().decode(buffer.bytes())).toBe(expected);
        },
      ),
    );
  });
});
