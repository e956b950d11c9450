import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { runStateless } from '../../lib/openai/stateless.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { contextNoticeItem } from '../../lib/strategies/context-notice.ts';
import { STRATEGY_CONFIG_DEFAULTS } from '../../lib/strategies/strategy-config.ts';
import { assemblePrompt } from '../../lib/turn/assemble-prompt.ts';
import { previewPrompt, runTurn } from '../../lib/turn/index.ts';
import { recordingEcho, turnWorld, seen } from '../support/turn-world.ts';

/**
 * One way to build a prompt (lib/turn/assemble-prompt.ts): for the same history, instructions,
 * strategies and notices, a turn, the prompt preview (GET /prompt) and a stateless call
 * (lib/openai/stateless.ts) send the model the same prompt, and the preview shows the prompt
 * the next turn sends.
 */

const toolPair = (index: number, name: string, output: string): Item[] => [
  { type: 'function_call', call_id: `call_${index}`, name, arguments: `{"n":${index % 3}}` },
  { type: 'function_call_output', call_id: `call_${index}`, output },
];

const historyArbitrary = fc
  .array(
    fc.oneof(
      fc.string({ minLength: 1, maxLength: 40 }).map((text) => ({ kind: 'message' as const, text })),
      fc
        .record({ name: fc.constantFrom('read', 'grep', 'ls'), output: fc.string({ maxLength: 300 }) })
        .map((call) => ({ kind: 'tool' as const, ...call })),
    ),
    { minLength: 1, maxLength: 24 },
  )
  .map((steps) =>
    steps.flatMap((step, index): Item[] =>
      step.kind === 'message'
        ? [{ type: 'message', role: index % 2 === 0 ? 'user' : 'assistant', content: step.text }]
        : toolPair(index, step.name, step.output),
    ),
  );

const caseArbitrary = fc.record({
  history: historyArbitrary,
  instructions: fc.option(fc.string({ minLength: 1, maxLength: 60 }), { nil: null }),
  strategies: fc.constantFrom<string[]>(
    ['inbox'],
    ['shorten_tools', 'inbox'],
    ['shorten_tools_epoch', 'inbox'],
    ['shorten_images', 'inbox'],
    ['none'],
    ['shorten_tools_epoch_increment'],
  ),
  notices: fc.array(fc.string({ minLength: 1, maxLength: 30 }), { maxLength: 3 }),
});

describe('assemblePrompt', () => {
  it('a turn, the preview before it and a stateless call send the same prompt for the same inputs', async () => {
    await fc.assert(
      fc.asyncProperty(caseArbitrary, async ({ history, instructions, strategies, notices }) => {
        const model = recordingEcho();
        const { sessions, inbox, services } = turnWorld(new MemoryStore(), model);
        await sessions.create({ id: 's', instructions, strategies });
        // The history, then the next turn's input as the newest items of the session.
        await sessions.append('s', history);
        for (const [index, content] of notices.entries()) await inbox.post('s', { name: `${index}.md`, content });

        const preview = await previewPrompt(services, 's', {});
        expect(preview.context.notices_pending).toHaveLength(strategies.includes('inbox') ? notices.length : 0);
        await runStateless(services, {
          items: history,
          instructions,
          tools: [],
          model: model.id,
          strategies,
          notices: preview.context.notices_pending.map((name, index) => ({ name, content: notices[index]! })),
        });
        await runTurn(services, 's', { input: [] });

        const [stateless, turn] = model.prompts;
        expect(seen(turn!)).toEqual(seen(preview.items));
        expect(seen(stateless!)).toEqual(seen(turn!));
        expect(preview.items.filter((item) => item.pending)).toHaveLength(preview.context.notices_pending.length);
      }),
      { numRuns: 40 },
    );
  });
});

describe('the items a prompt adds', () => {
  const sources = (instructions: string) => ({
    history: [{ type: 'message' as const, role: 'user' as const, content: 'hi', seq: 1 }],
    contextStart: null,
    strategies: ['none'],
    strategyConfig: STRATEGY_CONFIG_DEFAULTS,
    env: {},
    notices: [],
    instructions,
  });

  it('are the same frozen objects turn after turn, so a receipt hashes them once (lib/prompt-shape.ts)', () => {
    const first = assemblePrompt(sources('You are careful.')).prompt[0]!;
    expect(assemblePrompt(sources('You are careful.')).prompt[0]).toBe(first);
    expect(first).toEqual({ type: 'message', role: 'system', content: 'You are careful.' });
    expect(Object.isFrozen(first)).toBe(true);
    expect(contextNoticeItem()).toBe(contextNoticeItem());
    expect(Object.isFrozen(contextNoticeItem())).toBe(true);
  });

  it('keep the instructions of the texts used last, up to a MiB of them', () => {
    const first = assemblePrompt(sources('Keep me.')).prompt[0]!;
    // Other sessions' instructions, 2 MiB of them: the first text is let go, and made again.
    for (let index = 0; index < 32; index++) assemblePrompt(sources(`${index} ${'x'.repeat(64 * 1024)}`));
    const again = assemblePrompt(sources('Keep me.')).prompt[0]!;
    expect(again).not.toBe(first);
    expect(again).toEqual(first);
    // A text longer than the bound is kept while it is the newest.
    const long = 'y'.repeat(2 * 1024 * 1024);
    expect(assemblePrompt(sources(long)).prompt[0]).toBe(assemblePrompt(sources(long)).prompt[0]);
  });
});
