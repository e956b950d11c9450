import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nearItem, outcome, validFields } from '../support/near-items.ts';
import { exportItemSchema, parseExportItem, parseExportLine } from '../../lib/session/export-format.ts';

/** Objects near an item line. */
const nearExportItem = nearItem(
  [
    ['type', 'role', 'content', 'seq', 'created_at'],
    ['type', 'call_id', 'name', 'arguments', 'seq', 'created_at'],
    ['type', 'call_id', 'output', 'seq', 'created_at'],
  ],
  validFields,
);

describe('parseExportItem', () => {
  it('gives what the item schema gives any value: the same item, keys in order, or the same error (property)', () => {
    fc.assert(
      fc.property(fc.oneof({ weight: 4, arbitrary: nearExportItem }, fc.jsonValue()), fc.nat(1000), (value, line) => {
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
    [
      'reasoning with a key it does not have',
      {
        type: 'function_call',
        call_id: 'c',
        name: 'n',
        arguments: '',
        reasoning: [{ type: 'reasoning', summary: [], signature: 'x' }],
        seq: 1,
        created_at: 'a',
      },
    ],
  ])('refuses %s as the schema does, naming the line', (_name, value) => {
    const error = outcome(() => parseExportItem(12, value));
    expect(error).toEqual(outcome(() => parseExportLine(12, value, exportItemSchema)));
    expect(error).toMatchObject({ message: expect.stringMatching(/^line 12/) });
  });

  it('takes a line in the order an export writes it as its own value, and another order as the schema makes it', () => {
    const written = { type: 'function_call', call_id: 'c', name: 'read', arguments: '{}', seq: 3, created_at: 'a' };
    expect(parseExportItem(2, written)).toBe(written);
    const reasoning = [
      { type: 'reasoning', summary: [{ type: 'summary_text', text: 'Hmm.' }], encrypted_content: '{}' },
    ];
    expect(parseExportItem(2, { ...written, reasoning })).toEqual({ ...written, reasoning });
    const reordered = { seq: 3, created_at: 'a', type: 'message', role: 'user', content: 'hi' };
    expect(JSON.stringify(parseExportItem(2, reordered))).toBe(
      '{"type":"message","role":"user","content":"hi","seq":3,"created_at":"a"}',
    );
  });
});
