import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { FILTER_MAX_BITS_PER_KEY } from '../../lib/session/key-filter.ts';
import { SessionLog } from '../support/session-log.ts';
import { CountingStore } from '../support/counting-store.ts';
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
    return n % 2 === 1
      ? { type: 'function_call', call_id: `c${n}`, name: 'read', arguments: JSON.stringify({ line: n }) }
      : { type: 'function_call_output', call_id: `c${n - 1}`, output: OUTPUT };
  });
}

/** Counts the gets of shards of the repeat index apart (one per distinct prefix of the calls after the view). */
class ShardCountingStore extends CountingStore {
  shardGets = 0;
  override get(...args: Parameters<CountingStore['get']>): ReturnType<CountingStore['get']> {
    if (args[0].includes('/keys/')) this.shardGets += 1;
    return super.get(...args);
  }
}

interface TurnCost {
  operations: number;
  /** Gets of repeat index shards, counted in `operations` too. */
  shardGets: number;
  bytesRead: number;
  viewItems: number;
}

/** What the strategies of these sessions need: the newest 60 calls, 20 of them whole. */
const needs = { requirement: () => ({ toolCalls: 60, seqs: [], wholeCalls: 20 }) };

interface PageCost {
  operations: number;
  bytesRead: number;
}

/**
 * A session of `items` items, then `turns` model turns (packing after each): the cost of each
 * turn, and the cost of reading the newest page after each of the turns from `pagesFrom` on
 * (reading changes nothing, so this is the page of a session left after that many turns).
 */
async function measure(
  items: number,
  turns: number,
  pagesFrom: number,
): Promise<{ turns: TurnCost[]; pages: PageCost[]; calls: number }> {
  const store = new ShardCountingStore(new MemoryStore());
  const loader = new SessionLog(store);
  await loader.create({ id: 's' });
  for (let written = 0; written < items; written += 500) {
    await loader.append('s', toolTraffic(written, Math.min(500, items - written)));
    await loader.pack('s', needs);
  }
  const costs: TurnCost[] = [];
  const pages: PageCost[] = [];
  for (let turn = 0; turn < turns; turn++) {
    // A log per turn, as the service builds one per request: nothing is kept between turns.
    const log = new SessionLog(store);
    store.reset();
    store.shardGets = 0;
    const input: Item[] = [
      turn === 0
        ? { type: 'message', role: 'user', content: 'go on' }
        : { type: 'function_call_output', call_id: `t${turn - 1}`, output: OUTPUT },
    ];
    const begun = await log.beginTurn('s', { input });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    const { items: view } = await log.readContext(begun.turn, needs.requirement());
    await log.completeTurn(begun.turn, {
      status: 'completed',
      output: [{ type: 'function_call', call_id: `t${turn}`, name: 'read', arguments: JSON.stringify({ turn }) }],
      receipt: {},
    });
    costs.push({
      operations: store.operations,
      shardGets: store.shardGets,
      bytesRead: store.counts.bytesRead,
      viewItems: view.length,
    });
    await log.pack('s', needs);
    if (turn + 1 < pagesFrom) continue;
    store.reset();
    await new SessionLog(store).listItems('s', { limit: 100 });
    pages.push({ operations: store.operations, bytesRead: store.counts.bytesRead });
  }
  return { turns: costs, pages, calls: Math.ceil(items / 2) + turns };
}

/**
 * Each size is built and driven once for both tests: 32 turns, the pages after turns 24 to 31
 * (the phases of a packing cycle, once the bulk loading is packed away).
 */
const sessions = new Map<number, ReturnType<typeof measure>>();
const session = (items: number) => {
  if (!sessions.has(items)) sessions.set(items, measure(items, 31, 24));
  return sessions.get(items)!;
};

describe('SessionLog cost does not grow with the session', () => {
  it(
    'costs at most 7 storage operations per turn from the first turn on, plus a shard per call after the ' +
      'view, the same at 1,000 and at 10,000 items',
    async () => {
      const small = await session(1000);
      const large = await session(10_000);
      // Get config, list, get the newest record and its completion, get the view; put the
      // record, put the completion. (With the inbox in the list, one list more: 8.) Then one
      // shard of the repeat index per distinct prefix of the calls after the view: a view comes
      // every 8 records, each turn makes one call, and the input's own call key is looked up too.
      for (const cost of [...small.turns, ...large.turns]) {
        expect(cost.operations - cost.shardGets).toBeLessThanOrEqual(7);
        expect(cost.shardGets).toBeLessThanOrEqual(9);
      }
      const steady = (costs: TurnCost[]) => costs.slice(-4);
      // (Shards: as many as distinct prefixes, which depends on the keys, not on the length.)
      const own = (cost: TurnCost) => cost.operations - cost.shardGets;
      expect(steady(large.turns).map(own)).toEqual(steady(small.turns).map(own));
      for (const cost of [...small.turns, ...large.turns]) expect(cost.viewItems).toBeGreaterThanOrEqual(120);
      // Bytes grow only by the repeat flags (a bit per call, in base64) and the filters of the
      // repeat index's shards (at most FILTER_MAX_BITS_PER_KEY bits per key in shards, in base64,
      // and a prefix and a character of bits per key per shard, at most 256): the index itself is
      // read by shard, and a shard holds at most about 128 keys whatever the history's length.
      const grown =
        Math.max(...steady(large.turns).map((cost) => cost.bytesRead)) -
        Math.min(...steady(small.turns).map((cost) => cost.bytesRead));
      const filters = ((large.calls - small.calls) * FILTER_MAX_BITS_PER_KEY) / 6 + 256 * 10;
      expect(grown).toBeLessThan((large.calls - small.calls) / 6 + filters + 8 * 1024);
    },
  );

  it('reads the newest page with the same operations and bytes at 1,000 and at 10,000 items', async () => {
    // The page's cost depends on where packing stands (the records after the newest segment
    // and before the carry are read one by one), not on the session's length: compare the
    // worst page over the phases of a packing cycle, once the bulk loading is packed away.
    const worst = async (items: number) => {
      const { pages } = await session(items);
      expect(pages).toHaveLength(8);
      return {
        operations: Math.max(...pages.map((page) => page.operations)),
        bytesRead: Math.max(...pages.map((page) => page.bytesRead)),
      };
    };
    const small = await worst(1000);
    const large = await worst(10_000);
    expect(large.operations).toBe(small.operations);
    expect(large.operations).toBeLessThanOrEqual(11);
    expect(large.bytesRead).toBeLessThan(small.bytesRead * 1.5 + 8 * 1024);
  });
});
