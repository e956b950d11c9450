import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isToolItem, type PromptItem } from '../../lib/items.ts';
import { CONTEXT_NOTICE_TEXT } from '../../lib/strategies/context-notice.ts';
import { epochPlan, incrementEpochPlan, repeatsAmong } from '../../lib/strategies/epoch-plan.ts';
import { preparePrompt } from '../../lib/strategies/prepare-prompt.ts';
import {
  defaultStrategyConfig,
  resolveStrategyConfig,
  type StrategyConfig,
} from '../../lib/strategies/strategy-config.ts';
import { call, inboxHook, output, sequenced, toolHistory, user } from './history-fixtures.ts';

const workedExample = resolveStrategyConfig({
  request: {
    epoch_tool_call_threshold: 100,
    epoch_full_tool_calls: 10,
    epoch_compacted_tool_calls: 40,
    epoch_size: 10,
  },
});

function counts(strategy: string, calls: number, config = defaultStrategyConfig(), repeats?: Map<number, number>) {
  const { stats } = preparePrompt(toolHistory(calls, repeats ? { repeats } : {}), strategy, { config });
  expect(stats.kept_full + stats.compacted + stats.dropped).toBe(stats.tool_calls_total);
  return [stats.kept_full, stats.compacted, stats.dropped];
}

describe.each(['shorten_tools_epoch', 'shorten_tools_epoch_increment'])(
  '%s on a worked example (threshold 100, 10 whole, 40 compacted, epochs of 10)',
  (strategy) => {
    it.each([
      // At or below the threshold nothing changes (at 100 exactly, not 10/40/50: the rule is
      // "above the threshold").
      [99, [99, 0, 0]],
      [100, [100, 0, 0]],
      [101, [11, 40, 50]],
      [105, [15, 40, 50]],
      [110, [20, 40, 50]],
      [111, [11, 40, 60]],
    ])('%i calls -> whole/compacted/dropped %j', (calls, expected) => {
      expect(counts(strategy, calls, workedExample)).toEqual(expected);
    });

    it('changes nothing at exactly the threshold: the prompt is the history', () => {
      const history = toolHistory(100);
      expect(preparePrompt(history, strategy, { config: workedExample }).items).toEqual(history);
    });
  },
);

describe('defaults', () => {
  it.each([
    ['shorten_tools_epoch_increment', 51, [21, 30, 0]],
    ['shorten_tools_epoch_increment', 200, [50, 100, 50]],
    // Plain epochs never grow: 200 calls -> epoch 7, pinned 190, new 10.
    ['shorten_tools_epoch', 200, [30, 80, 90]],
    ['shorten_tools_epoch', 51, [21, 30, 0]],
  ])('%s at %i calls -> %j', (strategy, calls, expected) => {
    expect(counts(strategy, calls)).toEqual(expected);
  });

  it('grows the epoch every 3 completed epochs (by hand: 51-70, 71-90, 91-110, then 111-140)', () => {
    const noRepeats = repeatsAmong([]);
    const plan = (calls: number) => incrementEpochPlan(calls, defaultStrategyConfig(), noRepeats)!;
    expect(plan(110)).toMatchObject({ epoch: 2, pinned: 90, epochSize: 20, compacted: 80 });
    expect(plan(111)).toMatchObject({ epoch: 3, pinned: 110, epochSize: 30, keepFull: 21, compacted: 100 });
    expect(plan(140)).toMatchObject({ epoch: 3, pinned: 110 });
    expect(plan(141)).toMatchObject({ epoch: 4, pinned: 140 });
    // Epochs 6..8 have 40 calls (compacted 80 + 2 * 20 = 120), 9.. 50, then the cap 60
    // (compacted 160, the cap): 200 + 3 * 40 + 3 * 50 = 470 ends epoch 11.
    expect(plan(201)).toMatchObject({ epoch: 6, epochSize: 40, compacted: 120 });
    expect(plan(471)).toMatchObject({ epoch: 12, epochSize: 60, compacted: 160 });
    expect(plan(5000).epochSize).toBe(60);
  });
});

describe('incrementEpochPlan over long histories', () => {
  /** The schedule as documented, walked one epoch at a time and asking for every epoch's repeats. */
  function walked(toolCalls: number, config: StrategyConfig, repeats: ReadonlySet<number>) {
    const initial = config.epoch_size;
    if (initial <= 0 || toolCalls <= config.epoch_tool_call_threshold) return null;
    const sizeCap = Math.max(config.epoch_increment_max_size, initial);
    let pinned = config.epoch_tool_call_threshold;
    let carried = 0;
    for (let epoch = 0; ; epoch++) {
      const periodic =
        config.epoch_increment_epochs_per_increase > 0
          ? Math.floor(epoch / config.epoch_increment_epochs_per_increase) * config.epoch_increment_size_increase
          : 0;
      const nominal = Math.min(sizeCap, initial + periodic + carried);
      let repeat = false;
      for (let index = pinned; index < Math.min(toolCalls, pinned + nominal); index++) repeat ||= repeats.has(index);
      const size = repeat ? Math.min(sizeCap, nominal + config.epoch_increment_repeat_increase) : nominal;
      if (toolCalls <= pinned + size) {
        const growth = Math.floor(config.epoch_increment_compacted_growth_ratio * (nominal - initial));
        const cap = Math.max(config.epoch_increment_max_compacted_tool_calls, config.epoch_compacted_tool_calls);
        return {
          pinned,
          epoch,
          epochSize: size,
          keepFull: toolCalls - pinned + config.epoch_full_tool_calls,
          compacted: Math.min(cap, config.epoch_compacted_tool_calls + growth),
        };
      }
      pinned += size;
      if (repeat) carried += config.epoch_increment_repeat_increase;
    }
  }

  it('gives the epoch a walk of every epoch gives, for any configuration and repeats (property)', () => {
    const config = fc.record({
      epoch_tool_call_threshold: fc.nat({ max: 60 }),
      epoch_size: fc.integer({ min: -2, max: 25 }),
      epoch_full_tool_calls: fc.nat({ max: 30 }),
      epoch_compacted_tool_calls: fc.nat({ max: 100 }),
      epoch_increment_epochs_per_increase: fc.integer({ min: -1, max: 4 }),
      epoch_increment_size_increase: fc.nat({ max: 15 }),
      epoch_increment_repeat_increase: fc.nat({ max: 15 }),
      epoch_increment_max_size: fc.nat({ max: 80 }),
      epoch_increment_compacted_growth_ratio: fc.double({ min: 0, max: 3, noNaN: true }),
      epoch_increment_max_compacted_tool_calls: fc.nat({ max: 200 }),
    });
    fc.assert(
      fc.property(
        config,
        fc.nat({ max: 3000 }),
        fc.uniqueArray(fc.nat({ max: 3000 }), { size: 'max', maxLength: 60 }),
        (overrides, toolCalls, repeating) => {
          const resolved = { ...defaultStrategyConfig(), ...overrides };
          const sorted = [...repeating].sort((a, b) => a - b);
          expect(incrementEpochPlan(toolCalls, resolved, repeatsAmong(sorted))).toEqual(
            walked(toolCalls, resolved, new Set(repeating)),
          );
        },
      ),
      { numRuns: 500 },
    );
  });

  it('sizes the compacted window from the nominal size when a repeat lengthened the epoch', () => {
    // Defaults: epoch 0 holds calls 51-70 (indices 50-69); a repeat at index 55 makes it 30 long.
    const plan = incrementEpochPlan(75, defaultStrategyConfig(), repeatsAmong([55]));
    expect(plan).toEqual({ pinned: 50, epoch: 0, epochSize: 30, keepFull: 45, compacted: 80 });
    expect(plan).toEqual(walked(75, defaultStrategyConfig(), new Set([55])));
  });

  it('asks for no repeats when neither repeats nor the epoch count can grow the epochs', () => {
    const config = { ...defaultStrategyConfig(), epoch_increment_repeat_increase: 0, epoch_increment_size_increase: 0 };
    let asked = 0;
    const plan = incrementEpochPlan(1_000_000, config, () => {
      asked += 1;
      return true;
    });
    expect(asked).toBe(0);
    expect(plan).toEqual(walked(1_000_000, config, new Set([100, 5_000])));
  });

  it('asks for the repeats of a few epochs only, once the epochs stop growing', () => {
    let asked = 0;
    const repeatsIn = (from: number, to: number) => {
      asked += 1;
      return from < 200 && to > 100;
    };
    // Defaults: the 13th epoch (epoch 12) has the cap of 60 calls at the latest, repeats or not.
    const plan = incrementEpochPlan(1_000_000, defaultStrategyConfig(), repeatsIn)!;
    expect(plan.epochSize).toBe(60);
    expect(asked).toBeLessThanOrEqual(12);
    // The same plan as one walked epoch by epoch through the 16,000 epochs.
    const repeats = new Set(Array.from({ length: 100 }, (_, index) => 100 + index));
    expect(plan).toEqual(walked(1_000_000, defaultStrategyConfig(), repeats));
  });
});

describe('repeatsAmong', () => {
  it('tells whether a repeat lies in [from, to) as a scan would, asked in any order (property)', () => {
    const query = fc.tuple(fc.integer({ min: -5, max: 400 }), fc.integer({ min: 0, max: 40 }));
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.nat({ max: 400 }), { size: 'max', maxLength: 80 }),
        fc.array(query, { size: 'max', maxLength: 60 }),
        fc.boolean(),
        (values, queries, ascending) => {
          const indices = [...values].sort((a, b) => a - b);
          const asked = ascending ? [...queries].sort((a, b) => a[0] - b[0]) : queries;
          const repeatsIn = repeatsAmong(indices);
          for (const [from, length] of asked)
            expect(repeatsIn(from, from + length)).toBe(
              indices.some((index) => from <= index && index < from + length),
            );
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('shorten_tools_epoch_increment repeat-driven growth', () => {
  // threshold 10, full 2, compacted 4, epoch 5; no periodic growth; a repeat adds 3 to the
  // epoch (cap 20) and the compacted window grows by 1 per extra epoch call.
  const config = resolveStrategyConfig({
    request: {
      epoch_tool_call_threshold: 10,
      epoch_full_tool_calls: 2,
      epoch_compacted_tool_calls: 4,
      epoch_size: 5,
      epoch_increment_epochs_per_increase: 0,
      epoch_increment_size_increase: 0,
      epoch_increment_repeat_increase: 3,
      epoch_increment_max_size: 20,
      epoch_increment_compacted_growth_ratio: 1,
      epoch_increment_max_compacted_tool_calls: 100,
    },
  });
  // Call 12 repeats call 1 (same name and arguments): it lies in the nominal part (11..15)
  // of epoch 0, which therefore ends at 18 instead of 15, and later epochs are 8 long.
  const repeats = new Map([[12, 1]]);

  it.each([
    // 16 calls: epoch 0 (pinned 10), new 6, keepFull 8, compacted 4 (calls 5..8); calls 1..4
    // dropped (call 1 is the older instance, not protected); call 12 is whole anyway.
    [16, [8, 4, 4]],
    // 18 calls: still epoch 0 thanks to the repeat: new 8, keepFull 10, compacted 4, dropped 4.
    [18, [10, 4, 4]],
    // 19 calls: epoch 1, pinned 18, nominal 8 (5 + 3 carried): new 1, keepFull 3, compacted
    // 4 + (8 - 5) = 7 -> positions 4..10 = calls 16..10, where call 12 (the newest instance of
    // a repeated call) stays whole: 4 whole, 6 compacted, 9 dropped.
    [19, [4, 6, 9]],
    // 27 calls: epoch 2 (19..26 was epoch 1), pinned 26, new 1, keepFull 3, compacted 7,
    // dropped 17 -- but call 12 (position 16) stays whole: 4 whole, 7 compacted, 16 dropped.
    [27, [4, 7, 16]],
  ])('%i calls -> %j', (calls, expected) => {
    expect(counts('shorten_tools_epoch_increment', calls, config, repeats)).toEqual(expected);
  });

  it.each([
    // Without the repeat: epochs 11..15, 16..20, ...; 19 calls -> pinned 15, new 4,
    // keepFull 6, compacted 4, dropped 9.
    [19, [6, 4, 9]],
    [16, [3, 4, 9]],
  ])('without the repeat, %i calls -> %j', (calls, expected) => {
    expect(counts('shorten_tools_epoch_increment', calls, config)).toEqual(expected);
  });

  it('counts one increase per epoch however many repeats its nominal part holds', () => {
    const flags = new Set([10, 11, 12]); // calls 11, 12, 13 repeat
    const plan = incrementEpochPlan(19, config, repeatsAmong([...flags].sort((a, b) => a - b)))!;
    expect(plan).toMatchObject({ epoch: 1, pinned: 18, epochSize: 8 });
  });

  it('ignores a repeat beyond the nominal part of its epoch (in the repeat extension)', () => {
    // Epoch 0 nominal part is calls 11..15; call 16 is a repeat but epoch 0 did not grow.
    const plan = incrementEpochPlan(16, config, repeatsAmong([15]))!;
    expect(plan).toMatchObject({ epoch: 1, pinned: 15 });
  });

  it('caps the epoch size, and a maximum below the initial size never shrinks it', () => {
    const capped = resolveStrategyConfig({
      request: {
        epoch_tool_call_threshold: 0,
        epoch_size: 20,
        epoch_increment_max_size: 5,
        epoch_increment_max_compacted_tool_calls: 1,
      },
    });
    const plan = incrementEpochPlan(1000, capped, repeatsAmong(Array.from({ length: 1000 }, (_, index) => index)))!;
    expect(plan.epochSize).toBe(20);
    expect(plan.compacted).toBe(80);
  });

  it('is disabled by a non-positive epoch size', () => {
    const disabled = resolveStrategyConfig({ request: { epoch_size: 0 } });
    expect(incrementEpochPlan(500, disabled, repeatsAmong([]))).toBeNull();
    expect(epochPlan(500, disabled)).toBeNull();
    expect(counts('shorten_tools_epoch_increment', 300, disabled)).toEqual([300, 0, 0]);
  });
});

describe('repeated-call protection', () => {
  it('keeps the newest instance of a repeated call whole in the dropped region, with its output', () => {
    // 111 calls with the worked example; call 30 repeats call 5 (keys sorted, call_id ignored).
    const history = toolHistory(111, { repeats: new Map([[30, 5]]) });
    const prompt = preparePrompt(history, 'shorten_tools_epoch', { config: workedExample });
    const kept = prompt.items.filter((item) => isToolItem(item) && (item.call_id === 'c30' || item.call_id === 'c5'));
    expect(kept.map((item) => isToolItem(item) && item.call_id)).toEqual(['c30', 'c30']);
    expect(kept.every((item) => !item.compacted)).toBe(true);
    expect(prompt.stats).toMatchObject({ kept_full: 12, compacted: 40, dropped: 59 });
  });

  it('treats arguments with the same keys in another order as the same call', () => {
    const items = sequenced([
      user('go'),
      call('a', 'read', '{"b":1,"a":{"y":2,"x":1}}'),
      output('a', 'x'.repeat(500)),
      call('b', 'read', '{"a":{"x":1,"y":2},"b":1}'),
      output('b', 'y'.repeat(500)),
      call('c', 'other', '{}'),
      output('c', 'z'.repeat(500)),
    ]);
    const config = resolveStrategyConfig({
      request: {
        epoch_tool_call_threshold: 0,
        epoch_full_tool_calls: 0,
        epoch_compacted_tool_calls: 0,
        epoch_size: 10,
      },
    });
    // 3 calls, pinned 0, new 3 -> all whole anyway; use full history with epoch size 1.
    const tight = { ...config, epoch_size: 1 };
    const prompt = preparePrompt(items, 'shorten_tools_epoch', { config: tight });
    // pinned 2, new 1: call c whole; call b is the newest instance of a repeated call.
    expect(
      prompt.items
        .filter((item) => item.type === 'function_call')
        .map((item) => item.type === 'function_call' && item.call_id),
    ).toEqual(['b', 'c']);
  });
});

describe('context notice', () => {
  /** Every call but the newest compacted, from the first call on. */
  const config = resolveStrategyConfig({
    request: {
      epoch_tool_call_threshold: 0,
      epoch_full_tool_calls: 0,
      epoch_compacted_tool_calls: 10,
      epoch_size: 1,
    },
  });

  it('is one synthetic user message, after the compacted region, counted in the stable prefix', () => {
    const prompt = preparePrompt(toolHistory(111), 'shorten_tools_epoch', { config: workedExample });
    const notices = prompt.items.filter((item) => item.synthetic === 'context_notice');
    expect(notices).toHaveLength(1);
    expect(notices[0]).toEqual({
      type: 'message',
      role: 'user',
      content: CONTEXT_NOTICE_TEXT,
      synthetic: 'context_notice',
    });
    const index = prompt.items.indexOf(notices[0]!);
    expect(prompt.stablePrefixLength).toBe(index + 1);
    expect(
      prompt.items
        .slice(0, index)
        .filter((item) => item.type === 'function_call_output')
        .every((item) => item.compacted),
    ).toBe(true);
    const next = prompt.items.slice(index + 1).find((item) => item.type !== 'message');
    expect(next).toMatchObject({ type: 'function_call', call_id: 'c101' });
    expect(CONTEXT_NOTICE_TEXT).toMatch(/shortened/);
    expect(CONTEXT_NOTICE_TEXT).toMatch(/does not mean that the tool never ran/);
    expect(CONTEXT_NOTICE_TEXT).toMatch(/Do not repeat a tool call only because/);
  });

  it('is absent when nothing was compacted or dropped', () => {
    const prompt = preparePrompt(toolHistory(100), 'shorten_tools_epoch_increment', { config: workedExample });
    expect(prompt.items.some((item) => item.synthetic === 'context_notice')).toBe(false);
    expect(prompt.stablePrefixLength).toBe(0);
  });

  it('never splits parallel calls from their outputs', () => {
    // Calls 1..3 single, then a parallel pair (4 and 5) whose outputs follow both calls.
    const items: PromptItem[] = [user('go')];
    for (const id of ['1', '2', '3']) items.push(call(id, 't', `{"n":${id}}`), output(id, 'o'.repeat(500)));
    items.push(
      call('4', 't', '{"n":4}'),
      call('5', 't', '{"n":5}'),
      output('4', 'o'.repeat(500)),
      output('5', 'o'.repeat(500)),
    );
    const prompt = preparePrompt(sequenced(items), 'shorten_tools_epoch', { config });
    // Call 5 alone is kept whole; the notice cannot go between call 4 and 5, so it goes before call 4.
    const index = prompt.items.findIndex((item) => item.synthetic === 'context_notice');
    expect(prompt.items[index + 1]).toMatchObject({ type: 'function_call', call_id: '4' });
  });

  it('is not held back by a call left open, and stays where it was once the call is answered', () => {
    // Call 2 stays open while the user moves on; calls 3 and 4 follow, and call 2's output
    // comes last. Only call 4 is kept whole.
    const items: PromptItem[] = [user('go'), call('1', 't', '{"n":1}'), output('1', 'o'.repeat(500))];
    items.push(call('2', 't', '{"n":2}'), user('never mind'));
    for (const id of ['3', '4']) items.push(call(id, 't', `{"n":${id}}`), output(id, 'o'.repeat(500)));
    const before = preparePrompt(sequenced(items), 'shorten_tools_epoch', { config }).items;
    const after = preparePrompt(sequenced([...items, output('2', 'late')]), 'shorten_tools_epoch', { config }).items;
    const index = before.findIndex((item) => item.synthetic === 'context_notice');
    // Call 2 is sent (with a placeholder result): the notice goes right before call 4, not before call 2.
    expect(before.filter((item) => item.type === 'function_call').map((item) => item.seq)).toEqual([2, 4, 6, 8]);
    expect(before[index + 1]).toMatchObject({ type: 'function_call', call_id: '4' });
    expect(after.slice(0, before.length)).toEqual(before);
  });

  it.each([
    'inbox,shorten_tools_epoch_increment',
    'shorten_tools_epoch_increment,inbox',
    'inbox,shorten_tools_epoch,shorten_tools_epoch_increment',
  ])('stays before delivered inbox notices with %s (the notice is last)', (list) => {
    const config = { ...workedExample };
    const prompt = preparePrompt(toolHistory(111), list, { config, inbox: inboxHook });
    expect(prompt.items.at(-1)).toMatchObject({ synthetic: 'inbox' });
    expect(prompt.items.filter((item) => item.synthetic === 'context_notice')).toHaveLength(1);
    expect(prompt.items.findIndex((item) => item.synthetic === 'context_notice')).toBeLessThan(prompt.items.length - 1);
  });
});
