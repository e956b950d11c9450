import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { SessionLog } from '../../lib/session/session-log.ts';
import { CountingStore } from '../../lib/store/counting-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';

/**
 * What a turn costs in storage operations must not grow with the session (R2 bills and
 * throttles per request; a Worker has six connections). Histories are built with a few bulk
 * appends and packed, so the test stays fast.
 */

const OUTPUT = 'tool output line\n'.repeat(12);

function toolTraffic(from: number, count: number): Item[] {
  return Array.from({ length: count }, (_, index): Item => {
    const n = from + index;
    if (index === 0 && from === 0) return { type: 'message', role: 'user', content: 'the task' };
    return n % 2 === 0
      ? { type: 'function_call', call_id: `c${n}`, name: 'read', arguments: JSON.stringify({ line: n }) }
      : { type: 'function_call_output', call_id: `c${n - 1}`, output: OUTPUT };
  });
}

interface TurnCost {
  operations: number;
  bytesRead: number;
  viewItems: number;
}

/** A session of `items` items, then `turns` model turns (packing after each); the cost of each. */
async function measure(items: number, turns: number): Promise<{ turns: TurnCost[]; page: { operations: number; bytesRead: number } }> {
  const store = new CountingStore(new MemoryStore());
  const log = new SessionLog(store);
  await log.create({ id: 's' });
  for (let written = 0; written < items; written += 500) {
    await log.append('s', toolTraffic(written, Math.min(500, items - written)));
    await log.pack('s');
  }
  const costs: TurnCost[] = [];
  for (let turn = 0; turn < turns; turn++) {
    store.reset();
    const begun = await log.beginTurn('s', { input: [{ type: 'function_call_output', call_id: `t${turn - 1}`, output: OUTPUT }] });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    const view = await log.readContext(begun.turn, { toolCalls: 60, seqs: [] });
    await log.completeTurn(begun.turn, {
      status: 'completed',
      output: [{ type: 'function_call', call_id: `t${turn}`, name: 'read', arguments: JSON.stringify({ turn }) }],
      receipt: {},
    });
    costs.push({ operations: store.operations, bytesRead: store.counts.bytesRead, viewItems: view.length });
    await log.pack('s');
  }
  store.reset();
  await log.listItems('s', { limit: 100 });
  return { turns: costs, page: { operations: store.operations, bytesRead: store.counts.bytesRead } };
}

describe('SessionLog cost does not grow with the session', () => {
  it('costs the same storage operations per turn at 1,000 and at 10,000 items, at most 8 once packed', async () => {
    const small = await measure(1000, 14);
    const large = await measure(10_000, 14);
    // The first turns after the bulk appends still read the unpacked appends; once packing has
    // caught up (it packs 8 closed records at a time), every turn costs the same.
    const steady = (costs: TurnCost[]) => costs.slice(-4);
    for (const cost of [...steady(small.turns), ...steady(large.turns)]) expect(cost.operations).toBeLessThanOrEqual(8);
    expect(steady(large.turns).map((cost) => cost.operations)).toEqual(steady(small.turns).map((cost) => cost.operations));
    // Before packing catches up, a turn also reads each unpacked record older than those the
    // newest record carries: one get each, fewer than packMinRecords + keepRecords (10) of them.
    // (The first turn after a bulk append also writes one call-key marker per distinct call.)
    for (const cost of [...small.turns.slice(1), ...large.turns.slice(1)]) expect(cost.operations).toBeLessThanOrEqual(8 + 10);
    // The view holds 60 calls and outputs plus the first message; the bytes read stay near its size.
    for (const cost of steady(large.turns)) expect(cost.bytesRead).toBeLessThan(2 * steady(small.turns)[0]!.bytesRead + 64 * 1024);
  });

  it('reads the newest page with the same operations at 1,000 and at 10,000 items, one more than at 100', async () => {
    const tiny = await measure(100, 12);
    const small = await measure(1000, 12);
    const large = await measure(10_000, 12);
    // At 100 items the newest record carries the whole page; beyond, one segment range read is added.
    expect(large.page.operations).toBe(small.page.operations);
    expect(large.page.operations).toBeLessThanOrEqual(tiny.page.operations + 1);
    expect(large.page.bytesRead).toBeLessThan(small.page.bytesRead * 1.5 + 8 * 1024);
  });
});
