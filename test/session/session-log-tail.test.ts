import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Item, PromptItem, StoredItem } from '../../lib/items.ts';
import { SessionLog } from '../support/session-log.ts';
import { logContext } from '../../lib/session/log/context.ts';
import { readTail } from '../../lib/session/log/tail-reader.ts';
import { logCursor } from '../../lib/session/unit-cursor.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { computeAggregates } from '../../lib/strategies/aggregates.ts';
import { compactCallItem, compactOutputItem } from '../../lib/strategies/compact-text.ts';
import { selectTail } from '../../lib/strategies/select-tail.ts';
import type { TailRequirement } from '../../lib/strategies/strategy.ts';

/**
 * The store's side of the strategies' invariant: for any history written record by record
 * (appends and model turns, packed into segments and views at random points, large outputs out
 * of line in segments and in views),
 * the tail view read from storage equals `selectTail(full history, requirement)`, and the
 * aggregates handed out equal `computeAggregates(full history)`.
 */

const BLOB_THRESHOLD = 40;

type Step = { kind: 'append' | 'turn'; input: ItemSpec[]; output: ItemSpec[]; pack: boolean };
type ItemSpec =
  | { kind: 'message'; role: 'user' | 'assistant'; length: number }
  | { kind: 'call'; name: number; args: number }
  | { kind: 'output'; length: number };

const itemSpec: fc.Arbitrary<ItemSpec> = fc.oneof(
  fc.record({
    kind: fc.constant('message' as const),
    role: fc.constantFrom('user' as const, 'assistant' as const),
    length: fc.nat(30),
  }),
  fc.record({ kind: fc.constant('call' as const), name: fc.nat(2), args: fc.nat(2) }),
  // Short, above the blob threshold, and above what the strategies compact outputs to.
  fc.record({
    kind: fc.constant('output' as const),
    length: fc.oneof(fc.nat(20), fc.integer({ min: 41, max: 120 }), fc.integer({ min: 500, max: 900 })),
  }),
);
const step: fc.Arbitrary<Step> = fc.record({
  kind: fc.constantFrom('append' as const, 'turn' as const),
  // Now and then a bulk append, so segments span several blocks of the tool index.
  input: fc.oneof(
    { weight: 4, arbitrary: fc.array(itemSpec, { minLength: 1, maxLength: 4 }) },
    { weight: 1, arbitrary: fc.array(itemSpec, { minLength: 30, maxLength: 90 }) },
  ),
  output: fc.array(itemSpec, { maxLength: 3 }),
  pack: fc.boolean(),
});
const requirement = fc.record({
  toolCalls: fc.oneof(fc.constant('all' as const), fc.nat(6), fc.constant(1000)),
  seqFractions: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 4 }),
  wholeCalls: fc.option(fc.nat(4), { nil: undefined }),
});
const layout = fc.record({
  packMinRecords: fc.integer({ min: 1, max: 3 }),
  keepRecords: fc.integer({ min: 1, max: 2 }),
  segmentTargetBytes: fc.constantFrom(200, 2000, 1 << 20),
  recentRecords: fc.nat(4),
  recentBytes: fc.constantFrom(100, 1 << 20),
  viewEveryRecords: fc.integer({ min: 1, max: 4 }),
  // Views in chunks (of a few items) or whole.
  viewChunkBytes: fc.constantFrom(1, 300, 1 << 30),
});
/**
 * What `pack` is told the strategies need: the tail its views hold (null: its default). With
 * an epoch, the need (and the whole calls) grows by 2 with each call and falls back at the
 * epoch's end (as the epoch strategies' does), so a view's window often falls short of the
 * next one's, or holds compacted what must be whole now, and is read again from the log.
 */
const viewNeeds = fc.option(
  fc.record({ toolCalls: fc.nat(6), wholeCalls: fc.nat(3), epoch: fc.constantFrom(0, 5, 9) }),
  { nil: undefined },
);

/** Turns specs into items: call ids are unique; outputs answer the oldest unanswered call. */
/**
 * With `state.reuse`, a call takes the smallest id no open call holds, as a session may use an
 * id again once its call is answered.
 */
function materialize(
  specs: ItemSpec[],
  state: { calls: number; open: string[]; counter: number; reuse: boolean },
): Item[] {
  return specs.map((spec) => {
    state.counter += 1;
    if (spec.kind === 'message')
      return { type: 'message', role: spec.role, content: `m${state.counter}-${'é'.repeat(spec.length)}` };
    if (spec.kind === 'call') {
      let id = `call_${state.calls++}`;
      if (state.reuse) {
        let k = 0;
        while (state.open.includes(`again_${k}`)) k += 1;
        id = `again_${k}`;
      }
      state.open.push(id);
      // args 2: a string value long enough for the strategies to compact.
      return {
        type: 'function_call',
        call_id: id,
        name: `tool${spec.name}`,
        arguments: JSON.stringify({ a: spec.args, ...(spec.args === 2 ? { text: 'y'.repeat(250) } : {}) }),
      };
    }
    // An output without an open call cannot be stored: a message stands in for it.
    const id = state.open.shift();
    if (id === undefined) return { type: 'message', role: 'user', content: `m${state.counter}` };
    return { type: 'function_call_output', call_id: id, output: `o${state.counter}:${'x'.repeat(spec.length)}` };
  });
}

const strip = (items: readonly PromptItem[]) => items.map(({ created_at: _created, ...rest }) => rest);

/**
 * `expected` as a read may hand it out: a tool item outside the requirement's whole calls (the
 * newest `wholeCalls` calls and the required seqs) may come as the strategies compact it,
 * from a view. Checks that only such items come compacted.
 */
function asRead(
  expected: readonly PromptItem[],
  read: readonly PromptItem[],
  requirement: TailRequirement,
): PromptItem[] {
  // The seqs of the whole calls; an output goes with the latest call before it with its id.
  const whole = new Set<number>();
  let calls = 0;
  for (let index = expected.length - 1; index >= 0; index--) {
    const item = expected[index]!;
    if (item.type !== 'function_call') continue;
    calls += 1;
    if (calls <= (requirement.wholeCalls ?? Number.POSITIVE_INFINITY) || requirement.seqs.includes(item.seq!))
      whole.add(item.seq!);
  }
  const callSeq = new Map<string, number>();
  const pairedSeq = expected.map((item) => {
    if (item.type === 'function_call') callSeq.set(item.call_id, item.seq!);
    return item.type === 'message' ? undefined : callSeq.get(item.call_id);
  });
  return expected.map((item, index) => {
    if (!read[index]?.compacted || item.type === 'message') return item;
    expect(whole.has(pairedSeq[index] ?? -1)).toBe(false);
    return item.type === 'function_call' ? compactCallItem(item) : compactOutputItem(item);
  });
}

describe('SessionLog tail reads match selectTail on the full history', () => {
  it('readContext, hydrate and the aggregates equal the reference, with and without segments', async () => {
    let compactedReads = 0;
    // A batch of 150 runs reads a compacted item about 5 times on average, and now and then not
    // once: batches run (at most 4) until one did, so the check below is not left to chance.
    for (let batch = 0; batch < 4 && compactedReads === 0; batch++)
      await fc.assert(
        fc.asyncProperty(
          fc.array(step, { minLength: 1, maxLength: 10 }),
          fc.array(itemSpec, { minLength: 1, maxLength: 3 }),
          requirement,
          layout,
          viewNeeds,
          fc.boolean(),
          async (steps, finalInput, wanted, options, needs, reuse) => {
            const store = new MemoryStore();
            const log = new SessionLog(store, { blobThreshold: BLOB_THRESHOLD, ...options });
            await log.create({ id: 's' });
            const state = { calls: 0, open: [] as string[], counter: 0, reuse };
            const full: StoredItem[] = [];
            for (const { kind, input, output, pack } of steps) {
              if (kind === 'append') {
                const items = materialize(input, state);
                const { first_seq } = await log.append('s', items);
                full.push(
                  ...items.map((item, index) => ({ ...item, seq: first_seq + index, created_at: '' }) as StoredItem),
                );
              } else {
                const begun = await log.beginTurn('s', { input: materialize(input, state) });
                if (begun.kind !== 'claimed') throw new Error('expected a claim');
                full.push(...begun.turn.input);
                full.push(
                  ...(await log.completeTurn(begun.turn, {
                    status: 'completed',
                    output: materialize(output, state),
                    receipt: {},
                  })),
                );
              }
              if (!pack) continue;
              await log.pack(
                's',
                needs
                  ? {
                      requirement: (aggregates) => {
                        const growth = needs.epoch ? 2 * (aggregates.tool_calls % needs.epoch) : 0;
                        const toolCalls = needs.toolCalls + growth;
                        return { toolCalls, wholeCalls: Math.min(toolCalls, needs.wholeCalls + growth), seqs: [] };
                      },
                    }
                  : {},
              );
            }
            const begun = await log.beginTurn('s', { input: materialize(finalInput, state) });
            if (begun.kind !== 'claimed') throw new Error('expected a claim');
            const turn = begun.turn;
            full.push(...turn.input);
            expect(full.map((item) => item.seq)).toEqual(full.map((_, index) => index + 1));
            expect(turn.aggregates).toEqual(computeAggregates(full));

            const calls = full.filter((item) => item.type === 'function_call').map((item) => item.seq);
            const seqs = [
              ...new Set(
                wanted.seqFractions
                  .map((fraction) => calls[Math.floor(fraction * calls.length)])
                  .filter((seq): seq is number => seq !== undefined),
              ),
            ];
            const tailRequirement: TailRequirement = {
              toolCalls: wanted.toolCalls,
              seqs,
              ...(wanted.wholeCalls !== undefined && wanted.toolCalls !== 'all'
                ? { wholeCalls: Math.min(wanted.wholeCalls, wanted.toolCalls) }
                : {}),
            };
            const expected = selectTail(full, tailRequirement);
            const { items: view } = await log.readContext(turn, tailRequirement);
            if (view.some((item) => item.compacted)) compactedReads += 1;
            for (const item of view) {
              if (item.type !== 'function_call_output' || item.compacted) continue;
              const original = full[item.seq! - 1] as StoredItem & { type: 'function_call_output' };
              // Large outputs may come out of line (from a segment or a view), with their preview.
              if (item.output_ref) {
                expect(new TextEncoder().encode(original.output as string).length).toBeGreaterThan(BLOB_THRESHOLD);
                expect(item.output).toBe('');
                expect(item.output_ref).toMatchObject({ length: original.output.length });
              } else expect(item.output).toBe(original.output);
            }
            expect(strip(await log.hydrate(await log.scope('s'), view))).toEqual(
              strip(asRead(expected, view, tailRequirement)),
            );

            // The preview reads the committed history the same way.
            const preview = await log.previewContext('s', () => tailRequirement);
            expect(preview.aggregates).toEqual(computeAggregates(full));
            expect(strip(await log.hydrate(preview.scope, preview.items))).toEqual(
              strip(asRead(expected, preview.items, tailRequirement)),
            );
          },
        ),
        { numRuns: 150 },
      );
    // Some runs read a view holding compacted items (the generators make it common).
    expect(compactedReads).toBeGreaterThan(0);
  });

  it('finds the output of a required call packed in a newer segment than the call', async () => {
    await expectLateAnswerFound('early');
  });

  it.each(['constructor', '__proto__', 'toString', 'hasOwnProperty'])(
    'finds it for call id %s, a property of every object',
    async (id) => {
      await expectLateAnswerFound(id);
    },
  );
});

/** A call answered two records later, each record packed on its own: its output is an orphan of a newer segment. */
async function expectLateAnswerFound(id: string) {
  const store = new MemoryStore();
  const log = new SessionLog(store, {
    packMinRecords: 1,
    keepRecords: 1,
    segmentTargetBytes: 1,
    recentRecords: 0,
  });
  await log.create({ id: 's' });
  const steps: Item[][] = [
    [{ type: 'function_call', call_id: id, name: 'ls', arguments: '{}' }],
    [{ type: 'message', role: 'user', content: 'between' }],
    // The output, with a call and its output after it in its segment: a cut between them leaves
    // the output below the cut, found through the segment's orphans.
    [
      { type: 'function_call_output', call_id: id, output: 'late answer' },
      { type: 'function_call', call_id: 'c2', name: 'cat', arguments: '{}' },
      { type: 'function_call_output', call_id: 'c2', output: 'x' },
    ],
    [{ type: 'message', role: 'user', content: 'after' }],
  ];
  const full: StoredItem[] = [];
  for (const items of steps) {
    const { first_seq } = await log.append('s', items);
    full.push(...items.map((item, index) => ({ ...item, seq: first_seq + index, created_at: '' }) as StoredItem));
    await log.pack('s');
  }
  const begun = await log.beginTurn('s', { input: [{ type: 'message', role: 'user', content: 'now' }] });
  if (begun.kind !== 'claimed') throw new Error('expected a claim');
  full.push(...begun.turn.input);
  for (const requirement of [
    { toolCalls: 1, seqs: [1] },
    { toolCalls: 2, seqs: [1] },
    { toolCalls: 0, seqs: [1, 4] },
  ]) {
    const { items: view } = await log.readContext(begun.turn, requirement);
    expect(strip(view)).toEqual(strip(selectTail(full, requirement)));
    expect(view.some((item) => item.type === 'function_call_output' && item.call_id === id)).toBe(true);
    // The walk of the log on its own (as past a view), through the segments.
    const walked = await readTail(
      logContext(store, { viewPolicy }),
      begun.turn.scope,
      [],
      logCursor(store, begun.turn.scope),
      requirement,
    );
    expect(strip(walked)).toEqual(strip(selectTail(full, requirement)));
  }
}
