import type { PromptFunctionCallItem, PromptItem } from '../items.ts';
import { canonicalArguments, repeatFlagReader, type HistoryAggregates } from './aggregates.ts';

/** What the strategies know about one tool item of the history. */
export interface ToolInfo {
  /**
   * The position of its tool call, counted newest-first over every function_call of the
   * history (newest = 1). An output has the position of its call.
   */
  position: number;
  /** The newest instance of a repeated call (or that call's output): never shortened. */
  protected: boolean;
}

/**
 * Facts about the whole history, computed once per prompt by the dispatcher from the items
 * it was handed and, for a tail view, the stored aggregates. Strategies read positions from
 * here rather than from their own input, so a list of strategies gives the same result on a
 * tail view as on the full history (an earlier strategy may have dropped items).
 */
export interface HistoryIndex {
  /** function_call items in the whole history (orphan calls included). */
  toolCalls: number;
  /** The i-th call (0-based, history order) repeats an earlier call's key. */
  isRepeat(index: number): boolean;
  /** The info of a tool item of the history, or of a compacted copy of one. */
  infoOf(item: PromptItem): ToolInfo | undefined;
  /** Records that `copy` stands for `original` (a compacted copy keeps its position). */
  derive(original: PromptItem, copy: PromptItem): void;
}

/**
 * Indexes a history (full, or a tail view when `aggregates` is given) and drops unpaired
 * tool items, which no provider accepts.
 *
 * Pairing: walking forward, an output pairs with the pending call of its call_id; a call
 * with no later output, a call superseded by a later call with the same call_id before its
 * output, and an output with no pending call are unpaired. Call ids are expected to be
 * unique in a session; with duplicates the tail view may pair differently from the full
 * history.
 *
 * Full history: positions, repeat flags and protection come from the items (canonical call
 * text as the key). Tail view: `toolCalls` and repeat flags come from the aggregates,
 * positions are counted from the end of the view (exact for the suffix that selectTail
 * keeps whole; calls before the cut are only there when protected), and a call is
 * protected when its seq is one of the `repeated` values (the aggregates must describe
 * exactly the history the view was taken from).
 */
export function indexHistory(
  items: readonly PromptItem[],
  aggregates?: HistoryAggregates,
): { history: HistoryIndex; items: PromptItem[] } {
  const info = new Map<PromptItem, ToolInfo>();
  const calls: PromptFunctionCallItem[] = [];
  const pending = new Map<string, PromptFunctionCallItem>();
  const paired = new Set<PromptItem>();
  const outputCall: [PromptItem, PromptFunctionCallItem][] = [];
  let toolItems = 0;
  for (const item of items) {
    if (item.type !== 'message') toolItems += 1;
    if (item.type === 'function_call') {
      calls.push(item);
      pending.set(item.call_id, item);
    } else if (item.type === 'function_call_output') {
      const call = pending.get(item.call_id);
      if (call === undefined) continue;
      pending.delete(item.call_id);
      paired.add(call);
      paired.add(item);
      outputCall.push([item, call]);
    }
  }

  let isRepeat: (index: number) => boolean;
  let toolCalls: number;
  if (aggregates) {
    toolCalls = aggregates.tool_calls;
    isRepeat = repeatFlagReader(aggregates);
    const protectedSeqs = new Set(Object.values(aggregates.repeated));
    for (let index = 0; index < calls.length; index += 1) {
      const call = calls[index]!;
      // A seq in `repeated` is by definition the newest instance of a repeated key.
      const isProtected = call.seq !== undefined && protectedSeqs.has(call.seq);
      info.set(call, { position: calls.length - index, protected: isProtected });
    }
  } else {
    toolCalls = calls.length;
    const flags = new Uint8Array(calls.length);
    // Keyed by name, then canonical arguments (the parts of canonicalCall), so the long
    // texts are hashed as they come from JSON.stringify, without a concatenation to flatten.
    const newestByName = new Map<string, Map<string, number>>();
    for (let index = 0; index < calls.length; index += 1) {
      const call = calls[index]!;
      let newestByArguments = newestByName.get(call.name);
      if (newestByArguments === undefined) {
        newestByArguments = new Map();
        newestByName.set(call.name, newestByArguments);
      }
      const key = canonicalArguments(call.arguments);
      if (newestByArguments.get(key) !== undefined) flags[index] = 1;
      newestByArguments.set(key, index);
    }
    const protectedIndexes = new Set<number>();
    // The newest instance of a key is flagged exactly when the key occurred before it.
    for (const newestByArguments of newestByName.values()) {
      for (const index of newestByArguments.values()) if (flags[index] === 1) protectedIndexes.add(index);
    }
    isRepeat = (index) => flags[index] === 1;
    for (let index = 0; index < calls.length; index += 1) {
      info.set(calls[index]!, { position: calls.length - index, protected: protectedIndexes.has(index) });
    }
  }
  for (const [output, call] of outputCall) info.set(output, info.get(call)!);

  const history: HistoryIndex = {
    toolCalls,
    isRepeat,
    infoOf: (item) => info.get(item),
    derive: (original, copy) => {
      const known = info.get(original);
      if (known !== undefined) info.set(copy, known);
    },
  };
  const sanitized = paired.size === toolItems ? [...items] : items.filter((item) => item.type === 'message' || paired.has(item));
  return { history, items: sanitized };
}
