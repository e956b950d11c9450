import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { PromptItem } from '../../lib/items.ts';
import { computeAggregates } from '../../lib/strategies/aggregates.ts';
import { compactCallItem, compactOutputItem } from '../../lib/strategies/compact-text.ts';
import { preparePrompt } from '../../lib/strategies/prepare-prompt.ts';
import { selectTail, tailRequirement } from '../../lib/strategies/select-tail.ts';
import {
  call,
  configArbitrary,
  imageParts,
  inboxHook,
  output,
  sequenced,
  tailStrategyListArbitrary,
  type SequencedPromptItem,
} from './history-fixtures.ts';

const longText = (seed: string, length: number) => `${seed}:`.padEnd(length, seed);
const args = fc.oneof(
  fc.constantFrom('{"q":"a"}', '{"q":"b"}', '{}', '{"a":2,"b":1}', '{"b":1,"a":2}'),
  fc.integer({ min: 0, max: 5 }).map((n) => JSON.stringify({ text: longText(`t${n}`, 260) })),
);
const out = fc.oneof(
  fc.constant(''),
  fc.string({ maxLength: 10 }),
  fc.integer({ min: 0, max: 20 }).map((n) => longText(`o${n}`, 450 + n)),
);
const name = fc.constantFrom('read', 'write');

type Block =
  | { kind: 'message'; role: 'user' | 'assistant'; content: string }
  | { kind: 'pair'; name: string; arguments: string; output: string }
  | { kind: 'deferred'; name: string; arguments: string; output: string; delay: number }
  | { kind: 'reversed'; a: [string, string, string]; b: [string, string, string] }
  | { kind: 'screenshot'; images: number; width: number; empty: boolean }
  | { kind: 'image_message'; images: number; width: number };

const block: fc.Arbitrary<Block> = fc.oneof(
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('message' as const),
      role: fc.constantFrom('user' as const, 'assistant' as const),
      content: fc.string({ maxLength: 5 }),
    }),
  },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('pair' as const), name, arguments: args, output: out }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('deferred' as const),
      name,
      arguments: args,
      output: out,
      delay: fc.integer({ min: 1, max: 8 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('reversed' as const),
      a: fc.tuple(name, args, out),
      b: fc.tuple(name, args, out),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('screenshot' as const),
      images: fc.integer({ min: 1, max: 2 }),
      width: fc.integer({ min: 1, max: 50 }),
      empty: fc.boolean(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('image_message' as const),
      images: fc.integer({ min: 1, max: 2 }),
      width: fc.integer({ min: 1, max: 50 }),
    }),
  },
);

function build(blocks: readonly Block[], summary: boolean, reuse = false): SequencedPromptItem[] {
  const items: PromptItem[] = [];
  let next = 0;
  const open = new Set<string>();
  const id = () => {
    if (!reuse) return `c${++next}`;
    let k = 0;
    while (open.has(`r${k}`)) k += 1;
    open.add(`r${k}`);
    return `r${k}`;
  };
  const due: { at: number; item: PromptItem }[] = [];
  blocks.forEach((b, index) => {
    for (const entry of due.filter((d) => d.at === index)) {
      items.push(entry.item);
      open.delete((entry.item as { call_id: string }).call_id);
    }
    // Ids of pairs answered at once are free again after the block.
    const before = new Set(open);
    switch (b.kind) {
      case 'message':
        items.push({ type: 'message', role: b.role, content: b.content });
        break;
      case 'pair': {
        const c = id();
        items.push(call(c, b.name, b.arguments), output(c, b.output));
        break;
      }
      case 'deferred': {
        const c = id();
        items.push(call(c, b.name, b.arguments));
        due.push({ at: index + b.delay, item: output(c, b.output) });
        break;
      }
      case 'reversed': {
        const a = id();
        const bb = id();
        items.push(call(a, b.a[0], b.a[1]), call(bb, b.b[0], b.b[1]), output(bb, b.b[2]), output(a, b.a[2]));
        break;
      }
      case 'screenshot': {
        const c = id();
        const text = b.empty ? [] : [{ type: 'input_text' as const, text: '' }];
        items.push(call(c, 'computer', `{"w":${b.width}}`), {
          type: 'function_call_output',
          call_id: c,
          output: [...text, ...imageParts(b.images, b.width)],
        });
        break;
      }
      case 'image_message':
        items.push({ type: 'message', role: 'user', content: imageParts(b.images, b.width) });
        break;
    }
    for (const key of [...open])
      if (!before.has(key) && !due.some((d) => d.at > index && (d.item as { call_id: string }).call_id === key))
        open.delete(key);
  });
  for (const entry of due.filter((d) => d.at >= blocks.length)) items.push(entry.item);
  const history = sequenced(items);
  return summary
    ? ([
        { type: 'message', role: 'user', content: 'Summary: ...', synthetic: 'summary' },
        ...history,
      ] as SequencedPromptItem[])
    : history;
}

const historyArbitrary = fc
  .tuple(fc.array(block, { size: 'max', minLength: 10, maxLength: 60 }), fc.boolean(), fc.boolean())
  .map(([blocks, summary, reuse]) => build(blocks, summary, reuse));

function providerValid(result: readonly PromptItem[]): string | null {
  const open = new Set<string>();
  for (const item of result) {
    if (item.type === 'function_call') {
      if (open.has(item.call_id)) return `call ${item.call_id} twice`;
      open.add(item.call_id);
    } else if (item.type === 'function_call_output') {
      if (!open.delete(item.call_id)) return `output ${item.call_id} without call`;
    }
  }
  return open.size === 0 ? null : `calls without output: ${[...open]}`;
}

describe('tail view equals whole history on inputs the fixtures do not generate', () => {
  it('deferred outputs, reversed parallel outputs, empty outputs, images, a leading summary', () => {
    fc.assert(
      fc.property(historyArbitrary, configArbitrary, tailStrategyListArbitrary, (history, config, list) => {
        const stored = history.filter((item) => item.seq !== undefined);
        const aggregates = computeAggregates(stored);
        const requirement = tailRequirement(list, config, aggregates);
        const lead = history.length > stored.length ? [history[0]!] : [];
        const view = [...lead, ...selectTail(stored, requirement)];
        const fromTail = preparePrompt(view, list, { config, aggregates, inbox: inboxHook });
        const fromFull = preparePrompt(history, list, { config, inbox: inboxHook });
        expect(providerValid(fromFull.items)).toBeNull();
        expect(JSON.stringify(fromTail)).toBe(JSON.stringify(fromFull));
        const whole = new Set<string>();
        let calls = 0;
        for (const item of [...view].reverse()) {
          if (item.type !== 'function_call') continue;
          calls += 1;
          const pinned = requirement.seqs.includes(item.seq!);
          if (requirement.wholeCalls === undefined || calls <= requirement.wholeCalls || pinned)
            whole.add(item.call_id);
        }
        const storedView = view.map((item) =>
          item.type === 'message' || whole.has(item.call_id)
            ? item
            : item.type === 'function_call'
              ? compactCallItem(item)
              : compactOutputItem(item),
        );
        const fromView = preparePrompt(storedView, list, { config, aggregates, inbox: inboxHook });
        expect(JSON.stringify(fromView.items)).toBe(JSON.stringify(fromFull.items));
      }),
      { numRuns: 400 },
    );
  });
});
