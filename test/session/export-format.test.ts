import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { exportItemSchema, parseExportItem, parseExportLine } from '../../lib/session/export-format.ts';

/** What a parse gives: the item as JSON (its keys in order), or the error's message and field. */
function outcome(parse: () => unknown): unknown {
  try {
    return { item: JSON.stringify(parse()) };
  } catch (error) {
    const { message, details } = error as { message: string; details?: unknown };
    return { message, details };
  }
}

const text = fc.oneof(
  fc.constantFrom('', 'x', 'é', '\u{1D11E}'),
  fc.integer({ min: 254, max: 258 }).map((length) => 'c'.repeat(length)),
  fc.string({ maxLength: 8 }),
);
/** A field's value: mostly the right kind, sometimes not. */
const field = fc.oneof(
  { weight: 6, arbitrary: text },
  fc.constantFrom('system', 'user', 'assistant', 'tool', 'message', 'function_call', 'function_call_output'),
  fc.constantFrom(0, -1, 1, 1.5, 2 ** 53, null, true),
  fc.constant([{ type: 'input_text', text: 'p' }]),
  fc.constant({}),
);
/** A valid value of each field (`nearItem` mostly takes these, else any `field`). */
const valid: Record<string, fc.Arbitrary<unknown>> = {
  role: fc.constantFrom('system', 'user', 'assistant'),
  content: text,
  call_id: fc.string({ minLength: 1, maxLength: 8 }),
  name: fc.string({ minLength: 1, maxLength: 8 }),
  arguments: text,
  output: text,
  seq: fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.constant(2 ** 53 - 1)),
  created_at: text,
  extra: text,
};
const keys = Object.keys(valid);
/** Objects near an item line: an item's keys, in its order or another, some left out or added, values mostly right. */
const nearItem = fc
  .tuple(
    fc.constantFrom<string[]>(
      ['type', 'role', 'content', 'seq', 'created_at'],
      ['type', 'call_id', 'name', 'arguments', 'seq', 'created_at'],
      ['type', 'call_id', 'output', 'seq', 'created_at'],
    ),
    fc.constantFrom('message', 'function_call', 'function_call_output', 'notice', 3),
    fc.record(
      Object.fromEntries(keys.map((key) => [key, fc.oneof({ weight: 4, arbitrary: valid[key]! }, field)])) as Record<
        string,
        fc.Arbitrary<unknown>
      >,
    ),
    fc.oneof({ weight: 3, arbitrary: fc.constant<string[]>([]) }, fc.subarray(keys, { maxLength: 2 })),
    fc.oneof({ weight: 3, arbitrary: fc.constant(false) }, fc.constant(true)),
  )
  .map(([order, type, values, toggled, shuffle]) => {
    // A toggled key is left out when the type has it, added when it has not.
    const names = [...order.filter((key) => !toggled.includes(key)), ...toggled.filter((key) => !order.includes(key))];
    if (shuffle) names.reverse();
    return Object.fromEntries(names.map((key) => [key, key === 'type' ? type : values[key]]));
  });

describe('parseExportItem', () => {
  it('gives what the item schema gives any value: the same item, keys in order, or the same error (property)', () => {
    fc.assert(
      fc.property(fc.oneof({ weight: 4, arbitrary: nearItem }, fc.jsonValue()), fc.nat(1000), (value, line) => {
        const expected = outcome(() => parseExportLine(line, value, exportItemSchema));
        expect(outcome(() => parseExportItem(line, value))).toEqual(expected);
      }),
      { numRuns: 5000 },
    );
  });

  it.each([
    ['a role the schema refuses', { type: 'message', role: 'robot', content: 'x', seq: 1, created_at: 'a' }],
    ['an empty call id', { type: 'function_call', call_id: '', name: 'n', arguments: '', seq: 1, created_at: 'a' }],
    [
      'a call id of 257',
      { type: 'function_call_output', call_id: 'c'.repeat(257), output: '', seq: 1, created_at: 'a' },
    ],
    ['a seq past 2^53', { type: 'message', role: 'user', content: 'x', seq: 2 ** 53, created_at: 'a' }],
    ['a seq of 0', { type: 'message', role: 'user', content: 'x', seq: 0, created_at: 'a' }],
    ['a fractional seq', { type: 'message', role: 'user', content: 'x', seq: 1.5, created_at: 'a' }],
    ['an extra key', { type: 'message', role: 'user', content: 'x', seq: 1, created_at: 'a', extra: 1 }],
    ['a missing created_at', { type: 'message', role: 'user', content: 'x', seq: 1 }],
  ])('refuses %s as the schema does, naming the line', (_name, value) => {
    const error = outcome(() => parseExportItem(12, value));
    expect(error).toEqual(outcome(() => parseExportLine(12, value, exportItemSchema)));
    expect(error).toMatchObject({ message: expect.stringMatching(/^line 12/) });
  });

  it('takes a line in the order an export writes it as its own value, and another order as the schema makes it', () => {
    const written = { type: 'function_call', call_id: 'c', name: 'read', arguments: '{}', seq: 3, created_at: 'a' };
    expect(parseExportItem(2, written)).toBe(written);
    const reordered = { seq: 3, created_at: 'a', type: 'message', role: 'user', content: 'hi' };
    expect(JSON.stringify(parseExportItem(2, reordered))).toBe(
      '{"type":"message","role":"user","content":"hi","seq":3,"created_at":"a"}',
    );
  });
});
