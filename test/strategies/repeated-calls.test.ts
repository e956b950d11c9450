import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RepeatedCalls } from '../../lib/repeated-calls.ts';
import { layoutView, viewBody } from '../../lib/session/log/view-chunks.ts';
import { VIEW_VERSION, type LogView } from '../../lib/session/view-records.ts';
import { bodyBytes } from '../../lib/store/object-store.ts';

/**
 * Keys of a few characters (so changes meet keys already there); none an array index, which a
 * plain object orders first (a call key, 12 hex characters, never is one).
 */
const key = fc
  .oneof(fc.constantFrom('a', 'b', '012'), fc.string({ minLength: 1, maxLength: 2 }))
  .filter((name) => !/^(0|[1-9][0-9]*)$/.test(name));
/** Batches of changes, their seqs rising across batches as a history's repeats do. */
const batches = fc.array(fc.array(key, { size: 'max', maxLength: 80 }), { maxLength: 12 });

/** What a plain object updated in place gives: the reference for every map. */
function reference(base: Record<string, number>, changes: [string, number][][]): Record<string, number>[] {
  const states: Record<string, number>[] = [];
  let current = JSON.parse(JSON.stringify(base)) as Record<string, number>;
  for (const batch of changes) {
    current = JSON.parse(JSON.stringify(current));
    for (const [name, seq] of batch)
      Object.defineProperty(current, name, { value: seq, enumerable: true, writable: true, configurable: true });
    states.push(current);
  }
  return states;
}

function seqsOf(entries: Record<string, number>): number[] {
  return [...new Set(Object.values(entries))].sort((a, b) => a - b);
}

describe('RepeatedCalls', () => {
  it('extended batch by batch, is the plain object updated in place: entries, order, JSON, lookups and seqs', () => {
    fc.assert(
      fc.property(fc.dictionary(key, fc.integer({ min: 1, max: 50 }), { maxKeys: 40 }), batches, (entries, keys) => {
        const text = JSON.stringify(entries);
        const base = RepeatedCalls.checked(JSON.parse(text))!;
        expect(base.json()).toBe(text);
        let seq = 50;
        const changes = keys.map((batch) => batch.map((name) => [name, ++seq] as [string, number]));
        const expected = reference(JSON.parse(text), changes);
        let map = base;
        for (const [index, batch] of changes.entries()) {
          const before = map.json();
          map = map.with(batch, index % 2 === 0);
          const want = expected[index]!;
          // The map before is as it was.
          expect(base.json()).toBe(text);
          expect(JSON.stringify([...map.entries()])).toBe(JSON.stringify(Object.entries(want)));
          expect(map.json()).toBe(JSON.stringify(want));
          expect(JSON.stringify(map)).toBe(JSON.stringify(want));
          expect(map.size).toBe(Object.keys(want).length);
          expect(map.seqs()).toEqual(seqsOf(want));
          for (const name of [...Object.keys(want), 'absent']) expect(map.get(name)).toBe(want[name]);
          if (batch.length === 0) expect(map.json()).toBe(before);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('flattens its changes into a new base once they are many, entries and JSON unchanged', () => {
    let map = RepeatedCalls.of({ x: 1 });
    const want: Record<string, number> = { x: 1 };
    // One change at a time, 2,000 of them, a third of them to keys already there.
    for (let seq = 2; seq <= 2_001; seq++) {
      const name = seq % 3 === 0 ? `k${seq % 97}` : `n${seq}`;
      map = map.with([[name, seq]], true);
      want[name] = seq;
    }
    expect(map.json()).toBe(JSON.stringify(want));
    expect(map.seqs()).toEqual(seqsOf(want));
    expect(map.size).toBe(Object.keys(want).length);
  });

  it('derives the seqs of an extension by newer seqs from its own, without a walk of its entries', () => {
    // A base that counts the walks of its keys (`for...in` asks for them; a lookup of one key does not).
    let walks = 0;
    const entries = { aaa: 3, bbb: 5, ccc: 7 };
    const base = new Proxy(entries, {
      ownKeys: (target) => {
        walks += 1;
        return Reflect.ownKeys(target);
      },
    });
    const map = RepeatedCalls.of(base);
    expect(walks).toBe(1);
    // New keys, a key of the base changed, a new key changed twice in the batch.
    const next = map.with(
      [
        ['ddd', 10],
        ['bbb', 11],
        ['eee', 12],
        ['eee', 13],
      ],
      true,
    );
    expect(next.seqs()).toEqual([3, 7, 10, 11, 13]);
    expect(next.with([['aaa', 20]], true).seqs()).toEqual([7, 10, 11, 13, 20]);
    expect(walks).toBe(1);
    // Without `newer`, or from a map whose seqs are not known yet, they are a walk's.
    expect(map.with([['fff', 1]]).seqs()).toEqual([1, 3, 5, 7]);
    expect(walks).toBe(2);
  });

  it('keeps at most max(256, an eighth of its size) changes on top of its base', () => {
    let map = RepeatedCalls.of({ x: 1 });
    let flattenings = 0;
    for (let seq = 2; seq <= 2_001; seq++) {
      const before = map.unflattened;
      map = map.with([[seq % 3 === 0 ? `k${seq % 97}` : `n${seq}`, seq]], true);
      if (map.unflattened === 0) flattenings += 1;
      else expect(map.unflattened).toBeGreaterThanOrEqual(before);
      expect(map.unflattened).toBeLessThanOrEqual(Math.max(256, map.size / 8));
    }
    expect(flattenings).toBeGreaterThanOrEqual(7);
  });

  it('compares by its entries in toEqual, whatever their order, and not by its size', () => {
    const map = RepeatedCalls.of({ aaa: 3, bbb: 5 });
    expect(map).toEqual(RepeatedCalls.of({ bbb: 5 }).with([['aaa', 3]]));
    expect(map).toEqual({ bbb: 5, aaa: 3 });
    expect(map).not.toEqual(RepeatedCalls.of({ aaa: 3, ccc: 5 }));
    expect({ repeated: map }).not.toEqual({ repeated: RepeatedCalls.of({ aaa: 4, bbb: 5 }) });
  });

  it('takes a map read back only when every own key maps to a positive safe integer and none is __proto__', () => {
    expect(RepeatedCalls.checked({ a: 1, b: 2 })?.seqs()).toEqual([1, 2]);
    for (const refused of [
      JSON.parse('{"__proto__":1}'),
      { a: 0 },
      { a: -1 },
      { a: 1.5 },
      { a: '1' },
      { a: 2 ** 53 },
      Object.create({ inherited: 1 }),
    ])
      expect(RepeatedCalls.checked(refused), JSON.stringify(refused)).toBeNull();
    expect(() => RepeatedCalls.of({ a: 0 })).toThrow(TypeError);
    expect(() => RepeatedCalls.EMPTY.with([['__proto__', 1]])).toThrow(TypeError);
  });

  it('stands in a view as its JSON, where the view keeps its keys in order', () => {
    const repeated = RepeatedCalls.of({ aaa: 3, bbb: 5 }).with([
      ['aaa', 9],
      ['ccc', 10],
    ]);
    const view = {
      format: 'tailgate.view.v1',
      v: VIEW_VERSION,
      policy: 'p',
      record: 2,
      last_seq: 10,
      aggregates: { tool_calls: 6, tool_outputs: 6, repeat_flags: '', repeated, images: 0, image_order: '' },
      keys: { count: 0, depth: 0, versions: {}, counts: {} },
      tail: null,
      created_at: '2026-01-01T00:00:00.000Z',
    } as LogView;
    const body = new TextDecoder().decode(
      bodyBytes(viewBody(view, layoutView({ keyPrefix: '', id: 's', generation: 'g' }, view, undefined, 1e9))),
    );
    expect(body).toBe(JSON.stringify(view));
    expect(JSON.parse(body).aggregates.repeated).toEqual({ aaa: 9, bbb: 5, ccc: 10 });
  });
});
