import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  callKey,
  callsBeforeImage,
  canonicalArguments,
  canonicalCall,
  computeAggregates,
  decodeRepeats,
  emptyAggregates,
  extendAggregates,
  historyAggregatesSchema,
  repeatFlagReader,
  repeatIndices,
} from '../../lib/strategies/aggregates.ts';
import { repeatsAmong } from '../../lib/strategies/epoch-plan.ts';
import { RepeatedCalls, repeatedSeqs } from '../../lib/history.ts';
import { indexHistory } from '../../lib/strategies/history-index.ts';
import type { PromptItem } from '../../lib/items.ts';
import { call, historyArbitrary, output, sequenced, user } from './history-fixtures.ts';

describe('aggregates', () => {
  it('counts calls and outputs, flags repeats and records the newest instance of each repeated call', () => {
    const items = sequenced([
      user('go'),
      call('1', 'read', '{"a":1,"b":2}'),
      output('1', 'x'),
      call('2', 'read', '{"b":2,"a":1}'),
      output('2', 'y'),
      call('3', 'write', '{}'),
      call('4', 'read', '{"a":1,"b":2}'),
      output('ghost', 'z'),
    ]);
    const aggregates = computeAggregates(items);
    expect(historyAggregatesSchema.parse(JSON.parse(JSON.stringify(aggregates)))).toEqual(aggregates);
    expect(aggregates).toMatchObject({
      tool_calls: 4,
      tool_outputs: 3,
      // Keyed by 12 hex characters of the call key, as the repeat index keys calls.
      repeated: { [callKey('read', '{"a":1,"b":2}').slice(0, 12)]: 7 },
    });
    const isRepeat = repeatFlagReader(aggregates);
    expect([0, 1, 2, 3, 4].map(isRepeat)).toEqual([false, true, false, true, false]);
    expect(repeatIndices(aggregates)).toEqual([1, 3]);
  });

  it('answers whether a range of calls holds a repeat as a look at every call would', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 0, max: 300 }), { size: 'max', maxLength: 40 }),
        fc.integer({ min: 0, max: 320 }),
        fc.integer({ min: 0, max: 40 }),
        (indices, from, length) => {
          const sorted = [...indices].sort((a, b) => a - b);
          const expected = sorted.some((index) => index >= from && index < from + length);
          expect(repeatsAmong(sorted)(from, from + length)).toBe(expected);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('lists the seqs of the newest instances of repeated calls ascending, each once (repeatedSeqs)', () => {
    fc.assert(
      fc.property(
        historyArbitrary,
        fc.dictionary(fc.string({ minLength: 1, maxLength: 3 }), fc.integer({ min: 1, max: 60 })),
        (items, extra) => {
          // The history's own map, and one with seqs shared by keys and out of order.
          for (const repeated of [computeAggregates(items).repeated, RepeatedCalls.of(extra)]) {
            const seqs = repeatedSeqs({ ...emptyAggregates(), repeated });
            const values = [...repeated.entries()].map(([, seq]) => seq);
            expect(seqs).toEqual([...new Set(values)].sort((a, b) => a - b));
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('extending step by step equals computing over the whole history', () => {
    fc.assert(
      fc.property(
        historyArbitrary,
        fc.array(fc.integer({ min: 1, max: 6 }), { maxLength: 12 }),
        (items, chunkSizes) => {
          const seen = new Set<string>();
          let aggregates = emptyAggregates();
          let start = 0;
          let chunk = 0;
          while (start < items.length) {
            const size = chunkSizes[chunk % Math.max(1, chunkSizes.length)] ?? 3;
            const batch = items.slice(start, start + size);
            const previous = JSON.parse(JSON.stringify(aggregates));
            const result = extendAggregates(aggregates, batch, (key) => seen.has(key));
            expect(aggregates).toEqual(previous);
            for (const key of result.newKeys) {
              expect(seen.has(key)).toBe(false);
              seen.add(key);
            }
            aggregates = result.aggregates;
            // The seqs kept for the new map (derived from the ones before) are those a walk of a copy gives.
            expect(repeatedSeqs(aggregates)).toEqual(RepeatedCalls.of(aggregates.repeated.toJSON()).seqs());
            // So are the repeats kept for the new flags (the ones before and the new), as decoded.
            expect(repeatIndices(aggregates)).toEqual(repeatIndices({ ...aggregates }));
            start += size;
            chunk += 1;
          }
          expect(aggregates).toEqual(computeAggregates(items));
        },
      ),
      { numRuns: 150 },
    );
  });

  it('takes the call keys the caller has for the new items, in order, instead of hashing each call again', () => {
    const items = sequenced([
      call('1', 'read', '{}'),
      output('1', 'x'),
      call('2', 'read', '{"a":1}'),
      user('go'),
      call('3', 'write', '{}'),
      call('4', 'read', '{"b":1}'),
      call('5', 'read', '{"a":1}'),
    ]);
    const previous = extendAggregates(emptyAggregates(), items.slice(0, 2), () => false).aggregates;
    const batch = items.slice(2);
    const given = extendAggregates(previous, batch, () => false, ['k', 'j', 'k', 'i']);
    expect(given.newKeys).toEqual(['k', 'j', 'i']);
    expect(given.aggregates.repeated).toEqual({ k: 6 });
    const keys = batch.flatMap((item) => (item.type === 'function_call' ? [callKey(item.name, item.arguments)] : []));
    expect(extendAggregates(previous, batch, () => false, keys)).toEqual(
      extendAggregates(previous, batch, () => false),
    );
  });

  it('derives the seqs of a changed repeated map from the ones before: repeats added, replaced instances gone', () => {
    // Calls of a few paths, each seen up to five times, across batches and within one.
    const paths = ['a', 'b', 'a', 'c', 'a', 'b', 'a', 'a', 'c', 'b', 'd', 'd'];
    const items = sequenced(paths.map((path, index) => call(`c${index}`, 'read', JSON.stringify({ path }))));
    const seen = new Set<string>();
    let aggregates = emptyAggregates();
    for (const [from, to] of [
      [0, 3],
      [3, 5],
      [5, 8],
      [8, 12],
    ] as const) {
      repeatedSeqs(aggregates);
      const result = extendAggregates(aggregates, items.slice(from, to), (key) => seen.has(key));
      for (const key of result.newKeys) seen.add(key);
      aggregates = result.aggregates;
      // Equal to a walk of a copy.
      expect(repeatedSeqs(aggregates)).toEqual(RepeatedCalls.of({ ...aggregates.repeated.toJSON() }).seqs());
    }
    expect(repeatedSeqs(aggregates)).toEqual([8, 9, 10, 12]);
  });

  it('derives the seqs of the repeated map it extends by new repeats without a walk of the map', () => {
    // A map whose keys count their walks (a lookup of one key is no walk).
    let walks = 0;
    const entries = new Proxy({ aaaaaaaaaaaa: 1, bbbbbbbbbbbb: 2 } as Record<string, number>, {
      ownKeys: (target) => {
        walks += 1;
        return Reflect.ownKeys(target);
      },
    });
    const previous = { ...emptyAggregates(), repeated: RepeatedCalls.of(entries) };
    // Seqs 3 and 4: one key repeated twice, its newest instance kept.
    const items = sequenced(['1', '2', '3', '4'].map((id) => call(id, 'read', '{}'))).slice(2);
    const extended = extendAggregates(previous, items, () => true).aggregates;
    expect(repeatedSeqs(extended)).toEqual([1, 2, 4]);
    expect(walks).toBe(1);
  });

  it('keeps the repeated calls and the bit arrays of the history it extends when the new items change neither', () => {
    const items = sequenced([call('1', 'read', '{}'), output('1', 'x'), call('2', 'read', '{}'), user('go')]);
    const previous = extendAggregates(emptyAggregates(), items.slice(0, 3), () => false).aggregates;
    // A message: nothing of a long history's tens of thousands of repeated keys is copied or encoded again.
    const extended = extendAggregates(previous, items.slice(3), () => true).aggregates;
    expect(extended.repeated).toBe(previous.repeated);
    expect(extended).toEqual(previous);
    // A new call that repeats nothing: the map stays, the flags grow by a clear bit.
    const next = sequenced([...items, call('3', 'write', '{}')]);
    const called = extendAggregates(previous, next.slice(3), (key) => key === callKey('read', '{}')).aggregates;
    expect(called.repeated).toBe(previous.repeated);
    expect(called).toEqual(computeAggregates(next));
  });

  it('holds no image order while the history has no image, and the order of every call once one comes', () => {
    const calls = sequenced([call('1', 'read', '{}'), output('1', 'x'), call('2', 'read', '{"a":1}'), user('go')]);
    // A long agent's history without images: a bit per call, every one set, is not kept.
    const none = computeAggregates(calls);
    expect(none.image_order).toBe('');
    const image: PromptItem = { type: 'message', role: 'user', content: [{ type: 'input_image', image_url: 'u' }] };
    const all = sequenced([...calls, image, call('3', 'read', '{}')]);
    const seen = (key: string) => key === callKey('read', '{}');
    const extended = extendAggregates(none, all.slice(calls.length), seen).aggregates;
    expect(extended).toEqual(computeAggregates(all));
    expect(callsBeforeImage(extended, 1)).toBe(2);
  });

  it('carries the split of `repeated` to the entries a repeat adds, which are newer than it', () => {
    const items = sequenced([call('1', 'read', '{}'), output('1', 'x'), call('2', 'read', '{}')]);
    const split = {
      ...computeAggregates(items.slice(0, 2)),
      repeated: RepeatedCalls.EMPTY,
      repeated_older: { before_seq: 2, record: 1 },
    };
    const extended = extendAggregates(split, items.slice(2), (key) => key === callKey('read', '{}')).aggregates;
    expect(extended).toEqual({ ...computeAggregates(items), repeated_older: { before_seq: 2, record: 1 } });
  });

  it('decodes the repeat flags of one aggregates object once, however often a turn asks', () => {
    const items = sequenced([call('1', 'read', '{}'), output('1', 'x'), call('2', 'read', '{}')]);
    const aggregates = computeAggregates(items);
    expect(repeatIndices(aggregates)).toEqual([1]);
    expect(repeatIndices(aggregates)).toBe(repeatIndices(aggregates));
    expect([0, 1, 2, -1].map(repeatFlagReader(aggregates))).toEqual([false, true, false, false]);
  });

  it('decodes sparse flags extending ones decoded before (any session, any order) as decoded whole (property)', () => {
    const digit = fc.constantFrom(...'ABCZaf', ...'ghz09-_', '~', '=', '!', 'é');
    // Chains of flags each extending the one before, as a session's views do, taken interleaved.
    const chains = fc.array(fc.array(fc.string({ unit: digit, maxLength: 12 }), { minLength: 1, maxLength: 5 }), {
      minLength: 1,
      maxLength: 12,
    });
    fc.assert(
      fc.property(chains, fc.array(fc.nat()), (parts, picks) => {
        const texts = parts.map((chain) => chain.map((_, end) => `~${chain.slice(0, end + 1).join('')}`));
        const next = texts.map(() => 0);
        const order = [...picks, ...texts.flatMap((chain, index) => chain.map(() => index))];
        const given: { text: string; indices: readonly number[] }[] = [];
        for (const pick of order) {
          const chain = pick % texts.length;
          const text = texts[chain]![next[chain]!];
          if (text === undefined) continue;
          next[chain]! += 1;
          // A fresh copy of the aggregates and of the text, as a view read again gives them.
          const aggregates = { ...emptyAggregates(), repeat_flags: ` ${text}`.slice(1) };
          const indices = repeatIndices(aggregates);
          expect(indices).toEqual(decodeRepeats(text));
          given.push({ text, indices });
        }
        // None changed since: a later one decoded on from it copied it.
        for (const { text, indices } of given) expect(indices).toEqual(decodeRepeats(text));
      }),
      { numRuns: 300 },
    );
  });

  it('writes sparse repeat flags as the gaps between them, dense ones as a bit per call, whichever is shorter', () => {
    const history = (calls: number, repeats: ReadonlySet<number>) =>
      sequenced(
        Array.from({ length: calls }, (_, index) =>
          call(`c${index}`, 'read', repeats.has(index) ? '{}' : `{"n":${index}}`),
        ),
      );
    const base64Length = (calls: number) => Math.ceil(Math.ceil(calls / 8) / 3) * 4;
    // A few repeats among 3,000 calls, gaps of one, two and three digits: the gaps.
    const sparse = new Set([0, 1, 40, 1_100, 2_999]);
    const rare = computeAggregates(history(3_000, sparse));
    expect(rare.repeat_flags).toMatch(/^~/);
    expect(rare.repeat_flags).toHaveLength(10);
    expect(repeatIndices(rare)).toEqual([1, 40, 1_100, 2_999]);
    // Every other call a repeat: a bit per call.
    const dense = new Set(Array.from({ length: 150 }, (_, index) => 2 * index));
    const often = computeAggregates(history(300, dense));
    expect(often.repeat_flags).toHaveLength(base64Length(300));
    expect(repeatIndices(often)).toEqual([...dense].slice(1));
    // Extended across the switch, as computed whole.
    const items = history(400, new Set([...dense, 350]));
    const extended = extendAggregates(often, items.slice(300), (key) => key === callKey('read', '{}')).aggregates;
    expect(extended).toEqual(computeAggregates(items));
  });

  it('appends the gaps to new repeats to sparse flags, batch after batch, as computed whole', () => {
    const repeats = new Set([3, 700, 701, 1_500, 2_100, 2_101, 2_900, 4_000, 4_095]);
    const items = sequenced(
      Array.from({ length: 4_096 }, (_, index) =>
        call(`c${index}`, 'read', repeats.has(index) ? '{}' : `{"n":${index}}`),
      ),
    );
    const seen = new Set<string>();
    let aggregates = emptyAggregates();
    for (let start = 0; start < items.length; start += 250) {
      const result = extendAggregates(aggregates, items.slice(start, start + 250), (key) => seen.has(key));
      for (const key of result.newKeys) seen.add(key);
      aggregates = result.aggregates;
      expect(aggregates.repeat_flags).toMatch(/^~/);
      expect(aggregates).toEqual(computeAggregates(items.slice(0, start + 250)));
    }
    expect(repeatIndices(aggregates)).toEqual([...repeats].filter((index) => index > 3).sort((a, b) => a - b));
  });

  it('extends dense flags batch after batch, at any call count, as computed whole (property)', () => {
    // Mostly repeats (dense flags), in batches that end anywhere within a byte and a base64 group.
    const scenario = fc.record({
      calls: fc.integer({ min: 1, max: 700 }),
      rare: fc.integer({ min: 2, max: 9 }),
      batches: fc.array(fc.integer({ min: 1, max: 90 }), { minLength: 1, maxLength: 20 }),
    });
    fc.assert(
      fc.property(scenario, ({ calls, rare, batches }) => {
        const items = sequenced(
          Array.from({ length: calls }, (_, index) =>
            call(`c${index}`, 'read', index % rare === 0 ? `{"n":${index}}` : '{}'),
          ),
        );
        const seen = new Set<string>();
        let aggregates = emptyAggregates();
        let start = 0;
        for (let batch = 0; start < items.length; batch += 1) {
          const size = batches[batch % batches.length]!;
          const result = extendAggregates(aggregates, items.slice(start, start + size), (key) => seen.has(key));
          for (const key of result.newKeys) seen.add(key);
          aggregates = result.aggregates;
          start += size;
          const whole = computeAggregates(items.slice(0, start));
          expect(aggregates.repeat_flags).toBe(whole.repeat_flags);
          expect(repeatIndices(aggregates)).toEqual(repeatIndices({ ...whole }));
        }
      }),
      { numRuns: 200 },
    );
  });

  it('extends flags without walking the repeats before: an extension adding none leaves them unread', () => {
    // Sparse flags: a repeat every 40 calls.
    const items = sequenced(
      Array.from({ length: 4001 }, (_, index) =>
        call(`c${index}`, 'read', index % 40 === 39 ? '{"same":true}' : `{"n":${index}}`),
      ),
    );
    const seen = new Set<string>();
    const step = (previous: ReturnType<typeof emptyAggregates>, batch: typeof items) => {
      const result = extendAggregates(previous, batch, (key) => seen.has(key));
      for (const key of result.newKeys) seen.add(key);
      return result.aggregates;
    };
    const second = step(step(emptyAggregates(), items.slice(0, 3998)), items.slice(3998, 4000));
    expect(second.repeat_flags.startsWith('~')).toBe(true);
    // Count the walks of the repeats of `second`.
    const held = repeatIndices(second) as number[];
    let walked = 0;
    const iterate = Array.prototype[Symbol.iterator];
    Object.defineProperty(held, Symbol.iterator, {
      value(this: number[]) {
        walked += 1;
        return iterate.call(this);
      },
    });
    const third = step(second, items.slice(4000));
    expect(third.repeat_flags).toBe(second.repeat_flags);
    expect(walked).toBe(0);
  });

  it('canonicalizes arguments exactly as a recursive sorted-key copy would, whatever the key order', () => {
    const referenceSort = (value: unknown): unknown => {
      if (Array.isArray(value)) return value.map(referenceSort);
      if (value !== null && typeof value === 'object') {
        const sorted: Record<string, unknown> = {};
        for (const key of Object.keys(value).sort())
          sorted[key] = referenceSort((value as Record<string, unknown>)[key]);
        return sorted;
      }
      return value;
    };
    const reversed = (value: unknown): unknown => {
      if (Array.isArray(value)) return value.map(reversed);
      if (value !== null && typeof value === 'object') {
        const copy: Record<string, unknown> = {};
        for (const key of Object.keys(value).reverse()) {
          Object.defineProperty(copy, key, {
            value: reversed((value as Record<string, unknown>)[key]),
            enumerable: true,
            writable: true,
            configurable: true,
          });
        }
        return copy;
      }
      return value;
    };
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = JSON.stringify(value);
        expect(canonicalArguments(text)).toBe(JSON.stringify(referenceSort(JSON.parse(text))));
        expect(canonicalArguments(JSON.stringify(reversed(JSON.parse(text))))).toBe(canonicalArguments(text));
        expect(callKey('tool', text)).toBe(callKey('tool', JSON.stringify(reversed(JSON.parse(text)))));
      }),
      { numRuns: 200 },
    );
    expect(canonicalCall('read', 'not json')).toBe('read\nraw:not json');
    expect(canonicalArguments('{"b":1, "a":[{"d":1,"c":2}]}')).toBe('{"a":[{"c":2,"d":1}],"b":1}');
  });

  it('finds the same repeats and protected calls on a full history as the call keys of the aggregates', () => {
    const reordered = (value: unknown): unknown => {
      if (Array.isArray(value)) return value.map(reordered);
      if (value !== null && typeof value === 'object') {
        const copy: Record<string, unknown> = {};
        for (const key of Object.keys(value).reverse()) {
          Object.defineProperty(copy, key, {
            value: reordered((value as Record<string, unknown>)[key]),
            enumerable: true,
            writable: true,
            configurable: true,
          });
        }
        return copy;
      }
      return value;
    };
    // A few values, each written several ways (key order, whitespace, escapes), plus raw text.
    const variants = fc.array(fc.jsonValue({ maxDepth: 3 }), { minLength: 1, maxLength: 4 }).map((values) =>
      values.flatMap((value) => {
        const text = JSON.stringify(value);
        return [
          text,
          JSON.stringify(reordered(value)),
          JSON.stringify(value, null, 2),
          text.replace(/a/g, '\\u0061'),
          `raw ${text}`,
        ];
      }),
    );
    fc.assert(
      fc.property(
        variants,
        fc.array(fc.tuple(fc.nat(), fc.constantFrom('x', 'y')), { minLength: 1, maxLength: 25 }),
        (texts, picks) => {
          const items: PromptItem[] = picks.flatMap(([pick, name], index) => [
            call(`c${index}`, name, texts[pick % texts.length]!),
            output(`c${index}`, 'ok'),
          ]);
          const history = sequenced(items);
          const aggregates = computeAggregates(history);
          const fromAggregates = repeatFlagReader(aggregates);
          const { history: index } = indexHistory(history);
          const protectedSeqs = new Set(aggregates.repeated.seqs());
          const calls = history.filter((item) => item.type === 'function_call');
          const { history: viaAggregates } = indexHistory(history, aggregates);
          calls.forEach((item, position) => {
            expect(index.isRepeat(position)).toBe(fromAggregates(position));
            expect(index.repeatsIn(position, position + 1)).toBe(fromAggregates(position));
            expect(viaAggregates.repeatsIn(0, position + 1)).toBe(index.repeatsIn(0, position + 1));
            expect(index.infoOf(item)!.protected).toBe(protectedSeqs.has(item.seq));
          });
        },
      ),
      { numRuns: 200 },
    );
  });
});
