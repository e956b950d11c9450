import { sha256Hex } from './hash.ts';
import type { PromptItem, Synthetic, Tool } from './items.ts';

/**
 * The shape of a prompt as a turn's receipt keeps it, so a reader can tell afterwards, from
 * the receipts alone, how much of one turn's prompt repeated the previous one (what a
 * provider's prompt cache could reuse) and where the synthetic items stood.
 *
 * - `hashes`: 12 hex characters per prompt item, chained: item i's is the SHA-256 of item
 *   i-1's and of item i as the provider gets it (role, content, call, output; no seq), and the
 *   chain starts from the tools offered. Two prompts share their first k items (and tools)
 *   exactly when their first k hashes are equal.
 * - `chars`: the characters of each item, as `prompt_chars` counts them.
 * - `synthetic`: the items no stored item stands for: the context notice (with its text,
 *   a fixed sentence), delivered notices (by name; their text is in the inbox's delivery
 *   records), the compaction summary (its length; the text is the context object's).
 */
export interface PromptShape {
  hashes: string;
  chars: number[];
  synthetic: SyntheticEntry[];
}

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

/** The shape of `prompt` (instructions first, payloads whole) as sent with `tools`. */
export function promptShape(
  prompt: readonly PromptItem[],
  tools: readonly Tool[],
  noticeNames: readonly string[],
): PromptShape {
  let previous = sha256Hex(JSON.stringify(tools)).slice(0, HASH_CHARS);
  let hashes = '';
  const chars: number[] = [];
  const synthetic: SyntheticEntry[] = [];
  let notice = 0;
  prompt.forEach((item, index) => {
    previous = sha256Hex(`${previous}\n${JSON.stringify(providerView(item))}`).slice(0, HASH_CHARS);
    hashes += previous;
    const size = itemChars(item);
    chars.push(size);
    if (item.type !== 'message' || !item.synthetic) return;
    const entry: SyntheticEntry = { index, synthetic: item.synthetic, chars: size };
    if (item.synthetic === 'context_notice') entry.content = item.content;
    if (item.synthetic === 'inbox') {
      const name = noticeNames[notice++];
      if (name !== undefined) entry.name = name;
    }
    synthetic.push(entry);
  });
  return { hashes, chars, synthetic };
}

/**
 * Characters of `current` that repeat the start of `previous` exactly, in whole items (and 0
 * when the tools differ): the common prefix of the two provider prompts.
 */
export function reusedPrefixChars(
  current: Pick<PromptShape, 'hashes' | 'chars'>,
  previous: Pick<PromptShape, 'hashes'>,
): number {
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

function providerView(item: PromptItem): unknown {
  if (item.type === 'message') return [item.role, item.content];
  if (item.type === 'function_call') return ['call', item.call_id, item.name, item.arguments];
  return ['output', item.call_id, item.output];
}

function itemChars(item: PromptItem): number {
  if (item.type === 'message') return item.content.length;
  if (item.type === 'function_call') return item.name.length + item.arguments.length;
  return item.output.length;
}
