import fc from 'fast-check';
import type { InputImagePart } from '../../lib/content.ts';
import type { PromptItem } from '../../lib/items.ts';
import { previewOf } from '../../lib/strategies/compact-text.ts';
import type { StrategyConfig } from '../../lib/strategies/strategy-config.ts';
import { strategyConfigSchema } from '../../lib/strategies/strategy-config.ts';

export type SequencedPromptItem = PromptItem & { seq: number };

/** Gives items dense seqs from 1, as the session log does. */
export function sequenced(items: readonly PromptItem[]): SequencedPromptItem[] {
  return items.map((item, index) => ({ ...item, seq: index + 1 }));
}

export function user(content: string): PromptItem {
  return { type: 'message', role: 'user', content };
}

export function assistant(content: string): PromptItem {
  return { type: 'message', role: 'assistant', content };
}

export function call(callId: string, name: string, argumentsText: string): PromptItem {
  return { type: 'function_call', call_id: callId, name, arguments: argumentsText };
}

export function output(callId: string, text: string): PromptItem {
  return { type: 'function_call_output', call_id: callId, output: text };
}

/**
 * A history of `calls` tool calls after one user message: call i (1-based) has arguments
 * `{"n": i}` (or those of call `repeats.get(i)`, making it a repeat) and an output of
 * `outputChars` characters. An assistant message follows every fifth output.
 */
export function toolHistory(
  calls: number,
  options: { outputChars?: number; repeats?: ReadonlyMap<number, number>; closingUser?: boolean } = {},
): SequencedPromptItem[] {
  const { outputChars = 500, repeats = new Map<number, number>() } = options;
  const items: PromptItem[] = [user('start')];
  for (let index = 1; index <= calls; index += 1) {
    const argumentsOf = repeats.get(index) ?? index;
    items.push(call(`c${index}`, 'tool', JSON.stringify({ n: argumentsOf })));
    items.push(output(`c${index}`, `${index}:`.padEnd(outputChars, 'o')));
    if (index % 5 === 0) items.push(assistant(`after ${index}`));
  }
  if (options.closingUser) items.push(user('end'));
  return sequenced(items);
}

/** Freezes a value and everything reachable from it. */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const entry of Object.values(value)) deepFreeze(entry);
  }
  return value;
}

export const builtInNames = [
  'shorten_tools',
  'shorten_tools_epoch',
  'shorten_tools_epoch_increment',
  'shorten_images',
  'inbox',
  'none',
] as const;

/** Appends one delivered notice, as the turn's hook does. */
export function inboxHook(items: PromptItem[]): PromptItem[] {
  return [...items, { type: 'message', role: 'user', content: 'notice from the inbox', synthetic: 'inbox' }];
}

const longText = (seed: string, length: number) => `${seed}:`.padEnd(length, seed);

const argumentsArbitrary = fc.oneof(
  fc.constantFrom('{"q":"a"}', '{"q":"b"}', '{"b":1,"a":2}', '{"a":2,"b":1}', '{}'),
  fc.integer({ min: 0, max: 30 }).map((n) => JSON.stringify({ n })),
  fc.constantFrom('not json {', '"a bare string"', '[1,2,3]', '42', 'null'),
  fc
    .integer({ min: 0, max: 5 })
    .map((n) => JSON.stringify({ text: longText(`t${n}`, 260), list: [longText('l', 230), 1] })),
  fc.integer({ min: 0, max: 3 }).map((n) => `unparseable ${longText(`u${n}`, 240)}`),
);

const outputArbitrary = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.integer({ min: 0, max: 50 }).map((n) => longText(`o${n}`, 450 + n)),
  fc.integer({ min: 0, max: 50 }).map((n) => `😀${longText(`e${n}`, 420)}😀`),
);

type Block =
  | { kind: 'message'; role: 'user' | 'assistant' | 'system'; content: string }
  | { kind: 'pair'; name: string; arguments: string; output: string; outOfLine: boolean }
  | { kind: 'parallel'; first: [string, string, string]; second: [string, string, string] }
  | { kind: 'orphan_call'; name: string; arguments: string }
  | { kind: 'orphan_output'; output: string }
  | { kind: 'screenshot'; text: string; images: number; width: number }
  | { kind: 'image_message'; role: 'user' | 'assistant'; images: number; width: number }
  | { kind: 'output_before_call'; name: string; arguments: string; output: string };

const nameArbitrary = fc.constantFrom('read', 'write', 'search');

const blockArbitrary: fc.Arbitrary<Block> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('message' as const),
      role: fc.constantFrom('user' as const, 'assistant' as const, 'system' as const),
      content: fc.string({ maxLength: 12 }),
    }),
  },
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant('pair' as const),
      name: nameArbitrary,
      arguments: argumentsArbitrary,
      output: outputArbitrary,
      outOfLine: fc.boolean(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('parallel' as const),
      first: fc.tuple(nameArbitrary, argumentsArbitrary, outputArbitrary),
      second: fc.tuple(nameArbitrary, argumentsArbitrary, outputArbitrary),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('orphan_call' as const),
      name: nameArbitrary,
      arguments: argumentsArbitrary,
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('orphan_output' as const), output: outputArbitrary }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('screenshot' as const),
      text: outputArbitrary,
      images: fc.integer({ min: 1, max: 2 }),
      width: fc.integer({ min: 1, max: 4000 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('image_message' as const),
      role: fc.constantFrom('user' as const, 'assistant' as const),
      images: fc.integer({ min: 1, max: 2 }),
      width: fc.integer({ min: 1, max: 4000 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('output_before_call' as const),
      name: nameArbitrary,
      arguments: argumentsArbitrary,
      output: outputArbitrary,
    }),
  },
);

function outputItem(callId: string, text: string, outOfLine: boolean): PromptItem {
  if (outOfLine && text.length > 300) {
    return { type: 'function_call_output', call_id: callId, output: '', output_ref: previewOf(text) };
  }
  return output(callId, text);
}

/** `count` blob-referenced PNG parts of `width` x 800 (their blob hash derived from the width). */
export function imageParts(count: number, width: number): InputImagePart[] {
  return Array.from({ length: count }, (_, index) => ({
    type: 'input_image' as const,
    blob: String(width * 10 + index).padStart(64, '0'),
    media_type: 'image/png',
    bytes: width * 37,
    width,
    height: 800,
  }));
}

/**
 * Turns blocks into a history (malformed shapes included) with unique call ids, or with
 * `reuseIds` the smallest id no open call holds, as a stored session may use an id again once
 * its call is answered (malformed shapes still get ids of their own).
 */
export function materialize(blocks: readonly Block[], reuseIds = false): SequencedPromptItem[] {
  const items: PromptItem[] = [];
  let next = 0;
  const open = new Set<string>();
  const fresh = () => {
    next += 1;
    return `call_${next}`;
  };
  const id = () => {
    if (!reuseIds) return fresh();
    let k = 0;
    while (open.has(`again_${k}`)) k += 1;
    return `again_${k}`;
  };
  for (const block of blocks) {
    switch (block.kind) {
      case 'message':
        items.push({ type: 'message', role: block.role, content: block.content });
        break;
      case 'pair': {
        const callId = id();
        items.push(call(callId, block.name, block.arguments), outputItem(callId, block.output, block.outOfLine));
        break;
      }
      case 'parallel': {
        const first = id();
        open.add(first);
        const second = id();
        open.delete(first);
        items.push(call(first, block.first[0], block.first[1]), call(second, block.second[0], block.second[1]));
        items.push(output(first, block.first[2]), output(second, block.second[2]));
        break;
      }
      case 'orphan_call': {
        const callId = id();
        open.add(callId);
        items.push(call(callId, block.name, block.arguments));
        break;
      }
      case 'orphan_output':
        items.push(output(fresh(), block.output));
        break;
      case 'screenshot': {
        const callId = id();
        const parts = [{ type: 'input_text' as const, text: block.text }, ...imageParts(block.images, block.width)];
        items.push(call(callId, 'computer', `{"w":${block.width}}`), {
          type: 'function_call_output',
          call_id: callId,
          output: parts,
        });
        break;
      }
      case 'image_message':
        items.push({ type: 'message', role: block.role, content: imageParts(block.images, block.width) });
        break;
      case 'output_before_call': {
        const callId = fresh();
        items.push(output(callId, block.output), call(callId, block.name, block.arguments));
        break;
      }
    }
  }
  return sequenced(items);
}

export const historyArbitrary = fc
  .tuple(fc.array(blockArbitrary, { size: 'max', maxLength: 40 }), fc.boolean())
  .map(([blocks, reuseIds]) => materialize(blocks, reuseIds));

/** Longer histories, for properties that need thresholds crossed and tails cut. */
export const longHistoryArbitrary = fc
  .tuple(fc.array(blockArbitrary, { size: 'max', minLength: 10, maxLength: 60 }), fc.boolean())
  .map(([blocks, reuseIds]) => materialize(blocks, reuseIds));

/**
 * Histories of thousands of items, as a long session holds: about 7 in 10 call/output pairs
 * have arguments of their own (naming their block), the rest draw from the small pool above,
 * so calls repeat, some often, with their keys in either order.
 */
export const largeHistoryArbitrary = fc
  .tuple(
    fc.array(fc.tuple(blockArbitrary, fc.integer({ min: 0, max: 9 })), { minLength: 1500, maxLength: 2500 }),
    fc.boolean(),
  )
  .map(([blocks, reuseIds]) =>
    materialize(
      blocks.map(([block, roll], index) =>
        block.kind === 'pair' && roll < 7
          ? { ...block, arguments: JSON.stringify({ path: `src/${index}.ts`, line: index % 97 }) }
          : block,
      ),
      reuseIds,
    ),
  );

/** Small thresholds, so short generated histories cross them. */
export const configArbitrary: fc.Arbitrary<StrategyConfig> = fc
  .record({
    full_tool_calls: fc.integer({ min: 0, max: 4 }),
    full_tool_outputs: fc.integer({ min: 0, max: 4 }),
    max_tool_calls: fc.integer({ min: 0, max: 10 }),
    max_tool_outputs: fc.integer({ min: 0, max: 10 }),
    max_tool_chars: fc.integer({ min: 0, max: 3000 }),
    epoch_tool_call_threshold: fc.integer({ min: 0, max: 8 }),
    epoch_full_tool_calls: fc.integer({ min: 0, max: 4 }),
    epoch_compacted_tool_calls: fc.integer({ min: 0, max: 6 }),
    epoch_size: fc.integer({ min: -1, max: 5 }),
    epoch_increment_epochs_per_increase: fc.integer({ min: 0, max: 3 }),
    epoch_increment_size_increase: fc.integer({ min: 0, max: 3 }),
    epoch_increment_repeat_increase: fc.integer({ min: 0, max: 3 }),
    epoch_increment_max_size: fc.integer({ min: 0, max: 10 }),
    epoch_increment_compacted_growth_ratio: fc.constantFrom(0, 0.5, 1, 2),
    epoch_increment_max_compacted_tool_calls: fc.integer({ min: 0, max: 12 }),
    full_images: fc.integer({ min: 0, max: 3 }),
    image_epoch_size: fc.integer({ min: 1, max: 4 }),
  })
  .map((layer) => strategyConfigSchema.parse(layer));

export const strategyListArbitrary = fc.array(fc.constantFrom(...builtInNames), { minLength: 1, maxLength: 3 });

const epochNames = ['shorten_tools_epoch', 'shorten_tools_epoch_increment'] as const;

/** Lists that mostly hold an epoch strategy (whose tail view is shorter than the history). */
export const tailStrategyListArbitrary = fc.oneof(
  { weight: 1, arbitrary: strategyListArbitrary },
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.constantFrom(...epochNames),
        fc.array(fc.constantFrom(...epochNames, 'shorten_images', 'inbox', 'none'), { maxLength: 2 }),
        fc.nat(),
      )
      .map(([epoch, others, at]) => {
        const list: string[] = [...others];
        list.splice(at % (others.length + 1), 0, epoch);
        return list;
      }),
  },
);
