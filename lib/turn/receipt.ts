import { adjacentAnswers } from '../models/convert-to-model-messages.ts';
import { type PromptMedia, promptMedia, sentAsText } from '../models/media-parts.ts';
import type { IncompleteReason } from '../models/model.ts';
import { mediaParts } from '../content.ts';
import { TailgateError } from '../errors.ts';
import { clientError } from '../error-codes.ts';
import { contentOf, type NeedsBytes } from '../session/attachments.ts';
import type { PromptItem, Tool } from '../items.ts';
import type { TurnUsage } from '../ledger/usage.ts';
import type { DeliveredNotice } from '../inbox/index.ts';
import { promptHashSteps, withSynthetic, type PromptHashes, type PromptShape } from '../prompt-shape.ts';
import type { StoredError, TurnRequest, TurnContext } from './types.ts';
import type { TurnPlan } from './plan.ts';

/** The compact record of what a model saw, stored with a turn. */

/**
 * The error JSON body's inner object, for any thrown value, as a client may see it (`clientError`):
 * what a turn stores and journals of its failure. A model provider's text, a storage backend's
 * and an unknown error's stay generic here; they go to the log only.
 */
export function errorRecord(error: unknown): StoredError {
  if (error instanceof TailgateError) return clientError(error);
  return { code: 'internal_error', message: 'internal error' };
}

/**
 * What the turn stores of the request (for the record; replay does not re-run it), with how it
 * is answered: `stream` (TurnOptions.stream), `answered_at_end` (TurnOptions.answeredAtEnd).
 */
export function requestRecord(
  request: TurnRequest,
  answered: { stream?: boolean | undefined; answeredAtEnd?: boolean | undefined } = {},
): Record<string, unknown> {
  const { input: _input, ...rest } = request;
  return {
    ...rest,
    ...(answered.stream ? { stream: true } : {}),
    ...(answered.answeredAtEnd ? { answered_at_end: true } : {}),
  };
}

export interface TurnReceipt {
  model: string;
  strategies: string[];
  /** Seq ranges ("1-40,42") of history items sent whole, compacted, or read and dropped. */
  whole: string;
  compacted: string;
  dropped: string;
  /** Items of the history before the tail that was read: dropped without being read. */
  unread_before: number | null;
  notices: { name: string; stored_as: string; posted_at: string }[];
  context: TurnContext;
  usage?: TurnUsage;
  /**
   * A failed turn's `usage` is an estimate: its provider may have run its model call (timed out
   * in flight, broke off after it was accepted) and reported nothing.
   */
  usage_estimated?: true;
  /** What the summary of the turn's compaction used (TurnResponse.compaction_usage). */
  compaction_usage?: TurnUsage;
  /** The prompt's item hashes, sizes and synthetic items (lib/prompt-shape.ts). */
  prompt?: PromptShape;
  /**
   * Images and files sent as text placeholders: those of tool results where the provider takes
   * none there (Workers AI), files by URL where it takes none, and images by URL and files where
   * it takes images only as bytes (Workers AI), images over the provider's side in a request
   * with many images (`Model.manyImages`) and those of unknown size there, the oldest images of a
   * request over the most images or bytes it takes (`manyImages.most`, `mostBytes`), and every
   * one where it takes none at all (a text-only `openai-compatible:` backend, a Workers AI text
   * model).
   */
  media_as_text?: number;
  /** Why the answer stopped short (the turn response's `incomplete`). */
  incomplete?: IncompleteReason;
}

/** The seq ranges of a receipt: what of the history the prompt held whole, compacted, or not at all. */
export type ReceiptRanges = Pick<TurnReceipt, 'whole' | 'compacted' | 'dropped' | 'unread_before'>;

/** How many images and files of an item the model gets as text placeholders (`sentAsText`). */
function mediaSentAsText(media: PromptMedia, item: PromptItem, toolResult: () => boolean): number {
  if (item.type === 'function_call') return 0;
  const parts = mediaParts(item.type === 'message' ? item.content : item.output);
  if (parts.length === 0) return 0;
  return parts.filter(sentAsText(media, item, toolResult)).length;
}

/** The media support of `model` for `prompt` (`promptMedia`), worked out only when first asked. */
function mediaOf(
  model: TurnPlan['model'],
  prompt: readonly PromptItem[],
  toolResult: (index: number) => boolean,
): () => PromptMedia {
  let media: PromptMedia | undefined;
  return () => (media ??= promptMedia(model, model.manyImages, prompt, toolResult));
}

/** Whether the prompt's item at an index goes as a tool result, worked out only when first asked. */
function toolResultsOf(prompt: readonly PromptItem[]): (index: number) => boolean {
  let toolResults: Map<number, number> | undefined;
  return (index) => {
    toolResults ??= adjacentAnswers(prompt);
    return toolResults.has(index);
  };
}

/** `ask` of `index`, asked later (a function made only for an item with media). */
function askAt(ask: (index: number) => boolean, index: number): () => boolean {
  return () => ask(index);
}

/**
 * Which images and files of an item of `prompt` go to the model as such, so whose blobs are
 * read: none of an item whose every image and file goes as a text placeholder (`sentAsText`: an
 * assistant's message, a tool result where the model takes no media there), and not those of
 * an item that go so (an image over the provider's side, the oldest of a request over the most
 * images it takes). Asked item by item (a turn's media read asks of each): an item without media
 * costs its parts' walk alone, and the prompt's positions are indexed only once an item with
 * media is asked of.
 */
export function sendsMedia(model: TurnPlan['model'], prompt: readonly PromptItem[]): NeedsBytes {
  const toolResult = toolResultsOf(prompt);
  const media = mediaOf(model, prompt, toolResult);
  let positions: Map<PromptItem, number> | undefined;
  return (item) => {
    if (item.type === 'function_call') return false;
    const parts = mediaParts(contentOf(item));
    if (parts.length === 0) return false;
    positions ??= new Map(prompt.map((entry, index) => [entry, index]));
    const index = positions.get(item) ?? -1;
    const asText = sentAsText(media(), item, () => toolResult(index));
    const sent = (part: (typeof parts)[number]) => !asText(part);
    return parts.some(sent) && sent;
  };
}

/**
 * The compact record of what the model saw: which seqs went in whole, compacted or not at
 * all (`ranges`), the shape of the prompt (`hashes`, lib/prompt-shape.ts), and which notices
 * were delivered. Ranges keep it small at any session length.
 */
export function buildReceipt(
  plan: TurnPlan,
  parts: ReceiptParts,
  prompt: PromptItem[],
  delivered: DeliveredNotice[],
  context: TurnContext,
): TurnReceipt {
  const toolResult = toolResultsOf(prompt);
  const media = mediaOf(plan.model, prompt, toolResult);
  let mediaAsText = 0;
  for (let index = 0; index < prompt.length; index++) {
    const item = prompt[index]!;
    if (item.type === 'function_call' || mediaParts(contentOf(item)).length === 0) continue;
    mediaAsText += mediaSentAsText(media(), item, askAt(toolResult, index));
  }
  return {
    ...(mediaAsText > 0 ? { media_as_text: mediaAsText } : {}),
    model: plan.model.id,
    strategies: plan.strategies,
    ...parts.ranges,
    notices: delivered.map(noticeRecord),
    context,
    prompt: withSynthetic(
      parts.hashes,
      prompt,
      delivered.map((notice) => notice.name),
    ),
  };
}

/** What takes time in a receipt on a long prompt: its shape's hashes and its seq ranges. */
export interface ReceiptParts {
  hashes: PromptHashes;
  ranges: ReceiptRanges;
}

/** A slice of receipt work runs at most about this long before it gives way. */
const SLICE_MS = 8;

/**
 * The receipt's parts for `prompt` (as sent, with `tools`), made from `history` (the items
 * the strategies got) and `items` (what they made of them). Started once the model call is
 * under way, it first gives way (giveWay) so the call goes out, then hashes in slices of
 * SLICE_MS, giving way between them, so the work is done while the model answers rather than
 * after. (On Workers, where the clock stands still while code runs, it is one slice.)
 */
export async function receiptParts(
  history: readonly PromptItem[],
  items: readonly PromptItem[],
  prompt: readonly PromptItem[],
  tools: readonly Tool[],
): Promise<ReceiptParts> {
  await giveWay();
  const steps = promptHashSteps(prompt, tools);
  let sliceStart = performance.now();
  let step = steps.next();
  while (!step.done) {
    if (performance.now() - sliceStart > SLICE_MS) {
      await giveWay();
      sliceStart = performance.now();
    }
    step = steps.next();
  }
  return { hashes: step.value, ranges: receiptRanges(history, items) };
}

/**
 * One turn of the event loop: setImmediate where the runtime has it (Node, Deno), which runs
 * once pending I/O is handled; a timer elsewhere. Node holds a timer of 0 for at least 1 ms,
 * which a model answering at once (a replay, a cached answer, the echo model) would wait out
 * on every turn, as the receipt is awaited before the completion is stored.
 */
function giveWay(): Promise<void> {
  const immediate = (globalThis as { setImmediate?: (callback: () => void) => unknown }).setImmediate;
  return new Promise((resolve) => (immediate ? immediate(resolve) : setTimeout(resolve, 0)));
}

/** Which seqs of `history` went into `items` whole, compacted, or not at all. */
export function receiptRanges(history: readonly PromptItem[], items: readonly PromptItem[]): ReceiptRanges {
  return rangesInOrder(history, items) ?? rangesSorted(history, items);
}

/**
 * receiptRanges in one walk of each list, for a history and prompt whose seqs go up (as they
 * do but for synthetic items, which have none): no arrays of seqs, no copies sorted. Null when
 * either list's seqs go down.
 */
function rangesInOrder(history: readonly PromptItem[], items: readonly PromptItem[]): ReceiptRanges | null {
  const whole = new RangeText();
  const compacted = new RangeText();
  let previous = Number.NEGATIVE_INFINITY;
  for (const item of items) {
    const seq = item.seq;
    if (seq === undefined) continue;
    if (seq < previous) return null;
    previous = seq;
    (item.compacted ? compacted : whole).add(seq);
  }
  const dropped = new RangeText();
  let first: number | null = null;
  previous = Number.NEGATIVE_INFINITY;
  // The prompt's next seq not below the one read (items without a seq passed over).
  let at = 0;
  for (const item of history) {
    const seq = item.seq;
    if (seq === undefined) continue;
    if (seq < previous) return null;
    previous = seq;
    first ??= seq;
    let sent = items[at]?.seq;
    while (at < items.length && (sent === undefined || sent < seq)) sent = items[++at]?.seq;
    if (sent !== seq) dropped.add(seq);
  }
  return { whole: whole.text(), compacted: compacted.text(), dropped: dropped.text(), unread_before: first };
}

function rangesSorted(history: readonly PromptItem[], items: readonly PromptItem[]): ReceiptRanges {
  const whole: number[] = [];
  const compacted: number[] = [];
  const sent: number[] = [];
  for (const item of items) {
    if (item.seq === undefined) continue;
    sent.push(item.seq);
    (item.compacted ? compacted : whole).push(item.seq);
  }
  const read: number[] = [];
  for (const item of history) if (item.seq !== undefined) read.push(item.seq);
  // Both in seq order: one walk finds the seqs read and not sent.
  const sentInOrder = ascending(sent);
  const dropped: number[] = [];
  let at = 0;
  for (const seq of ascending(read)) {
    while (at < sentInOrder.length && sentInOrder[at]! < seq) at++;
    if (sentInOrder[at] !== seq) dropped.push(seq);
  }
  return {
    whole: seqRanges(whole),
    compacted: seqRanges(compacted),
    dropped: seqRanges(dropped),
    unread_before: read[0] ?? null,
  };
}

export function noticeRecord(notice: Omit<DeliveredNotice, 'content'>): {
  name: string;
  stored_as: string;
  posted_at: string;
} {
  return { name: notice.name, stored_as: notice.stored_as, posted_at: notice.posted_at };
}

/** `[1,2,3,5,7,8]` -> `"1-3,5,7-8"`. */
export function seqRanges(seqs: number[]): string {
  const ranges = new RangeText();
  for (const seq of ascending(seqs)) ranges.add(seq);
  return ranges.text();
}

/** Seqs given in ascending order, written as ranges (`1-3,5,7-8`) as they come. */
class RangeText {
  #text = '';
  #start: number | undefined;
  #previous = 0;

  add(seq: number): void {
    if (this.#start !== undefined && seq === this.#previous + 1) {
      this.#previous = seq;
      return;
    }
    this.#flush();
    this.#start = seq;
    this.#previous = seq;
  }

  text(): string {
    this.#flush();
    this.#start = undefined;
    return this.#text;
  }

  #flush(): void {
    if (this.#start === undefined) return;
    const range = this.#start === this.#previous ? `${this.#start}` : `${this.#start}-${this.#previous}`;
    this.#text = this.#text === '' ? range : `${this.#text},${range}`;
  }
}

/**
 * `seqs` in ascending order: as given when they are (prompts list their items in seq order, but
 * for a synthetic item or two).
 */
function ascending(seqs: number[]): number[] {
  return seqs.every((seq, index) => index === 0 || seqs[index - 1]! <= seq) ? seqs : [...seqs].sort((a, b) => a - b);
}
