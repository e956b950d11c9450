import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CorruptObjectError } from '../../lib/errors.ts';
import { parseStored, validateStored } from '../../lib/session/records.ts';
import { checkedView, storedView, storedViewChunk, viewOf } from '../../lib/session/view-check.ts';
import { VIEW_VERSION, keysAscending, viewSchema } from '../../lib/session/view-records.ts';

/** What a check gives: the view as JSON (its keys in order), or the error's message. */
function outcome(check: () => unknown): unknown {
  try {
    return { view: JSON.stringify(check()) };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

const text = fc.oneof(fc.constantFrom('', 'x', 'é'), fc.string({ maxLength: 6 }));
/** A call id or name: 1 to 256 characters. */
const name = fc.oneof(fc.constantFrom('x', 'c'.repeat(256)), fc.string({ minLength: 1, maxLength: 6 }));
/** A wrong value, or a right one of another field. */
const wrong = fc.constantFrom<unknown>(
  0,
  -1,
  1,
  1.5,
  2 ** 53,
  null,
  true,
  false,
  '1',
  'tool',
  '',
  'c'.repeat(257),
  [{ type: 'input_text', text: 'p' }],
  {},
  [],
);
const seq = fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.constant(2 ** 53 - 1));
const flag = fc.constant(true);

/**
 * Objects near one with `fields` in this order: values mostly right, some left out, added or
 * wrong, keys sometimes in another order.
 */
function near(fields: [string, fc.Arbitrary<unknown>][]): fc.Arbitrary<Record<string, unknown>> {
  const names = fields.map(([name]) => name);
  return fc
    .tuple(
      fc.record(
        Object.fromEntries(fields.map(([name, valid]) => [name, fc.oneof({ weight: 20, arbitrary: valid }, wrong)])),
      ),
      fc.oneof(
        { weight: 30, arbitrary: fc.constant<string[]>([]) },
        fc.subarray([...names, 'extra'], { maxLength: 2 }),
      ),
      fc.oneof({ weight: 30, arbitrary: fc.constant(false) }, fc.constant(true)),
    )
    .map(([values, toggled, reversed]) => {
      const keys = names.filter((name) => !toggled.includes(name));
      if (toggled.includes('extra')) keys.push('extra');
      if (reversed) keys.reverse();
      return Object.fromEntries(
        keys.map((key) => [key, key === 'extra' ? 1 : (values as Record<string, unknown>)[key]]),
      );
    });
}

const common: [string, fc.Arbitrary<unknown>][] = [
  ['seq', seq],
  ['created_at', text],
];
const item = fc.oneof(
  near([
    ['type', fc.constant('message')],
    ['role', fc.constantFrom('system', 'user', 'assistant')],
    ['content', text],
    ...common,
  ]),
  near([
    ['type', fc.constant('function_call')],
    ['call_id', name],
    ['name', name],
    ['arguments', text],
    ...common,
    ['compacted', flag],
    ['behind', flag],
  ]),
  near([
    ['type', fc.constant('function_call_output')],
    ['call_id', name],
    ['output', fc.oneof(text, fc.constant([{ type: 'input_text', text: 'p' }]))],
    ...common,
    ['output_ref', fc.constant({ sha256: 'a'.repeat(64), md5: 'b'.repeat(32), length: 3, head: 'h', tail: 't' })],
    ['compacted', flag],
    ['behind', flag],
  ]),
);
/** A `repeated` map: mostly call keys with seqs, sometimes a wrong value or a `__proto__` key. */
const repeated = fc
  .tuple(
    fc.dictionary(
      fc.oneof(fc.string({ unit: fc.constantFrom('a', 'b', '0', '1'), minLength: 1, maxLength: 4 }), fc.constant('12')),
      fc.oneof({ weight: 10, arbitrary: seq }, wrong),
      {
        maxKeys: 4,
      },
    ),
    fc.oneof({ weight: 20, arbitrary: fc.constant(false) }, fc.constant(true)),
  )
  .map(([map, proto]) =>
    proto ? JSON.parse(`{"__proto__":3,${JSON.stringify(map).slice(1)}`.replace(',}', '}')) : map,
  );
const count = fc.oneof(fc.nat(50), fc.constant(2 ** 53 - 1));
/** Mostly padded base64, as the writer stores flags; sometimes text that is not. */
const flags = fc.oneof(
  { weight: 40, arbitrary: fc.uint8Array({ maxLength: 5 }).map((bytes) => Buffer.from(bytes).toString('base64')) },
  fc.constantFrom('A=', 'AAAAA=', '@@@@', '~', '~gBh', '~gA'),
  text,
);
const aggregates = near([
  ['tool_calls', count],
  ['tool_outputs', count],
  ['repeat_flags', flags],
  ['repeated', repeated],
  ['images', count],
  ['image_order', flags],
  [
    'repeated_older',
    near([
      ['before_seq', seq],
      ['record', seq],
    ]),
  ],
]);
/**
 * A shard filter: mostly of bits per key and a length the shard below (5 keys) gives (10 bits:
 * 10 characters; 16 bits: 15), or sized for other keys (10 bits: 3, 5, 6, 8 characters; 16
 * bits: 4), or for none (1 character, no bits per key allowed), or not base64.
 */
const filter = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('KAB/+9zAAA', 'Kzzzzzzzzz', `Q${'A'.repeat(14)}`, `Q${'z'.repeat(14)}`) },
  fc.constantFrom('KAB', 'K/+9z', 'Kzzzzz', 'KAAAAAAA', 'QAAA', `L${'A'.repeat(14)}`),
  fc.constantFrom('', 'K', 'KABC', 'AAB', 'RAAA', 'K=A', 'KA-_B', 'é!', 7),
);
/** Filters by prefix: mostly those of the shard of `versions` below (`ab` at depth 2), or not. */
const filters = fc.oneof(
  { weight: 8, arbitrary: fc.record({ ab: filter }) },
  fc.record({ '': filter }),
  fc.constant({}),
  fc.dictionary(fc.constantFrom('a', 'b', 'ab', 'abc', 'g', '__proto__'), filter, { maxKeys: 3 }),
);
/** Mostly sorted keys; or out of order, twice, not hex, not whole keys, not a string. */
const delta = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('', '0123456789ab', '0123456789abffffffffffff') },
  fc.constantFrom(
    'ffffffffffff0123456789ab',
    '0123456789ab0123456789ab',
    '0123456789ac0123456789ab',
    'ABCDEF012345',
    '0123456789a',
    '0123456789abf',
    7,
  ),
);
/** Mostly the shard `ab` named by record 3; or no shard; or names and prefixes the schema refuses. */
const versions = fc.oneof(
  { weight: 16, arbitrary: fc.constant({ 3: 'ab' }) },
  fc.constant({}),
  fc.constantFrom({ 0: 'ab' }, { '03': 'ab' }, { x: 'ab' }, { 3: 'AB' }, { 3: 5 }, { 3: 'ab', 4: 'g' }),
);
/** Mostly the count of the shard `ab` of record 3 (at depth 2: one shard); or counts the schema refuses. */
const counts = fc.oneof(
  { weight: 40, arbitrary: fc.constant({ 3: '5' }) },
  fc.constant({}),
  fc.constantFrom({ 3: '5,7' }, { 3: '0' }, { 3: '05' }, { 4: '5' }, { 3: 5 }, { 3: '5', 4: '1' }, { 3: '' }),
);
/** An index naming shards (with their filters), or none (without filters). */
const keyIndex = fc.oneof(
  near([
    ['count', count],
    ['depth', fc.oneof({ weight: 8, arbitrary: fc.constant(2) }, fc.integer({ min: 0, max: 6 }))],
    ['versions', versions],
    ['counts', counts],
    ['delta', delta],
    ['filters', filters],
  ]),
  near([
    ['count', count],
    ['depth', fc.integer({ min: 0, max: 6 })],
    ['versions', fc.constantFrom({}, { 3: 'ab' })],
    ['counts', fc.constantFrom({}, { 3: '5' })],
    ['delta', delta],
  ]),
);
const tail = near([
  ['from_seq', seq],
  ['window_start', seq],
  ['items', fc.array(item, { maxLength: 4 })],
]);
const view = near([
  ['format', fc.constant('tailgate.view.v1')],
  ['v', fc.constant(VIEW_VERSION)],
  ['policy', text],
  ['record', seq],
  ['last_seq', fc.oneof(count, fc.constant(0))],
  ['aggregates', aggregates],
  ['keys', keyIndex],
  ['tail', fc.oneof(tail, fc.constant(null))],
  ['created_at', text],
]);

describe('viewOf', () => {
  it('gives what viewSchema gives any value: the same view, keys in order, or the same error (property)', () => {
    let taken = 0;
    let filtered = 0;
    fc.assert(
      fc.property(fc.oneof({ weight: 6, arbitrary: view }, fc.jsonValue()), (value) => {
        const expected = outcome(() => validateStored('k', value, viewSchema));
        expect(outcome(() => viewOf('k', value))).toEqual(expected);
        // What the check takes, the schema takes and gives back the same.
        const checked = checkedView(value);
        if (checked) expect({ view: JSON.stringify(checked) }).toEqual(expected);
        if (checked) taken += 1;
        if (checked?.keys.filters) filtered += 1;
      }),
      { numRuns: 6000 },
    );
    // Most near views are views: the check took them, and what it took was compared.
    expect(taken).toBeGreaterThan(250);
    expect(filtered).toBeGreaterThan(100);
  });

  it('takes the parts of a view in the shape the writer gives them as they are, without copying them', () => {
    const items = [
      { type: 'message', role: 'user', content: 'hi', seq: 1, created_at: 'a' },
      { type: 'function_call', call_id: 'c', name: 'read', arguments: '{}', seq: 2, created_at: 'a', behind: true },
      { type: 'function_call_output', call_id: 'c', output: 'x', seq: 3, created_at: 'a', compacted: true },
    ];
    const aggregates = {
      tool_calls: 1,
      tool_outputs: 1,
      repeat_flags: 'AA==',
      repeated: { '0123456789abcdef01234567': 2 },
      images: 0,
      image_order: 'AQ==',
    };
    const written = {
      format: 'tailgate.view.v1',
      v: VIEW_VERSION,
      policy: 'p',
      record: 2,
      last_seq: 3,
      aggregates,
      keys: { count: 1, depth: 0, versions: {}, counts: {}, delta: '0123456789ab' },
      tail: { from_seq: 1, window_start: 1, items },
      created_at: 'a',
    };
    const checked = checkedView(written)!;
    // The aggregates as read, `repeated` held as a map of the object read.
    expect(checked.aggregates).toEqual(aggregates);
    expect(checked.keys).toBe(written.keys);
    expect(checked.tail!.items.every((taken, index) => taken === items[index])).toBe(true);
    expect(JSON.stringify(checked)).toBe(JSON.stringify(viewSchema.parse(written)));
  });

  it('refuses as corrupt a view whose repeat flags or image order are not padded base64', () => {
    for (const [field, text] of [
      ['repeat_flags', 'A='],
      ['repeat_flags', '@@@@'],
      ['repeat_flags', '~gA'],
      ['image_order', 'AAAAA='],
    ] as const) {
      const aggregates = { tool_calls: 0, tool_outputs: 0, repeat_flags: '', repeated: {}, images: 0, image_order: '' };
      const value = {
        format: 'tailgate.view.v1',
        v: VIEW_VERSION,
        policy: 'p',
        record: 2,
        last_seq: 3,
        aggregates: { ...aggregates, [field]: text },
        keys: null,
        tail: null,
        created_at: 'a',
      };
      expect(() => viewOf('k', value)).toThrow(CorruptObjectError);
      expect(() => validateStored('k', value, viewSchema)).toThrow(CorruptObjectError);
    }
  });

  it('refuses as corrupt a view whose shard counts or filters are not those of its shards', () => {
    const bytes = (keys: unknown) =>
      new TextEncoder().encode(
        JSON.stringify({
          format: 'tailgate.view.v1',
          v: VIEW_VERSION,
          policy: 'p',
          record: 2,
          last_seq: 3,
          aggregates: { tool_calls: 0, tool_outputs: 0, repeat_flags: '', repeated: {}, images: 0, image_order: '' },
          keys,
          tail: null,
          created_at: 'a',
        }),
      );
    const index = (filters?: Record<string, string>, counts: Record<string, string> = { 2: '1,3' }) => ({
      count: 3,
      depth: 1,
      versions: { 2: 'ab' },
      counts,
      filters,
    });
    expect(storedView('k', bytes(index({ a: 'KAB', b: 'Qzzzzzzzz' })), 'p')!.keys.filters).toEqual({
      a: 'KAB',
      b: 'Qzzzzzzzz',
    });
    // None at all: an index past FILTER_MAX_KEYS keys in shards.
    expect(storedView('k', bytes(index()), 'p')!.keys).toEqual({
      count: 3,
      depth: 1,
      versions: { 2: 'ab' },
      counts: { 2: '1,3' },
    });
    // Counts that do not give each shard named its place: one a shard, each of a key at least.
    for (const counts of [{}, { 2: '1' }, { 2: '1,3,1' }, { 2: '1,0' }, { 3: '1,3' }, { 2: '1,3', 3: '1' }])
      expect(() => storedView('k', bytes(index(undefined, counts)), 'p'), JSON.stringify(counts)).toThrow(
        CorruptObjectError,
      );
    for (const filters of [
      { a: 'K=A', b: 'KAB' },
      { a: 'K-A', b: 'KAB' },
      // The filter of no keys (it rejects every key, so no shard read would tell): no shard is empty.
      { a: '', b: 'KAB' },
      { a: 'K', b: 'KAB' },
      { a: 'KABC', b: 'KAB' },
      // Bits per key below 10 or above 16.
      { a: 'JAB', b: 'KAB' },
      { a: 'RAAA', b: 'KAB' },
      // Sized for other keys than its shard's (3): its first character says other bits, or its length other keys.
      { a: 'KAB', b: 'Qzzzzzzzz'.replace('Q', 'K') },
      { a: 'KAB', b: 'Qzzzzzz' },
      { a: 'KAB', b: 'KABCDEFG' },
      { a: 'KAB' },
      { a: 'KAB', b: 'KAB', c: 'KAB' },
      {},
    ])
      expect(() => storedView('k', bytes(index(filters)), 'p'), JSON.stringify(filters)).toThrow(CorruptObjectError);
  });

  it('reads a view of hundreds of KiB (items parsed in runs) as parsed whole, and refuses it cut short', () => {
    const items = Array.from({ length: 4_000 }, (_, index) =>
      index % 2 === 0
        ? { type: 'message', role: 'user', content: [{ type: 'input_text', text: `},{"x":${index}}]` }] }
        : { type: 'function_call_output', call_id: `c${index}`, output: `[{"a":1},{"b":"é"}]`.repeat(4) },
    );
    const written = {
      format: 'tailgate.view.v1',
      v: VIEW_VERSION,
      policy: 'p',
      record: 2,
      last_seq: 4_000,
      aggregates: { tool_calls: 0, tool_outputs: 0, repeat_flags: '', repeated: {}, images: 0, image_order: '' },
      keys: { count: 0, depth: 0, versions: {}, counts: {} },
      tail: {
        from_seq: 1,
        window_start: 1,
        items: items.map((item, index) => ({ ...item, seq: index + 1, created_at: 'a' })),
      },
      created_at: 'a',
    };
    const text = JSON.stringify(written);
    const bytes = new TextEncoder().encode(text);
    expect(bytes.length).toBeGreaterThan(300 * 1024);
    expect(JSON.stringify(storedView('k', bytes, 'p'))).toBe(JSON.stringify(viewOf('k', JSON.parse(text))));
    const cut = bytes.subarray(0, bytes.length - 30);
    const reason = (read: () => unknown) => {
      try {
        return read();
      } catch (error) {
        return error instanceof CorruptObjectError ? error.reason : error;
      }
    };
    expect(reason(() => storedView('k', cut, 'p'))).toMatch(/^not UTF-8 JSON \(/);
    expect(reason(() => storedView('k', cut, 'p'))).toBe(reason(() => parseStored('k', cut, z.unknown())));
  });

  it('refuses what is not a view as the schema does, and ignores a view of another version or policy', () => {
    const bytes = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
    expect(() => storedView('k', bytes([1]), 'p')).toThrow(CorruptObjectError);
    expect(() => storedView('k', new TextEncoder().encode('{'), 'p')).toThrow(CorruptObjectError);
    expect(storedView('k', bytes({ v: VIEW_VERSION + 1, anything: 1 }), 'p')).toBeNull();
    expect(storedView('k', bytes({ v: VIEW_VERSION, policy: 'q' }), 'p')).toBeNull();
    expect(() => storedView('k', bytes({ v: VIEW_VERSION, policy: 'p', format: 'tailgate.view.v1' }), 'p')).toThrow(
      CorruptObjectError,
    );
  });
});

describe('keysAscending', () => {
  it('tells keys of 12 characters in ascending order as comparing their slices does (property)', () => {
    const sliced = (keys: string) => {
      for (let at = 12; at < keys.length; at += 12)
        if (keys.slice(at - 12, at) >= keys.slice(at, at + 12)) return false;
      return true;
    };
    const key = fc.string({ unit: fc.constantFrom('0', '1', 'f', 'é'), minLength: 10, maxLength: 12 });
    fc.assert(
      fc.property(fc.array(key, { maxLength: 5 }), (keys) => {
        const joined = keys.join('');
        expect(keysAscending(joined)).toBe(sliced(joined));
      }),
      { numRuns: 3000 },
    );
    expect(keysAscending('000000000000000000000001')).toBe(true);
    expect(keysAscending('000000000001000000000000')).toBe(false);
    expect(keysAscending('00000000000100000000000')).toBe(false);
  });
});

describe('storedViewChunk', () => {
  const message = (seq: number) => ({ type: 'message', role: 'user', content: `m${seq}`, seq, created_at: 'now' });
  const chunk = (seqs: number[], record = 3) =>
    new TextEncoder().encode(
      JSON.stringify({ format: 'tailgate.view-chunk.v1', record, items: seqs.map((seq) => message(seq)) }),
    );

  it('gives the items of a chunk of the record named, in seq order, and refuses anything else', () => {
    expect(storedViewChunk('k', chunk([1, 5, 9]), 3).map((item) => item.seq)).toEqual([1, 5, 9]);
    // Out of order or twice (a view dropping one of them would make a tail in order of it).
    expect(() => storedViewChunk('k', chunk([1, 9, 5]), 3)).toThrow(CorruptObjectError);
    expect(() => storedViewChunk('k', chunk([1, 5, 5]), 3)).toThrow(CorruptObjectError);
    // Another record's, another format, not JSON.
    expect(() => storedViewChunk('k', chunk([1, 5], 4), 3)).toThrow(CorruptObjectError);
    expect(() => storedViewChunk('k', new TextEncoder().encode('{"format":"x","record":3,"items":[]}'), 3)).toThrow(
      CorruptObjectError,
    );
    expect(() => storedViewChunk('k', new TextEncoder().encode('{'), 3)).toThrow(CorruptObjectError);
  });
});
