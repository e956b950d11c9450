import { describe, expect, it } from 'vitest';
import type { PromptItem } from '../../lib/items.ts';
import { preparePrompt } from '../../lib/strategies/prepare-prompt.ts';
import { resolveStrategyConfig } from '../../lib/strategies/strategy-config.ts';
import { call, output, sequenced, user } from './history-fixtures.ts';

// Six pairs with long arguments and outputs, after one user message.
function sixPairs(closingUser: boolean): PromptItem[] {
  const items: PromptItem[] = [user('start')];
  for (let index = 1; index <= 6; index += 1) {
    items.push(call(`c${index}`, 'write', JSON.stringify({ n: index, body: `${index}`.padEnd(300, 'b') })));
    items.push(output(`c${index}`, `${index}`.padEnd(500, 'o')));
  }
  if (closingUser) items.push(user('next'));
  return sequenced(items);
}

type Fate = 'whole' | 'compacted' | 'dropped';

function fates(items: readonly PromptItem[], type: 'function_call' | 'function_call_output'): Fate[] {
  return [1, 2, 3, 4, 5, 6].map((index) => {
    const found = items.find((item) => item.type === type && item.call_id === `c${index}`);
    return found === undefined ? 'dropped' : found.compacted ? 'compacted' : 'whole';
  });
}

const tight = resolveStrategyConfig({
  request: { full_tool_outputs: 2, max_tool_outputs: 4, full_tool_calls: 1, max_tool_calls: 3, max_tool_chars: 0 },
});

describe('shorten_tools', () => {
  it('keeps, compacts and drops by position, newest first (calls share their output position)', () => {
    const prompt = preparePrompt(sixPairs(true), 'shorten_tools', { config: tight });
    // Positions: c6 = 1 ... c1 = 6.
    expect(fates(prompt.items, 'function_call_output')).toEqual([
      'dropped',
      'dropped',
      'compacted',
      'compacted',
      'whole',
      'whole',
    ]);
    // Call rule: position 1 whole, 2..3 compacted, 4 would be dropped but its output is kept,
    // so it is compacted; 5..6 dropped with their outputs.
    expect(fates(prompt.items, 'function_call')).toEqual([
      'dropped',
      'dropped',
      'compacted',
      'compacted',
      'compacted',
      'whole',
    ]);
    expect(prompt.stats).toEqual({ tool_calls_total: 6, kept_full: 2, compacted: 2, dropped: 2 });
    expect(prompt.items.some((item) => item.synthetic === 'context_notice')).toBe(false);
    expect(prompt.stablePrefixLength).toBe(0);
  });

  it('keeps every tool item after the newest user message whole', () => {
    const prompt = preparePrompt(sixPairs(false), 'shorten_tools', { config: tight });
    expect(prompt.items).toEqual(sixPairs(false));
  });

  it('ignores synthetic user messages when looking for the newest user message', () => {
    const inbox = (items: PromptItem[]): PromptItem[] => [
      ...items,
      { type: 'message', role: 'user', content: 'n', synthetic: 'inbox' },
    ];
    const prompt = preparePrompt(sixPairs(false), 'inbox,shorten_tools', { config: tight, inbox });
    expect(fates(prompt.items, 'function_call_output')).toEqual(['whole', 'whole', 'whole', 'whole', 'whole', 'whole']);
  });

  it.each([
    // Budget 0: position rules only.
    [0, ['dropped', 'dropped', 'compacted', 'compacted', 'compacted', 'compacted']],
    // Budget 1000: out6 (500) and call6 (~320) are retained under budget, out5 too (820 <
    // 1000); from then on the retained characters are over budget and positions rule.
    [1000, ['dropped', 'dropped', 'compacted', 'compacted', 'whole', 'whole']],
    // A budget larger than everything keeps everything whole.
    [100000, ['whole', 'whole', 'whole', 'whole', 'whole', 'whole']],
  ] as const)('keeps items whole while the retained characters are below max_tool_chars = %i', (budget, expected) => {
    const config = { ...tight, full_tool_outputs: 0, max_tool_chars: budget };
    const prompt = preparePrompt(sixPairs(true), 'shorten_tools', { config });
    expect(fates(prompt.items, 'function_call_output')).toEqual(expected);
  });

  it('drops a call together with its output even when the call rule would keep it', () => {
    const config = { ...tight, full_tool_calls: 6, max_tool_calls: 6 };
    const prompt = preparePrompt(sixPairs(true), 'shorten_tools', { config });
    expect(fates(prompt.items, 'function_call')).toEqual(['dropped', 'dropped', 'whole', 'whole', 'whole', 'whole']);
  });

  it('uses the defaults 0/10/40/40/100000', () => {
    const items: PromptItem[] = [user('go')];
    for (let index = 1; index <= 300; index += 1)
      items.push(call(`c${index}`, 't', `{"n":${index}}`), output(`c${index}`, 'o'.repeat(1000)));
    items.push(user('more'));
    // Walking newest-first, each pair retains 1000 + 9 characters (`{"n":300}` ... `{"n":100}`).
    // Output at position p is decided with (p - 1) * 1009 retained: below 100000 up to p = 100,
    // so outputs 1..100 stay whole; from p = 101 the positions rule, and 101 > max_tool_outputs.
    const prompt = preparePrompt(sequenced(items), 'shorten_tools');
    const outputs = prompt.items.filter((item) => item.type === 'function_call_output');
    expect(outputs.every((item) => !item.compacted)).toBe(true);
    expect(outputs).toHaveLength(100);
    expect(prompt.stats).toEqual({ tool_calls_total: 300, kept_full: 100, compacted: 0, dropped: 200 });
  });
});
