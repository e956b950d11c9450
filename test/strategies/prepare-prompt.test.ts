import { describe, expect, it } from 'vitest';
import { UnknownStrategyError } from '../../lib/errors.ts';
import type { PromptItem } from '../../lib/items.ts';
import { preparePrompt } from '../../lib/strategies/prepare-prompt.ts';
import { builtInRegistry, createRegistry } from '../../lib/strategies/registry.ts';
import type { Strategy } from '../../lib/strategies/strategy.ts';
import { defaultStrategyConfig, resolveStrategyConfig } from '../../lib/strategies/strategy-config.ts';
import {
  assistant,
  builtInNames,
  call,
  deepFreeze,
  inboxHook,
  output,
  sequenced,
  toolHistory,
  user,
} from './history-fixtures.ts';
import { z } from 'zod';

const small = resolveStrategyConfig({
  request: { epoch_tool_call_threshold: 4, epoch_full_tool_calls: 1, epoch_compacted_tool_calls: 2, epoch_size: 2 },
});

const upper: Strategy = {
  name: 'upper',
  configSchema: z.object({}),
  apply: (items) =>
    items.map((item) => (item.type === 'message' ? { ...item, content: String(item.content).toUpperCase() } : item)),
};

describe('preparePrompt dispatcher', () => {
  it.each([
    ['a comma-separated string (names trimmed)', ' shorten_tools_epoch , inbox '],
    ['an array', ['shorten_tools_epoch', 'inbox']],
  ])('accepts %s', (_label, spec) => {
    const prompt = preparePrompt(toolHistory(10), spec, { config: small, inbox: inboxHook });
    expect(prompt.strategies).toEqual(['shorten_tools_epoch', 'inbox']);
    expect(prompt.items.at(-1)).toMatchObject({ synthetic: 'inbox' });
  });

  it('uses shorten_tools_epoch_increment,shorten_images,inbox when the list is undefined', () => {
    expect(preparePrompt([], undefined).strategies).toEqual([
      'shorten_tools_epoch_increment',
      'shorten_images',
      'inbox',
    ]);
  });

  it('uses PROMPT_STRATEGY from the context env when the list is undefined', () => {
    expect(preparePrompt([], undefined, { env: { PROMPT_STRATEGY: 'none, shorten_tools' } }).strategies).toEqual([
      'none',
      'shorten_tools',
    ]);
  });

  it('calls a function as a custom hook', () => {
    const history = toolHistory(3);
    const prompt = preparePrompt(history, (items) => items.slice(0, 1));
    expect(prompt.items).toEqual([history[0]]);
    expect(prompt.strategies).toEqual(['custom']);
    expect(prompt.stats).toEqual({ tool_calls_total: 3, kept_full: 0, compacted: 0, dropped: 3 });
  });

  it('applies strategies in order, each to the previous output', () => {
    const seen: string[] = [];
    const tag = (name: string): Strategy => ({
      name,
      configSchema: z.object({}),
      apply: (items) => {
        seen.push(`${name}:${items.length}`);
        return [...items, assistant(name)];
      },
    });
    const registry = createRegistry([tag('first'), tag('second')]);
    const prompt = preparePrompt([user('hi')], 'second,first', { registry });
    expect(seen).toEqual(['second:1', 'first:2']);
    expect(prompt.items.map((item) => item.type === 'message' && item.content)).toEqual(['hi', 'second', 'first']);
  });

  it('treats none as a no-op', () => {
    const history = toolHistory(80);
    expect(preparePrompt(history, 'none').items).toEqual(history);
  });

  it('throws a typed error listing the known names for an unknown name, before applying anything', () => {
    let called = false;
    const inbox = (items: PromptItem[]) => {
      called = true;
      return items;
    };
    try {
      preparePrompt([], 'inbox,shorten_everything', { inbox });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(UnknownStrategyError);
      expect((error as UnknownStrategyError).code).toBe('unknown_strategy');
      expect((error as UnknownStrategyError).details).toEqual({
        strategy: 'shorten_everything',
        known: [...builtInNames, 'compact'],
      });
      expect((error as Error).message).toContain('shorten_tools_epoch_increment');
    }
    expect(called).toBe(false);
  });

  it('resolves registered custom strategies by name, without changing the built-in registry', () => {
    const registry = createRegistry([upper]);
    expect(preparePrompt([user('hi')], 'upper', { registry }).items).toEqual([
      { type: 'message', role: 'user', content: 'HI' },
    ]);
    expect(registry.names()).toContain('upper');
    expect(builtInRegistry.has('upper')).toBe(false);
    expect(() => preparePrompt([user('hi')], 'upper')).toThrow(UnknownStrategyError);
    const extended = builtInRegistry.with(upper);
    expect(extended.get('upper')).toBe(upper);
    expect(() => extended.with(upper)).toThrow(/already registered/);
  });

  it('does nothing for inbox without a hook', () => {
    const history = toolHistory(3);
    expect(preparePrompt(history, 'inbox').items).toEqual(history);
  });

  it('never mutates a deep-frozen input, and keeps the stored items at full fidelity', () => {
    const history = deepFreeze(toolHistory(150, { closingUser: true }));
    const before = JSON.stringify(history);
    for (const list of [
      'shorten_tools',
      'shorten_tools_epoch',
      'shorten_tools_epoch_increment,inbox',
      'inbox,shorten_tools',
    ]) {
      const prompt = preparePrompt(history, list, { inbox: inboxHook, config: { ...small, max_tool_chars: 0 } });
      expect(prompt.items.some((item) => item.compacted)).toBe(true);
    }
    expect(JSON.stringify(history)).toBe(before);
  });

  it('drops an output without a call, and keeps a call without an output where it stands, counted as sent', () => {
    const items = sequenced([
      user('go'),
      output('ghost', 'no call'),
      call('a', 't', '{}'),
      call('b', 't', '{"x":1}'),
      output('a', 'x'.repeat(500)),
      user('next'),
      call('c', 't', '{}'),
    ]);
    const prompt = preparePrompt(items, 'none');
    expect(prompt.items.map((item) => item.seq)).toEqual([1, 3, 4, 5, 6, 7]);
    expect(prompt.stats).toEqual({ tool_calls_total: 3, kept_full: 3, compacted: 0, dropped: 0 });
    // shorten_tools counts the placeholder answering a call as an output: c's is the newest (kept
    // whole), a's output the second (compacted), b's the third (dropped with b).
    const shortened = preparePrompt(items, 'shorten_tools', {
      config: { ...defaultStrategyConfig(), max_tool_chars: 0, full_tool_outputs: 1, max_tool_outputs: 2 },
    });
    expect(shortened.items.map((item) => [item.seq, item.compacted === true])).toEqual([
      [1, false],
      [3, false],
      [5, true],
      [6, false],
      [7, false],
    ]);
    expect(shortened.stats).toEqual({ tool_calls_total: 3, kept_full: 1, compacted: 1, dropped: 1 });
  });

  it('returns the stable prefix length and stats that add up', () => {
    const prompt = preparePrompt(toolHistory(10), 'shorten_tools_epoch', { config: small });
    // 10 calls: epoch 2 (9..10), pinned 8, new 2, keepFull 3, compacted 2, dropped 5.
    expect(prompt.stats).toEqual({ tool_calls_total: 10, kept_full: 3, compacted: 2, dropped: 5 });
    expect(prompt.items[prompt.stablePrefixLength - 1]).toMatchObject({ synthetic: 'context_notice' });
  });
});
