import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CorruptObjectError } from '../../lib/errors.ts';
import { checkedRecord, storedRecord } from '../../lib/session/record-check.ts';
import { parseStored, recordSchema } from '../../lib/session/records.ts';

/**
 * Records read back without the item schema (lib/session/record-check.ts): the same record as
 * `recordSchema` gives, key for key, or the same error; items in the shape a commit writes are
 * taken as they are.
 */

const bytes = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

/** What a read gives: the record as JSON (keys in order), or the error's message. */
function outcome(read: () => unknown): unknown {
  try {
    return { record: JSON.stringify(read()) };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

/** A value of another field or kind, for any field. */
const odd = fc.constantFrom<unknown>(0, -1, 2.5, 2 ** 53, null, true, '', 'x'.repeat(257), 'user', [], {}, [
  { type: 'input_text', text: 't' },
]);

/**
 * An object from `[key, value]` entries: each value sometimes odd, an entry sometimes left
 * out, an `extra` key sometimes added, the keys sometimes in reverse order.
 */
function shaped(entries: [string, fc.Arbitrary<unknown>][]): fc.Arbitrary<Record<string, unknown>> {
  const fields = entries.map(([key, value]) =>
    fc
      .tuple(fc.oneof({ weight: 15, arbitrary: value }, odd), fc.nat(40))
      .map(([chosen, roll]) => ({ key, value: chosen, kept: roll > 0 })),
  );
  return fc.tuple(fc.tuple(...fields), fc.nat(30), fc.nat(30)).map(([chosen, extra, reverse]) => {
    const kept = chosen.filter((field) => field.kept).map((field): [string, unknown] => [field.key, field.value]);
    if (extra === 0) kept.push(['extra', 1]);
    if (reverse === 0) kept.reverse();
    return Object.fromEntries(kept);
  });
}

const text = fc.string({ maxLength: 5 });
const name = fc.oneof(fc.string({ minLength: 1, maxLength: 5 }), fc.constant('n'.repeat(256)));
const seq = fc.oneof(fc.integer({ min: 1, max: 500 }), fc.constant(2 ** 53 - 1));
const stored: [string, fc.Arbitrary<unknown>][] = [
  ['seq', seq],
  ['created_at', text],
];
const parts = fc.constant([{ type: 'input_text', text: 'p' }]);
const item = fc.oneof(
  shaped([
    ['type', fc.constant('message')],
    ['role', fc.constantFrom('system', 'user', 'assistant')],
    ['content', fc.oneof({ weight: 5, arbitrary: text }, parts)],
    ...stored,
  ]),
  shaped([['type', fc.constant('function_call')], ['call_id', name], ['name', name], ['arguments', text], ...stored]),
  shaped([
    ['type', fc.constant('function_call_output')],
    ['call_id', name],
    ['output', fc.oneof({ weight: 5, arbitrary: text }, parts)],
    ...stored,
    ['output_ref', fc.constant({ sha256: 'a'.repeat(64), md5: 'b'.repeat(32), length: 3, head: 'h', tail: 't' })],
  ]),
);
const items = fc.array(item, { maxLength: 4 });
const record = shaped([
  ['format', fc.constant('tailgate.record.v1')],
  ['record', seq],
  ['kind', fc.constantFrom('append', 'turn', 'compact')],
  ['created_at', text],
  ['writer', text],
  ['first_seq', seq],
  ['items', items],
  ['counts', fc.constant({ items: 3, turns: 1, tool_calls: 1 })],
  ['repeats', fc.constantFrom('p:01', '1')],
  [
    'recent',
    fc.array(
      shaped([
        ['record', seq],
        ['items', items],
        ['repeats', fc.constant('p:1')],
      ]),
      { maxLength: 3 },
    ),
  ],
  ['turn', seq],
]);

describe('storedRecord', () => {
  it('gives what recordSchema gives any value: the same record, keys in order, or the same error (property)', () => {
    let taken = 0;
    fc.assert(
      fc.property(fc.oneof({ weight: 8, arbitrary: record }, fc.jsonValue()), (value) => {
        const body = bytes(value);
        const expected = outcome(() => parseStored('k', body, recordSchema));
        expect(outcome(() => storedRecord('k', body))).toEqual(expected);
        const checked = checkedRecord(JSON.parse(JSON.stringify(value)));
        if (checked) {
          expect({ record: JSON.stringify(checked) }).toEqual(expected);
          taken += 1;
        }
      }),
      { numRuns: 4000 },
    );
    // Most of the near records are records, and were compared.
    expect(taken).toBeGreaterThan(200);
  });

  it('takes the items of a record in the shape a commit writes them as they are, without copying them', () => {
    const own = [
      { type: 'message', role: 'user', content: 'hi', seq: 3, created_at: 'a' },
      { type: 'function_call', call_id: 'c', name: 'read', arguments: '{}', seq: 4, created_at: 'a' },
    ];
    const carried = [{ type: 'function_call_output', call_id: 'b', output: 'x', seq: 2, created_at: 'a' }];
    const written = {
      format: 'tailgate.record.v1',
      record: 2,
      kind: 'append',
      created_at: 'a',
      first_seq: 3,
      items: own,
      counts: { items: 4, turns: 0, tool_calls: 1 },
      recent: [{ record: 1, items: carried, repeats: 'p:0' }],
    };
    const checked = checkedRecord(written)!;
    expect(checked.items.every((taken, index) => taken === own[index])).toBe(true);
    expect(checked.recent![0]!.items[0]).toBe(carried[0]);
    expect(JSON.stringify(checked)).toBe(JSON.stringify(recordSchema.parse(written)));
  });

  it('refuses what is not a record as the schema does', () => {
    expect(() => storedRecord('k', new TextEncoder().encode('{'))).toThrow(CorruptObjectError);
    expect(() => storedRecord('k', bytes([1]))).toThrow(CorruptObjectError);
    expect(() => storedRecord('k', bytes({ format: 'tailgate.record.v1', items: [] }))).toThrow(CorruptObjectError);
  });
});
