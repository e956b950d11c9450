import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Item, PromptItem } from '../../lib/items.ts';
import { parseStored, recordSchema } from '../../lib/session/records.ts';
import { callKey, computeAggregates, emptyAggregates, extendAggregates } from '../../lib/strategies/aggregates.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { ProcessStore } from '../../bench/process-store.ts';
import { allItems, call, newestView, output } from '../support/repeat-index.ts';
import { SessionLog, type SessionLogOptions, type ViewPolicy } from '../support/session-log.ts';

/**
 * Repeat flags (lib/session/log/repeat-flags.ts): records appended by a process that has the
 * newest view's repeat index say which of their calls repeat an earlier one, and a turn or a
 * view after them takes that instead of the shards; a turn's record flags the calls of the
 * turns it carries (their input and their model's calls). Whoever appended, packed or turned, the
 * aggregates are those of the whole history.
 */

/** Shards from 8 keys on, so that most calls fall outside the delta. */
const options: Partial<SessionLogOptions> = { indexDeltaKeys: 8, viewEveryRecords: 2, packMinRecords: 2 };

const append = fc.record({
  kind: fc.constant('append' as const),
  paths: fc.array(fc.nat(40), { minLength: 1, maxLength: 6 }),
  fresh: fc.boolean(),
});

const step = fc.oneof(
  { weight: 4, arbitrary: append },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('pack' as const) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('turn' as const),
      path: fc.nat(40),
      fresh: fc.boolean(),
      // The model's answer: a call (of the path, unanswered), or nothing.
      answer: fc.option(fc.nat(40), { nil: undefined }),
    }),
  },
);

describe('repeat flags', () => {
  it('give the aggregates of the whole history, whichever process appended, packed or turned', async () => {
    await fc.assert(
      // At least one append: a session of no record has no view to compare.
      fc.asyncProperty(fc.tuple(append, fc.array(step, { minLength: 3, maxLength: 23 })), async ([first, rest]) => {
        const steps = [first, ...rest];
        const store = new MemoryStore();
        const loader = new SessionLog(store, options);
        await loader.create({ id: 's' });
        let n = 0;
        const pairs = (paths: number[]): Item[] => paths.flatMap((path) => [call(++n, `p${path}`), output(n)]);
        for (const next of steps) {
          // A fresh process has never read a view: it writes no flags, and reads every shard.
          const log = 'fresh' in next && next.fresh ? new SessionLog(new ProcessStore(store), options) : loader;
          if (next.kind === 'append') await log.append('s', pairs(next.paths));
          else if (next.kind === 'pack') await loader.pack('s');
          else {
            const input = pairs([next.path]);
            const begun = await log.beginTurn('s', { input });
            if (begun.kind !== 'claimed') throw new Error('expected a claim');
            expect(begun.turn.aggregates).toEqual(computeAggregates(await allItems(loader)));
            const answer = next.answer === undefined ? [] : [call(++n, `p${next.answer}`)];
            await log.completeTurn(begun.turn, { status: 'completed', output: answer, receipt: {} });
          }
        }
        // A view of the newest record, even when none is due (a single record).
        await loader.pack('s', { refresh: true });
        const view = await newestView(store, loader);
        const items = await allItems(loader);
        expect(view.aggregates).toEqual(computeAggregates(items.filter((item) => item.seq <= view.last_seq)));
      }),
      { numRuns: 40 },
    );
  });

  it('are written by the process that wrote the view, one per call, and not by one that never read it', async () => {
    const store = new MemoryStore();
    const loader = new SessionLog(store, { ...options, indexDeltaKeys: 2 });
    await loader.create({ id: 's' });
    await loader.append('s', [call(1, 'a'), output(1), call(2, 'b'), output(2), call(3, 'c'), output(3)]);
    expect((await loader.pack('s', { refresh: true })).view).toBeDefined();
    // A repeat of a sharded key (a), of the delta (c), a new one (d) and a repeat within the record (d).
    await loader.append('s', [call(4, 'a'), output(4), call(5, 'c'), output(5), call(6, 'd'), call(7, 'd')]);
    // A new process: no flags.
    await new SessionLog(new ProcessStore(store), options).append('s', [call(8, 'a'), output(8)]);
    const { objects } = await store.list('sessions/s/turn/');
    const records = await Promise.all(
      objects
        .filter((object) => /\/\d{12}$/.test(object.key) && object.size > 0)
        .map(async (object) => parseStored(object.key, (await store.get(object.key))!.body, recordSchema)),
    );
    const byNumber = new Map(records.map((record) => [record.record, record]));
    expect(byNumber.get(2)?.repeats).toBe(`${viewPolicy.version}:1101`);
    expect(byNumber.get(3)?.repeats).toBeUndefined();
    // The record after carries the flagged one with its flags.
    expect(byNumber.get(3)?.recent?.find((group) => group.record === 2)?.repeats).toBe(`${viewPolicy.version}:1101`);
  });

  it('are not told from a view index another view policy keyed', async () => {
    const store = new MemoryStore();
    const writer = new SessionLog(store, options);
    await writer.create({ id: 's' });
    await writer.append('s', [call(1, 'a'), output(1), call(2, 'b'), output(2)]);
    expect((await writer.pack('s', { refresh: true })).view).toBeDefined();
    // A policy whose call keys differ: the index the writer keeps says nothing of its keys.
    const other = {
      ...viewPolicy,
      version: 'other',
      callKey: (name: string, args: string) => callKey(name, `${args} `),
    };
    const appender = new SessionLog(store, { ...options, viewPolicy: other });
    await appender.append('s', [call(3, 'a'), output(3)]);
    const { objects } = await store.list('sessions/s/turn/');
    const newest = objects.find((object) => /\/\d{12}$/.test(object.key))!;
    expect(parseStored(newest.key, (await store.get(newest.key))!.body, recordSchema).repeats).toBeUndefined();
  });

  it.each([
    ['another process', true],
    ['the same process', false],
  ])('are not taken by a reader whose view policy keys calls otherwise, in %s', async (_, apart) => {
    const store = new MemoryStore();
    // Keyed by name only: under it, read(b) repeats read(a); under the service's policy it does not.
    const nameKey = (name: string) => callKey(name, '{}');
    const nameKeys = (items: readonly PromptItem[]) =>
      items.flatMap((item) => (item.type === 'function_call' ? [nameKey(item.name)] : []));
    const other: ViewPolicy = {
      ...viewPolicy,
      version: 'other',
      callKey: nameKey,
      extendAggregates: (previous, items, seen, keys) =>
        extendAggregates(previous, items, seen, keys ?? nameKeys(items)),
    };
    // Another process (a deployment of another version) has its own caches; the same one shares
    // the records read and the call keys told of their items.
    const reader = new SessionLog(apart ? new ProcessStore(store) : store, { ...options, viewPolicy: other });
    const appender = new SessionLog(store, options);
    await appender.create({ id: 's' });
    // Enough other names that the index is split into shards by prefix, read(a)'s among them.
    const names: Item[] = Array.from({ length: 140 }, (_, n) => ({
      type: 'function_call',
      call_id: `f${n}`,
      name: `f${n}`,
      arguments: '{}',
    }));
    await reader.append('s', [call(1, 'a'), output(1), ...names]);
    expect((await reader.pack('s', { refresh: true })).view).toBeDefined();
    const write: Item = { type: 'function_call', call_id: 'c2', name: 'write', arguments: '{}' };
    await appender.append('s', [write, output(2)]);
    expect((await appender.pack('s', { refresh: true })).view).toBeDefined();
    // Flagged by the appender from its own view: read(b) is new to it.
    await appender.append('s', [call(3, 'b'), output(3)]);
    const begun = await reader.beginTurn('s', { input: [{ type: 'message', role: 'user', content: 'go' }] });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    const items = await allItems(reader);
    expect(begun.turn.aggregates).toEqual(
      extendAggregates(emptyAggregates(), items, () => false, nameKeys(items)).aggregates,
    );
  });
});
