import { sha256Hex } from './hash.ts';
import { contentKey, contentText } from './content.ts';
import { type PromptItem, type Synthetic, type Tool, unchanging } from './items.ts';

/**
 * The shape of a prompt as a turn's receipt keeps it, so a reader can tell afterwards, from
 * the receipts alone, how much of one turn's prompt repeated the previous one (what a
 * provider's prompt cache could reuse) and where the synthetic items stood. Its size does not
 * grow with the prompt's items, and making it costs one SHA-256 pass over the prompt:
 *
 * - `tools`: 12 hex characters of the SHA-256 of the tools the provider gets (with allowed
 *   tools, the allowed ones alone where it takes no restriction itself: lib/models/model.ts `toolsSent`).
 * - `blocks`: 12 hex characters per whole block of BLOCK_ITEMS items, chained: block j's is the
 *   SHA-256 of block j-1's (the tools' for the first) and of the block's items as the provider
 *   gets them (role, content, call, output; no seq). Two prompts share their first j blocks
 *   (and tools) exactly when their first j block hashes are equal. `block_chars`: each
 *   block's characters, as `prompt_chars` counts them.
 * - `tail`: 12 hex characters per item of the last TAIL_ITEMS items (from `tail_start`), each
 *   of that item alone, and `tail_chars` their characters: where two prompts part within a
 *   block, the items of both tails tell how far they agree.
 * - `synthetic`: the items no stored item stands for: the context notice (with its text,
 *   a fixed sentence), delivered notices (by name; their text is in the inbox's delivery
 *   records), the compaction summary (its length; the text is the context object's).
 *
 * Receipts written before this format (no `v`) hold one chained hash and one size per item;
 * reusedPrefixChars compares two of those, and answers null for one of each.
 */
export type PromptShape = PromptShapeV2 | PromptShapeV1;

export interface PromptShapeV2 {
  v: 2;
  items: number;
  tools: string;
  blocks: string;
  block_chars: number[];
  tail_start: number;
  tail: string;
  tail_chars: number[];
  synthetic: SyntheticEntry[];
}

/** The first format: a chained hash and the characters of every item. */
export interface PromptShapeV1 {
  v?: undefined;
  hashes: string;
  chars: number[];
  synthetic: SyntheticEntry[];
}

/** What reusedPrefixChars compares: a shape of either format. */
type ShapeHashes = Omit<PromptShapeV2, 'synthetic'> | Omit<PromptShapeV1, 'synthetic'>;

export interface SyntheticEntry {
  /** Position in the prompt (0 is the system instructions when the session has them). */
  index: number;
  synthetic: Synthetic;
  chars: number;
  /** The context notice's text. */
  content?: string;
  /** A delivered notice's name. */
  name?: string;
}

const HASH_CHARS = 12;
export const BLOCK_ITEMS = 64;
export const TAIL_ITEMS = 256;

/** A shape without its synthetic entries (which name the notices finally delivered). */
export type PromptHashes = Omit<PromptShapeV2, 'synthetic'>;

/** The shape of `prompt` (instructions first, payloads whole) as sent with `tools`. */
export function promptShape(
  prompt: readonly PromptItem[],
  tools: readonly Tool[],
  noticeNames: readonly string[],
): PromptShapeV2 {
  const steps = promptHashSteps(prompt, tools);
  let step = steps.next();
  while (!step.done) step = steps.next();
  return withSynthetic(step.value, prompt, noticeNames);
}

/** `hashes` with the synthetic items of `prompt`, delivered notices named by `noticeNames`. */
export function withSynthetic(
  hashes: PromptHashes,
  prompt: readonly PromptItem[],
  noticeNames: readonly string[],
): PromptShapeV2 {
  return { ...hashes, synthetic: syntheticEntries(prompt, noticeNames) };
}

/**
 * The hashes of a shape, one block of BLOCK_ITEMS items per step, so that a caller can hash a
 * long prompt in slices while other work (the model call) goes on.
 */
export function* promptHashSteps(prompt: readonly PromptItem[], tools: readonly Tool[]): Generator<void, PromptHashes> {
  const toolsHash = shortHash(JSON.stringify(tools));
  let previous = toolsHash;
  let blocks = '';
  const blockChars: number[] = [];
  const whole = prompt.length - (prompt.length % BLOCK_ITEMS);
  for (let start = 0; start < whole; start += BLOCK_ITEMS) {
    const block = blockHash(previous, prompt.slice(start, start + BLOCK_ITEMS));
    previous = block.hash;
    blocks += previous;
    blockChars.push(block.chars);
    yield;
  }
  const tailStart = Math.max(0, prompt.length - TAIL_ITEMS);
  let tail = '';
  const tailChars: number[] = [];
  for (let index = tailStart; index < prompt.length; index++) {
    const item = itemHash(prompt[index]!);
    tail += item.hash;
    tailChars.push(item.chars);
  }
  return {
    v: 2,
    items: prompt.length,
    tools: toolsHash,
    blocks,
    block_chars: blockChars,
    tail_start: tailStart,
    tail,
    tail_chars: tailChars,
  };
}

/**
 * Characters of `current` that repeat the start of `previous` exactly, in whole items (and 0
 * when the tools differ): the common prefix of the two provider prompts. Where the two part
 * within a block that neither tail covers, the whole blocks before it are what is counted.
 * Null when the two shapes are of different formats.
 */
export function reusedPrefixChars(current: ShapeHashes, previous: ShapeHashes): number | null {
  if (current.v === undefined || previous.v === undefined)
    return current.v === undefined && previous.v === undefined ? reusedPrefixCharsV1(current, previous) : null;
  if (current.tools !== previous.tools) return 0;
  let total = 0;
  let block = 0;
  const blocks = Math.min(current.block_chars.length, previous.block_chars.length);
  for (; block < blocks && hashAt(current.blocks, block) === hashAt(previous.blocks, block); block++)
    total += current.block_chars[block]!;
  for (let index = block * BLOCK_ITEMS; index < Math.min(current.items, previous.items); index++) {
    if (index < current.tail_start || index < previous.tail_start) break;
    if (hashAt(current.tail, index - current.tail_start) !== hashAt(previous.tail, index - previous.tail_start)) break;
    total += current.tail_chars[index - current.tail_start]!;
  }
  return total;
}

function reusedPrefixCharsV1(current: Omit<PromptShapeV1, 'synthetic'>, previous: Omit<PromptShapeV1, 'synthetic'>) {
  let total = 0;
  for (let index = 0; index < current.chars.length; index++) {
    const at = index * HASH_CHARS;
    if (
      at + HASH_CHARS > previous.hashes.length ||
      current.hashes.slice(at, at + HASH_CHARS) !== previous.hashes.slice(at, at + HASH_CHARS)
    )
      break;
    total += current.chars[index]!;
  }
  return total;
}

function syntheticEntries(prompt: readonly PromptItem[], noticeNames: readonly string[]): SyntheticEntry[] {
  const synthetic: SyntheticEntry[] = [];
  let notice = 0;
  prompt.forEach((item, index) => {
    if (item.type !== 'message' || !item.synthetic) return;
    const entry: SyntheticEntry = { index, synthetic: item.synthetic, chars: itemChars(item) };
    if (item.synthetic === 'context_notice') entry.content = contentText(item.content);
    if (item.synthetic === 'inbox') {
      const name = noticeNames[notice++];
      if (name !== undefined) entry.name = name;
    }
    synthetic.push(entry);
  });
  return synthetic;
}

/**
 * Hashes kept with the items they were made of, for items that cannot change (frozen, as the
 * view and record caches keep them: lib/deep-readonly.ts). A turn's prompt holds the previous
 * turn's items as the same objects, so each block and tail item of a session is hashed once
 * per process rather than on every turn, whose receipt would otherwise hash the whole prompt
 * again (its cost growing with the history). A block's hash is kept under its first item with
 * the hash before it and its items, and taken only when both are the same.
 */
interface KeptBlock {
  previous: string;
  items: readonly PromptItem[];
  hash: string;
  chars: number;
}
const keptBlocks = new WeakMap<PromptItem, KeptBlock>();
const keptItems = new WeakMap<PromptItem, { hash: string; chars: number }>();

function blockHash(previous: string, items: readonly PromptItem[]): KeptBlock {
  const kept = keptBlocks.get(items[0]!);
  if (kept?.previous === previous && kept.items.every((item, index) => item === items[index])) return kept;
  let text = previous;
  let chars = 0;
  for (const item of items) {
    text += providerText(item);
    chars += itemChars(item);
  }
  const block = { previous, items, hash: shortHash(text), chars };
  if (items.every(unchanging)) keptBlocks.set(items[0]!, block);
  return block;
}

function itemHash(item: PromptItem): { hash: string; chars: number } {
  const kept = keptItems.get(item);
  if (kept) return kept;
  const hashed = { hash: shortHash(providerText(item)), chars: itemChars(item) };
  if (unchanging(item)) keptItems.set(item, hashed);
  return hashed;
}

function shortHash(text: string): string {
  return sha256Hex(text).slice(0, HASH_CHARS);
}

function hashAt(hashes: string, index: number): string {
  return hashes.slice(index * HASH_CHARS, (index + 1) * HASH_CHARS);
}

/** An item as the provider gets it (role, content, call, output; no seq), each part length-prefixed. */
function providerText(item: PromptItem): string {
  if (item.type === 'message') {
    const content = contentKey(item.content);
    return `m${item.role.length}:${item.role}${content.length}:${content}`;
  }
  if (item.type === 'function_call') {
    const { call_id: id, name, arguments: args } = item;
    return `c${id.length}:${id}${name.length}:${name}${args.length}:${args}`;
  }
  const output = contentKey(item.output);
  return `o${item.call_id.length}:${item.call_id}${output.length}:${output}`;
}

/** An item's characters as a prompt's shape counts them: its content as contentKey writes it (parts as JSON). */
export function itemChars(item: PromptItem): number {
  if (item.type === 'message') return contentKey(item.content).length;
  if (item.type === 'function_call') return item.name.length + item.arguments.length;
  return contentKey(item.output).length;
}
