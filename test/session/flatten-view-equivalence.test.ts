import { describe, expect, it } from 'vitest';
import { SeededRandom } from '../../bench/random.ts';
import type { Item } from '../../lib/items.ts';
import { sessionConfigKey, sessionPrefix } from '../../lib/session/keys.ts';
import type { PackOptions } from '../../lib/session/log/types.ts';
import type { LogView } from '../../lib/session/view-records.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { packOptions, sessionStrategyPlan } from '../../lib/turn/plan.ts';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { dropViews, overflowingTurn, SEGMENTED, samePromptFromTheLogAlone, storedViews } from '../support/log-views.ts';
import { SessionLog, summarized } from '../support/session-log.ts';
import { USAGE } from './rewind-simulation-suite.ts';

/**
 * The first view a delete that flattens the history stores (lib/session/log/flatten.ts, made
 * from views held in memory every VIEW_EVERY_RECORDS segments) is the view a pack writes of the
 * same generation read from its log alone, whatever the history holds and the strategies need;
 * and the next turn's prompt is the same with it as without it.
 */

const STRATEGIES: { strategies: string[] | null; strategy_config: Record<string, unknown> }[] = [
  { strategies: null, strategy_config: {} },
  { strategies: ['shorten_tools'], strategy_config: { max_tool_calls: 8, full_tool_outputs: 3, full_tool_calls: 2 } },
  {
    strategies: ['shorten_tools_epoch_increment', 'shorten_images'],
    strategy_config: { epoch_size: 6, epoch_tool_call_threshold: 10, full_images: 1 },
  },
  { strategies: ['none'], strategy_config: {} },
  { strategies: null, strategy_config: { max_tool_calls: 6, max_tool_outputs: 6, full_tool_outputs: 2 } },
  { strategies: ['shorten_tools_epoch', 'compact'], strategy_config: { epoch_size: 4, epoch_full_tool_calls: 3 } },
];

let callIds = 0;
/** One append's items, picked by `next`: calls (some repeated) with outputs, big outputs, images, messages. */
function appendItems(next: () => number): Item[] {
  const items: Item[] = [];
  const pieces = 1 + Math.floor(next() * 3);
  for (let piece = 0; piece < pieces; piece++) {
    const pick = next();
    if (pick < 0.5) {
      callIds += 1;
      const path = `src/file${Math.floor(next() * 6)}.ts`;
      items.push({ type: 'function_call', call_id: `c${callIds}`, name: 'read', arguments: JSON.stringify({ path }) });
      // Out of line past blobThreshold, now and then.
      const output = next() < 0.15 ? 'x'.repeat(6000) : `${'line of output\n'.repeat(1 + Math.floor(next() * 60))}`;
      items.push({ type: 'function_call_output', call_id: `c${callIds}`, output: `${output}${path}` });
    } else if (pick < 0.65) {
      items.push({
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_text', text: 'look at this' },
          { type: 'input_image', image_url: dataUrl('image/png', pngBytes(4, 4, Math.floor(next() * 300))) },
        ],
      } as Item);
    } else if (pick < 0.8) {
      callIds += 1;
      // A call still open across appends, its output in a later one.
      items.push({ type: 'function_call', call_id: `c${callIds}`, name: 'grep', arguments: '{"q":"x"}' });
      items.push({ type: 'function_call_output', call_id: `c${callIds}`, output: 'found' });
    } else {
      items.push({ type: 'message', role: 'assistant', content: `step ${callIds}` });
    }
  }
  return items;
}

async function turn(log: SessionLog, text: string, noticed = false) {
  const begun = await log.beginTurn('s', { input: [{ type: 'message', role: 'user', content: text }] });
  if (begun.kind !== 'claimed') throw new Error('expected a claim');
  await log.completeTurn(begun.turn, {
    status: 'completed',
    output: [{ type: 'message', role: 'assistant', content: `re ${text}` }],
    receipt: {},
    usage: USAGE,
    ...(noticed ? { response: { context: { notices_delivered: [`n-${text}`] } } } : {}),
  });
}

/** A history of `seed` under strategies `config`, flattened by a delete given `pack`; the store. */
async function flattenedSession(seed: number, pack: PackOptions | undefined) {
  const random = new SeededRandom(seed);
  const next = () => random.next();
  const store = new MemoryStore();
  const log = new SessionLog(store, SEGMENTED);
  const config = STRATEGIES[seed % STRATEGIES.length]!;
  await log.create({ id: 's', ...config } as Parameters<SessionLog['create']>[0]);
  const appends = 60 + Math.floor(next() * 40);
  const compactAt = next() < 0.3 ? Math.floor(appends * next()) : -1;
  for (let n = 0; n < appends; n++) {
    await log.append('s', appendItems(next));
    if (n % 5 === 4) await log.pack('s', pack ?? {});
    if (n === compactAt)
      await log.compact('s', async (view) => {
        const last = view.items.at(-1)?.seq ?? 0;
        return summarized({
          start_seq: Math.max(2, last - 3),
          summary: 'the first rounds',
          summarized: { first_seq: view.items[0]?.seq ?? 1, last_seq: Math.max(1, last - 4) },
          interrupted: [],
          model: 'echo',
        });
      });
  }
  // An overflow boundary a turn moved, now and then: the views' tails start at it.
  if (next() < 0.5) {
    const items = (await log.get('s')).counts.items;
    const message = 1 + Math.floor(items * next() * 0.5);
    await overflowingTurn(log, 's', message, message + Math.floor(items * 0.2));
  }
  await log.pack('s', pack ?? {});
  for (let n = 1; n <= 12; n++) {
    await turn(log, `kept ${n}`, next() < 0.3);
    await turn(log, `gone ${n}`);
    await log.deleteTurn('s', (await log.get('s')).counts.turns, pack ? { pack: () => pack } : {});
    const stored = JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', 's')))!.body));
    if (stored.named !== undefined) return { store, log, config };
  }
  throw new Error('no delete flattened the history');
}

const shape = (view: LogView) => ({ ...view, created_at: null });

describe('a flattening told other strategies than the session has, or none', () => {
  it.each([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16])(
    'leaves the next prompt as a view of its own strategies gives (seed %i)',
    async (seed) => {
      const own = STRATEGIES[seed % STRATEGIES.length]!;
      const other =
        seed % 2 === 0 ? undefined : packOptions(sessionStrategyPlan({}, STRATEGIES[(seed + 2) % STRATEGIES.length]!));
      const pack = packOptions(sessionStrategyPlan({}, own));
      const { store, log } = await flattenedSession(seed, other);
      const [flat] = await storedViews(store);
      const before = await log.previewContext('s', pack.requirement!);
      await dropViews(store, sessionPrefix('', 's'), [flat!.key]);
      await new SessionLog(store, SEGMENTED).pack('s', { ...pack, refresh: true });
      const after = await new SessionLog(store, SEGMENTED).previewContext('s', pack.requirement!);
      const scope = await log.scope('s');
      const told = await log.hydrate(scope, before.items);
      const right = await log.hydrate(scope, after.items);
      // The same items; whole at least where a view of the session's own strategies holds them whole
      // (the strategies compact what the view did not).
      expect(told.map((item) => item.seq)).toEqual(right.map((item) => item.seq));
      right.forEach((item, index) => {
        const compacted = (item as { compacted?: boolean }).compacted === true;
        if (!compacted || (told[index] as { compacted?: boolean }).compacted) expect(told[index]).toEqual(item);
      });
      expect(before.aggregates).toEqual(after.aggregates);
    },
  );
});

describe('the first view a flattening stores', () => {
  it.each([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16])(
    'is the view a pack writes of the new generation from its log alone (seed %i)',
    async (seed) => {
      const probe = STRATEGIES[seed % STRATEGIES.length]!;
      const pack = packOptions(sessionStrategyPlan({}, probe));
      const { store, log } = await flattenedSession(seed, pack);
      const [flat, ...more] = await storedViews(store);
      expect(more).toEqual([]);
      // Views held in memory between: more segments than VIEW_EVERY_RECORDS, those of the oldest
      // generation it reads as a fork's included.
      const segments = (await store.list(sessionPrefix('', 's'), { limit: 1000 })).objects.filter((object) =>
        object.key.endsWith('.seg'),
      );
      expect(segments.length).toBeGreaterThan(16);
      const requirement = pack.requirement!;
      // Without it, a pack reads the whole log of the generation for a new one. The next turn's
      // prompt is the same from either (a reader that cached neither).
      await samePromptFromTheLogAlone(store, {
        before: await log.previewContext('s', requirement),
        read: () => new SessionLog(store, SEGMENTED).previewContext('s', requirement),
        repack: () => new SessionLog(store, SEGMENTED).pack('s', { ...pack, refresh: true }),
        prefix: sessionPrefix('', 's'),
        views: [flat!.key],
      });
      const [packed] = await storedViews(store);
      expect(packed!.key).toBe(flat!.key);
      expect(shape(flat!.view)).toEqual(shape(packed!.view));
    },
  );
});

describe('a flattening whose last segment is one of the views held in memory', () => {
  it('stores the view a pack writes, with no item after the view held', async () => {
    const pack = packOptions(sessionStrategyPlan({}, STRATEGIES[0]!));
    const counts: number[] = [];
    for (let appends = 26; appends <= 36; appends++) {
      const store = new MemoryStore();
      const log = new SessionLog(store, SEGMENTED);
      await log.create({ id: 's' });
      // Each append its own segment (past segmentTargetBytes).
      for (let n = 1; n <= appends; n++) {
        const output = `${'line of output\n'.repeat(160)}${n}`;
        await log.append('s', [
          { type: 'function_call', call_id: `c${n}`, name: 'read', arguments: JSON.stringify({ n: n % 9 }) },
          { type: 'function_call_output', call_id: `c${n}`, output },
        ]);
      }
      await log.pack('s', pack);
      for (let n = 1; ; n++) {
        await turn(log, `kept ${n}`);
        await turn(log, `gone ${n}`);
        await log.deleteTurn('s', (await log.get('s')).counts.turns, { pack: () => pack });
        const config = JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', 's')))!.body));
        if (config.named !== undefined) {
          // The units of the generation it read as a fork (none when it copied the whole history),
          // else its own segments: a view is held in memory at every 16th.
          const read = config.fork_of?.[0]?.generation ?? (await log.scope('s')).generation;
          const listed = (await store.list(sessionPrefix('', 's'), { limit: 1000 })).objects;
          counts.push(
            listed.filter((object) => object.key.endsWith('.seg') && object.key.includes(`/${read}/`)).length,
          );
          break;
        }
      }
      const [flat] = await storedViews(store);
      await store.delete(flat!.key);
      await new SessionLog(store, SEGMENTED).pack('s', { ...pack, refresh: true });
      const [packed] = await storedViews(store);
      expect(shape(flat!.view), `${appends} appends`).toEqual(shape(packed!.view));
    }
    expect(counts.some((count) => count % 16 === 0)).toBe(true);
  });
});
