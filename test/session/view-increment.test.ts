import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { type HistoryAggregates, repeatedSeqs } from '../../lib/history.ts';
import { viewBuilds } from '../../lib/session/log/view-increment.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';
import { SessionLog, type ViewPolicy } from '../support/session-log.ts';

/**
 * A view built from its base (lib/session/log/view-increment.ts) is the view the whole build
 * gives: the test log (test/support/session-log.ts) builds both and throws when they differ, so
 * every test that packs checks it. This one makes sure a long tool loop with repeats takes
 * that path, and that a difference is caught.
 */

/** A record: a message, a new call, and a call repeating an older path (which unpins its older instance). */
function record(n: number): Item[] {
  const call = (id: string, path: string): Item[] => [
    { type: 'function_call', call_id: id, name: 'read', arguments: JSON.stringify({ path }) },
    {
      type: 'function_call_output',
      call_id: id,
      output: `contents of ${path} ${'x'.repeat(n % 5 === 0 ? 3_000 : 50)}`,
    },
  ];
  return [
    { type: 'message', role: 'user', content: `message ${n}` },
    ...call(`a${n}`, `new-${n}`),
    ...call(`b${n}`, `old-${n % 7}`),
  ];
}

const requirement = () => ({ toolCalls: 4, seqs: [], wholeCalls: 2 });

async function loop(records: number, policy: ViewPolicy = viewPolicy): Promise<number> {
  const log = new SessionLog(new MemoryStore(), { viewCacheBytes: 1 << 24, viewChunkBytes: 2_000, viewPolicy: policy });
  await log.create({ id: 's' });
  let views = 0;
  for (let n = 1; n <= records; n++) {
    await log.append('s', record(n));
    if (n % 3 === 0 && (await log.pack('s', { requirement, refresh: true })).view) views += 1;
  }
  return views;
}

describe('a view built from its base', () => {
  it('is the whole build, view after view of a tool loop with repeats', async () => {
    const before = viewBuilds.fromBase;
    expect(await loop(120)).toBe(40);
    // All but the first few (too short for the window) were built from their base.
    expect(viewBuilds.fromBase - before).toBeGreaterThan(30);
  });

  it('is checked against the whole build: a difference throws', async () => {
    // A policy whose cut is one item early in a list that does not start the history, as the
    // build from a base hands it the items after the base's window.
    const faulty: ViewPolicy = {
      ...viewPolicy,
      tailCut: (items, toolCalls) => {
        const cut = viewPolicy.tailCut(items, toolCalls);
        return cut !== null && cut > 0 && items[0]!.seq !== 1 ? cut - 1 : cut;
      },
    };
    await expect(loop(30, faulty)).rejects.toThrow(/differs from the whole build/);
  });

  /** A call and its output, with a call id of the caller's choosing. */
  const pair = (id: string, path: string, big = false): Item[] => [
    { type: 'function_call', call_id: id, name: 'read', arguments: JSON.stringify({ path }) },
    { type: 'function_call_output', call_id: id, output: `contents of ${path} ${'z'.repeat(big ? 5_000 : 10)}` },
  ];

  it('is the whole build when call ids are given again once their calls closed (call_0 each response)', async () => {
    const log = new SessionLog(new MemoryStore(), { viewCacheBytes: 1 << 24, viewChunkBytes: 200 });
    await log.create({ id: 's' });
    // The strategies' need: the newest instances of repeated calls, as the default strategies ask.
    const pinning = (aggregates: HistoryAggregates) => ({
      toolCalls: 2,
      seqs: [...repeatedSeqs(aggregates)],
      wholeCalls: 1,
    });
    await log.append('s', [{ type: 'message', role: 'user', content: 'hi' }, ...pair('call_0', 'P')]);
    await log.append('s', [{ type: 'message', role: 'user', content: 'again' }, ...pair('call_0', 'P')]);
    const before = viewBuilds.fromBase;
    for (let n = 0; n < 20; n++) {
      await log.append('s', [
        { type: 'message', role: 'user', content: `m${n}` },
        ...pair('call_0', `f${n}`, true),
        ...pair('call_1', `g${n}`),
      ]);
      await log.pack('s', { requirement: pinning, refresh: true });
    }
    expect(viewBuilds.fromBase - before).toBeGreaterThan(5);
  });

  it('is the whole build when a model gives one call id to two open calls', async () => {
    const log = new SessionLog(new MemoryStore(), { viewCacheBytes: 1 << 24, viewChunkBytes: 200 });
    await log.create({ id: 's' });
    // Earlier instances of both paths: the model's calls are repeats (pinned).
    await log.append('s', [{ type: 'message', role: 'user', content: 'hi' }, ...pair('p0', 'a'), ...pair('p1', 'b')]);
    const begun = await log.beginTurn('s', { input: [{ type: 'message', role: 'user', content: 'go' }] });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    await log.completeTurn(begun.turn, {
      status: 'completed',
      output: [
        { type: 'function_call', call_id: 'call_0', name: 'read', arguments: JSON.stringify({ path: 'a' }) },
        { type: 'function_call', call_id: 'call_0', name: 'read', arguments: JSON.stringify({ path: 'b' }) },
      ],
      receipt: {},
    });
    await log.append('s', [{ type: 'function_call_output', call_id: 'call_0', output: 'the answer' }]);
    const pinning = (aggregates: HistoryAggregates) => ({
      toolCalls: 1,
      seqs: [...repeatedSeqs(aggregates)],
      wholeCalls: 1,
    });
    for (let n = 0; n < 14; n++) {
      // The eleventh reads b again, which unpins the model's second call.
      await log.append('s', [
        { type: 'message', role: 'user', content: `m${n}` },
        ...pair(`c${n}`, n === 10 ? 'b' : `f${n}`),
      ]);
      await log.pack('s', { requirement: pinning, refresh: true });
    }
  });
});
