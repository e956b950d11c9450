import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { promptByteLength } from '../../bench/turn-driver.ts';

/** What promptByteLength counted by building the whole JSON, the reference it must equal. */
function wholeJsonByteLength(prompt: unknown): number {
  let mediaBytes = 0;
  const json = JSON.stringify(prompt, (_key, value) => {
    if (!(value instanceof Uint8Array)) return value;
    mediaBytes += value.length;
    return undefined;
  });
  return new TextEncoder().encode(json).length + mediaBytes;
}

class Part {
  readonly text: string;
  readonly data: Uint8Array;
  constructor(text: string, data: Uint8Array) {
    this.text = text;
    this.data = data;
  }
}

describe('promptByteLength', () => {
  it("equals the whole JSON's UTF-8 bytes plus the media, for prompts of every kind", () => {
    const prompts: unknown[] = [
      [],
      {},
      null,
      undefined,
      'plain',
      42,
      new Uint8Array(7),
      [
        { role: 'system', content: 'You are é 中文 😀, a lone \ud800 and \udc00, "quotes" \\ \n\t\u0001' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'see' },
            { type: 'file', mediaType: 'image/png', data: new Uint8Array(300) },
          ],
        },
        {
          role: 'assistant',
          content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'read', input: { path: '/a', n: -0 } }],
        },
        {
          role: 'tool',
          content: [{ type: 'tool-result', output: { type: 'json', value: [1.5, NaN, Infinity, null, true] } }],
        },
      ],
      [undefined, () => 1, Symbol('s'), new Uint8Array(3), [new Uint8Array(2), []], 0],
      { a: undefined, b: new Uint8Array(4), 'ké\u2028y': 'v', c: { d: new Date(0), e: Buffer.from('buffer') } },
      { nested: new Part('part', new Uint8Array(5)), map: new Map([[1, 2]]), withJson: { toJSON: () => ['x', 'ÿ'] } },
      Object.assign(Object.create(null), { bare: 'object', data: new Uint8Array(9) }),
      // A hole is undefined to JSON: null.
      new Array(3),
    ];
    for (const prompt of prompts) expect(promptByteLength(prompt)).toBe(wholeJsonByteLength(prompt));
  });

  it('equals it for any JSON-like value holding bytes', () => {
    const leaf = fc.oneof(
      fc.string({ unit: 'binary' }),
      fc.double(),
      fc.integer(),
      fc.boolean(),
      fc.constant(null),
      fc.constant(undefined),
      fc.uint8Array({ maxLength: 50 }),
    );
    const { value } = fc.letrec((tie) => ({
      value: fc.oneof({ depthSize: 'small' }, leaf, tie('array'), tie('object')),
      array: fc.array(tie('value'), { maxLength: 5 }),
      object: fc.dictionary(fc.string({ unit: 'binary' }), tie('value'), { maxKeys: 5 }),
    }));
    fc.assert(
      fc.property(value, (prompt) => promptByteLength(prompt) === wholeJsonByteLength(prompt)),
      { numRuns: 500 },
    );
  });
});
