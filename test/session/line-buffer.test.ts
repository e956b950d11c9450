import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LineBuffer } from '../../lib/session/line-buffer.ts';
import { concatBytes } from '../../lib/store/object-store.ts';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

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
            const length = buffer.append(asBytes ? encoder.encode(line) : line, newline);
            expected += newline ? `${line}\n` : line;
            expect(length).toBe(encoder.encode(expected).length);
          }
          expect(decoder.decode(buffer.bytes())).toBe(expected);
          expect(decoder.decode(concatBytes(buffer.parts()))).toBe(expected);
        },
      ),
    );
  });

  it('keeps long byte lines as views of their array, one part for lines one after another in it (property)', () => {
    // Lines of a stream's chunk, each a view of it, as an import hands them over: taken in any
    // order and any subset, with text between, the parts hold exactly what was appended.
    const line = fc
      .string({ unit: 'grapheme-ascii', minLength: 0, maxLength: 1200 })
      .map((text) => text.replaceAll('\n', ' '));
    fc.assert(
      fc.property(
        fc.array(line, { minLength: 1, maxLength: 12 }),
        fc.array(fc.tuple(fc.nat(), fc.boolean(), fc.option(fc.string({ maxLength: 20 }))), { maxLength: 30 }),
        fc.constantFrom('\n', '\r\n'),
        (texts, picks, end) => {
          const chunk = encoder.encode(texts.map((text) => `${text}${end}`).join(''));
          const views: Uint8Array[] = [];
          let offset = 0;
          for (const text of texts) {
            views.push(chunk.subarray(offset, offset + text.length));
            offset += text.length + end.length;
          }
          const buffer = new LineBuffer();
          let expected = '';
          for (const [pick, newline, between] of picks) {
            const index = pick % views.length;
            buffer.append(views[index]!, newline);
            expected += newline ? `${texts[index]}\n` : texts[index];
            if (between !== null) {
              buffer.append(between, false);
              expected += between;
            }
          }
          expect(buffer.length).toBe(encoder.encode(expected).length);
          expect(decoder.decode(concatBytes(buffer.parts()))).toBe(expected);
        },
      ),
    );
    const texts = ['a'.repeat(600), 'b'.repeat(700), 'c'.repeat(800)];
    const chunk = encoder.encode(texts.map((text) => `${text}\n`).join(''));
    const buffer = new LineBuffer();
    buffer.append(chunk.subarray(0, 600));
    buffer.append(chunk.subarray(601, 1301));
    buffer.append(chunk.subarray(1302, 2102));
    buffer.append('{"index":1}', false);
    const parts = buffer.parts();
    expect(parts).toHaveLength(2);
    expect(parts[0]!.buffer).toBe(chunk.buffer);
    expect(decoder.decode(parts[0])).toBe(texts.map((text) => `${text}\n`).join(''));
  });
});
