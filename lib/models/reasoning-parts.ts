import type { ModelMessage, ProviderMetadata, ReasoningOutput } from 'ai';
import { loopStart, type PromptItem, reasoningText, type ReasoningItem } from '../items.ts';
import { makesBlock } from './cache-breakpoints.ts';

/** The AI SDK's reasoning part of an assistant message (what a reasoning item goes back as). */
export interface SdkReasoningPart {
  type: 'reasoning';
  text: string;
  /** The AI SDK's provider options: what its provider metadata said, as it was. */
  providerOptions?: ProviderMetadata;
}

/**
 * A reasoning item of the model's reasoning as the AI SDK returns it: its text as one summary
 * part (none when empty: Anthropic's redacted thinking), its provider metadata (Anthropic's
 * `signature` or `redactedData`) as `encrypted_content`, JSON the provider gets back unchanged.
 *
 * @example reasoningItem({ type: 'reasoning', text: 'Hmm.', providerMetadata: { anthropic: { signature: 'S' } } })
 * // { type: 'reasoning', summary: [{ type: 'summary_text', text: 'Hmm.' }],
 * //   encrypted_content: '{"anthropic":{"signature":"S"}}' }
 */
export function reasoningItem(reasoning: Pick<ReasoningOutput, 'text' | 'providerMetadata'>): ReasoningItem {
  const metadata = reasoning.providerMetadata;
  return {
    type: 'reasoning',
    summary: reasoning.text === '' ? [] : [{ type: 'summary_text', text: reasoning.text }],
    ...(metadata && Object.keys(metadata).length > 0 ? { encrypted_content: JSON.stringify(metadata) } : {}),
  };
}

/**
 * The AI SDK reasoning part of a reasoning item: its text, and the provider options its
 * `encrypted_content` holds (none when it holds no JSON object of objects: the provider then
 * leaves the part out, Anthropic with a warning).
 */
export function reasoningPart(item: ReasoningItem): SdkReasoningPart {
  const providerOptions = item.encrypted_content === undefined ? undefined : parseOptions(item.encrypted_content);
  return { type: 'reasoning', text: reasoningText(item), ...(providerOptions ? { providerOptions } : {}) };
}

function parseOptions(text: string): ProviderMetadata | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isObject(value) || !Object.values(value).every(isObject)) return undefined;
  // The AI SDK throws on an Anthropic signature or redacted data that is no string, failing the call.
  const anthropic = (value.anthropic ?? {}) as Record<string, unknown>;
  return isStringOrAbsent(anthropic.signature) && isStringOrAbsent(anthropic.redactedData)
    ? (value as ProviderMetadata)
    : undefined;
}

function isStringOrAbsent(value: unknown): boolean {
  return value === undefined || typeof value === 'string';
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The reasoning a prompt's items go to the provider with, by index: that of each assistant
 * message and function_call after the prompt's last user message (the current tool loop,
 * `loopStart`), a blank assistant message's only when an item of its answer that makes a block
 * follows it (a call, or an assistant message with text: the assistant message they go in;
 * the blank message makes no block, and an assistant message of only thinking is refused by
 * Anthropic in places). What lib/models/convert-to-model-messages.ts sends and
 * lib/tokens/token-counter.ts counts.
 */
export function loopReasoning(items: readonly PromptItem[]): Map<number, readonly ReasoningItem[]> {
  const sent = new Map<number, readonly ReasoningItem[]>();
  for (let index = loopStart(items) + 1; index < items.length; index++) {
    const item = items[index]!;
    if (item.type === 'function_call_output' || !item.reasoning) continue;
    if (item.type === 'message') {
      if (item.role !== 'assistant') continue;
      if (!makesBlock(item) && !answerGoesOn(items, index)) continue;
    }
    sent.set(index, item.reasoning);
  }
  return sent;
}

/**
 * Whether the assistant items right after `index` (blank messages passed over) reach a call or
 * an assistant message that makes a block: the rest of the answer a blank message at `index`
 * opens (thinking, blank text, more thinking, then text or a call), one assistant message sent.
 */
function answerGoesOn(items: readonly PromptItem[], index: number): boolean {
  for (let next = index + 1; next < items.length; next++) {
    const item = items[next]!;
    if (item.type === 'function_call') return true;
    if (item.type !== 'message' || item.role !== 'assistant') return false;
    if (makesBlock(item)) return true;
  }
  return false;
}

/**
 * Whether a call continues a tool loop (its last assistant message holds a tool call) without
 * that message opening with a reasoning part Anthropic takes back (a thinking block's signature
 * or redacted thinking's data in its provider options; the AI SDK leaves out any other): it
 * refuses thinking in such a call.
 */
export function lacksLoopReasoning(messages: ModelMessage[]): boolean {
  const last = messages.findLast((message) => message.role === 'assistant');
  if (!last || typeof last.content === 'string' || !last.content.some((part) => part.type === 'tool-call')) {
    return false;
  }
  const first = last.content[0];
  const anthropic = first?.type === 'reasoning' ? first.providerOptions?.anthropic : undefined;
  return typeof anthropic?.signature !== 'string' && typeof anthropic?.redactedData !== 'string';
}

type StreamedReasoning = { type: string; id: string; text?: string; providerMetadata?: ProviderMetadata };

/**
 * The reasoning of a streamed answer, by block: its deltas' text, and the provider metadata of
 * its start, deltas and end merged (Anthropic's signature comes in a delta of its own).
 */
export class ReasoningParts {
  readonly #open = new Map<string, { text: string; providerMetadata: ProviderMetadata }>();

  add(part: StreamedReasoning): void {
    const block = this.#open.get(part.id) ?? { text: '', providerMetadata: {} };
    this.#open.set(part.id, block);
    block.text += part.text ?? '';
    mergeMetadata(block.providerMetadata, part.providerMetadata);
  }

  /** The reasoning item of a block that ended. */
  end(part: StreamedReasoning): ReasoningItem {
    this.add(part);
    const block = this.#open.get(part.id)!;
    this.#open.delete(part.id);
    return reasoningItem(block);
  }
}

function mergeMetadata(into: ProviderMetadata, from: ProviderMetadata | undefined): void {
  for (const [provider, values] of Object.entries(from ?? {})) into[provider] = { ...into[provider], ...values };
}
