import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import type { PackOptions } from '../../lib/session/log/types.ts';
import type { LogView } from '../../lib/session/view-records.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { packOptions, sessionStrategyPlan } from '../../lib/turn/plan.ts';
import { dropViews, storedViews } from '../support/log-views.ts';
import { SessionLog, summarized } from '../support/session-log.ts';
import { turnOf, USAGE } from './rewind-simulation-suite.ts';

/**
 * A fork's first view, made from its ancestor's newest view at or below the fork point
 * (lib/session/log/ancestor-view.ts), is the view a pack of the fork's log alone writes, and
 * the prompt a turn of the fork reads is the one a read of the log alone gives: random
 * histories (calls repeating, packs, overflow boundaries, compactions), a fork of another
 * session at a random record's end and a delete of the newest turn.
 */

const OPTIONS = { packMinRecords: 2, keepRecords: 1, segmentTargetBytes: 1024, indexDeltaKeys: 4, viewEveryRecords: 3 };
/** No view cache: a read gets the view stored (views are dropped and written again under their keys). */
const READ = { ...OPTIONS, viewCacheBytes: 0 };
/** Records enough kept out of segments for a delete of the newest turn after a pack. */
const DELETING = { ...OPTIONS, keepRecords: 3 };
const PLANS: PackOptions[] = [
  packOptions(sessionStrategyPlan({}, { strategies: null, strategy_config: {} })),
  packOptions(
    sessionStrategyPlan(
      {},
      { strategies: ['shorten_tools'], strategy_config: { max_tool_calls: 4, full_tool_outputs: 2 } },
    ),
  ),
];

/** A small seeded generator (runs are repeatable by their seed). */
function random(seed: number): (below: number) => number {
  let state = seed >>> 0 || 1;
  return (below) => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) % below;
  };
}

/** Random calls of a few files (so calls repeat), `step` in their ids. */
function calls(next: (below: number) => number, step: number): Item[] {
  const items: Item[] = [];
  for (let pair = next(4); pair >= 0; pair--) {
    const file = next(12);
    const id = `c${step}-${pair}-${next(1000)}`;
    items.push(
      { type: 'function_call', call_id: id, name: 'read', arguments: JSON.stringify({ file }) },
      { type: 'function_call_output', call_id: id, output: `file ${file} ${'x'.repeat(next(300))}` },
    );
  }
  return items;
}

/** A random history of session `p`; returns the seqs that end a record (fork points). */
async function history(log: SessionLog, next: (below: number) => number, pack: PackOptions): Promise<number[]> {
  await log.create({ id: 'p' });
  const ends: number[] = [];
  const steps = 12 + next(24);
  for (let step = 0; step < steps; step++) {
    const kind = next(10);
    if (kind < 5) {
      await log.append('p', calls(next, step));
    } else if (kind < 8) {
      const items = (await log.get('p')).counts.items;
      const begun = await log.beginTurn('p', { input: [{ type: 'message', role: 'user', content: `u${step}` }] });
      if (begun.kind !== 'claimed') throw new Error('expected a claim');
      const overflow =
        next(3) === 0 && items > 4
          ? { message_start_seq: 1 + next(items), tool_start_seq: 1 + next(items), turn: begun.turn.turn }
          : undefined;
      if (overflow && overflow.tool_start_seq < overflow.message_start_seq)
        overflow.tool_start_seq = overflow.message_start_seq;
      await log.completeTurn(begun.turn, {
        status: 'completed',
        output: [{ type: 'message', role: 'assistant', content: `re u${step}` }],
        receipt: {},
        usage: USAGE,
        ...(overflow ? { overflow } : {}),
      });
    } else if (kind < 9) {
      const items = (await log.get('p')).counts.items;
      if (items > 2) {
        const at = 2 + next(items - 1);
        const context = { summary: `s${step}`, summarized: { first_seq: 1, last_seq: at - 1 }, interrupted: [] };
        await log.compact('p', async () => summarized({ ...context, start_seq: at, model: 'echo' }));
      }
    } else {
      await log.pack('p', { ...pack, refresh: next(2) === 0 });
      continue;
    }
    ends.push((await log.get('p')).counts.items);
    if (next(3) === 0) await log.pack('p', pack);
  }
  await log.pack('p', pack);
  return ends;
}

/** The previews of session `id` (from its context start, and from its overflow boundary). */
async function previews(memory: MemoryStore, id: string, pack: PackOptions) {
  const log = new SessionLog(memory, READ);
  const whole = await log.previewContext(id, pack.requirement!);
  const overflow = await log.previewContext(id, pack.requirement!, true);
  return [whole, overflow].map(({ items, aggregates }) => ({ items, aggregates }));
}

/** The preview of session `id` and its first view, made as the service does after a fork, then from the log alone. */
async function compared(memory: MemoryStore, id: string, pack: PackOptions) {
  const log = new SessionLog(memory, OPTIONS);
  await log.pack(id, { ...pack, refresh: true });
  const adopted = (await storedViews(memory, id)).map(({ view }) => view);
  const before = await previews(memory, id, pack);
  await dropViews(memory);
  await new SessionLog(memory, READ).pack(id, { ...pack, refresh: true });
  const alone = (await storedViews(memory, id)).map(({ view }) => view);
  const after = await previews(memory, id, pack);
  return { adopted, alone, before, after };
}

/**
 * What a view holds that does not depend on the view it was made from: its record, aggregates and
 * repeat index by its keys (not the records whose sets hold its shards, nor its tail, which holds
 * items behind an older overflow boundary as its base held them).
 */
const shape = (views: LogView[]) =>
  views.map(({ record, last_seq, aggregates, keys: { count, delta } }) => ({
    record,
    last_seq,
    aggregates,
    keys: { count, delta },
  }));

describe("a fork's first view from its ancestor's", () => {
  const seeds = Array.from({ length: 24 }, (_, index) => index + 1);

  it.each(seeds)('is the view and prompt of the log alone, a fork of another session (seed %i)', async (seed) => {
    const next = random(seed * 7919);
    const pack = PLANS[seed % PLANS.length]!;
    const memory = new MemoryStore();
    const log = new SessionLog(memory, OPTIONS);
    const ends = await history(log, next, pack);
    const at = ends[next(ends.length)]!;
    await log.fork('p', { at_seq: at, fields: { id: 'f' } });
    const { adopted, alone, before, after } = await compared(memory, 'f', pack);
    expect(before).toEqual(after);
    expect(shape(adopted)).toEqual(shape(alone));
  });

  it.each(seeds)('is the view and prompt of the log alone, deletes of the newest turn (seed %i)', async (seed) => {
    const next = random(seed * 104_729);
    const pack = PLANS[seed % PLANS.length]!;
    const memory = new MemoryStore();
    const log = new SessionLog(memory, DELETING);
    await history(log, next, pack);
    // Turns kept and deleted, again and again (deep enough to flatten), views written between them.
    for (let round = 0; round < 12; round++) {
      if (next(2) === 0) await log.append('p', calls(next, round));
      await turnOf(log, 'p', `kept ${round}`);
      if (next(2) === 0) await log.pack('p', { ...pack, refresh: next(2) === 0 });
      await turnOf(log, 'p', `gone ${round}`);
      if (next(3) === 0) await log.pack('p', { ...pack, refresh: true });
      await log.deleteTurn('p', (await log.get('p')).counts.turns, { pack: () => pack });
      if (next(2) === 0) continue;
      const { adopted, alone, before, after } = await compared(memory, 'p', pack);
      expect(before).toEqual(after);
      expect(shape(adopted)).toEqual(shape(alone));
    }
  });
});
