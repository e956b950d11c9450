import { summaryMessage } from '../compaction/index.ts';
import type { HistoryAggregates } from '../history.ts';
import { itemChars } from '../prompt-shape.ts';
import { outputLength, type PromptItem } from '../items.ts';
import type { ContextStart } from '../session/records.ts';
import { preparePrompt, type PreparedPrompt, type StrategyConfig } from '../strategies/index.ts';
import type { TurnContext } from './types.ts';

/**
 * How a prompt is put together, the one way turns, the prompt preview and stateless calls
 * (lib/openai/stateless.ts) do it: the summary of a compacted context first, the strategies
 * over the history with the notices where `inbox` stands, the instructions first as a system
 * message. Pure: reading the history, hydrating payloads and fitting the window are the
 * callers'.
 */

export interface PromptSources {
  /** The history the strategies see (a tail view, or the items of a stateless call, numbered). */
  history: PromptItem[];
  /** The compacted context's start: its summary goes before the history (`pending`: not written yet, the preview's). */
  contextStart: (Pick<ContextStart, 'summary'> & { pending?: true }) | null;
  strategies: string[];
  strategyConfig: StrategyConfig;
  /** The plain string environment (PROMPT_STRATEGY, thresholds). */
  env: Record<string, string | undefined>;
  /** Present when `history` is only a tail of the history. */
  aggregates?: HistoryAggregates | undefined;
  /** The notices the `inbox` strategy inserts; `pending` marks those not delivered (the preview's). */
  notices: readonly { content: string; pending?: true }[];
  instructions: string | null;
  /** The first seq of the newest turn's input, whose images `shorten_images` keeps whole. */
  inputFromSeq?: number | undefined;
}

export interface AssembledPrompt {
  prompt: PromptItem[];
  /** The last item of the cache-stable prefix, instructions included. */
  cacheBreakpoint?: number;
  prepared: PreparedPrompt;
}

export function assemblePrompt(sources: PromptSources): AssembledPrompt {
  const { contextStart, history, aggregates } = sources;
  const notices = sources.notices.map(
    (notice): PromptItem => ({ ...inboxMessage(notice.content), ...(notice.pending ? { pending: true } : {}) }),
  );
  const prepared = preparePrompt(contextStart ? [summaryItem(contextStart), ...history] : history, sources.strategies, {
    config: sources.strategyConfig,
    env: sources.env,
    ...(aggregates ? { aggregates } : {}),
    // A compacted context is read whole from its start, where an output may answer a call before it.
    ...(contextStart ? { compactedContext: true } : {}),
    inputFromSeq: sources.inputFromSeq,
    inbox: (items) => [...items, ...notices],
  });
  return { ...withInstructions(sources.instructions, prepared.items, prepared.stablePrefixLength), prepared };
}

/** The counts of the response's `context` that every prompt has, over the prompt as sent. */
export function promptContext(
  prepared: PreparedPrompt,
  prompt: PromptItem[],
): Pick<TurnContext, 'strategies' | 'items_in_prompt' | 'prompt_chars'> & PreparedPrompt['stats'] {
  return {
    strategies: prepared.strategies,
    items_in_prompt: prompt.length,
    prompt_chars: promptCharacters(prompt),
    ...prepared.stats,
  };
}

export function compactionContext(
  promptTokens: number,
  context: Pick<ContextStart, 'start_seq'> | null,
  compaction: TurnContext['compaction'],
): Partial<TurnContext> {
  return {
    prompt_tokens: promptTokens,
    ...(context ? { context_start_seq: context.start_seq } : {}),
    ...(compaction ? { compaction } : {}),
  };
}

/** The session instructions go first, as a system message; the cache breakpoint shifts with them. */
function withInstructions(
  instructions: string | null,
  items: PromptItem[],
  stablePrefixLength: number,
): { prompt: PromptItem[]; cacheBreakpoint?: number } {
  const prompt: PromptItem[] = instructions ? [systemMessage(instructions), ...items] : items;
  const stable = stablePrefixLength + (instructions ? 1 : 0);
  return stable > 0 ? { prompt, cacheBreakpoint: stable - 1 } : { prompt };
}

/**
 * The instructions as the prompt's first item: one frozen object per text, kept for the texts
 * used last (SYSTEM_MESSAGE_CHARS of them in all), so that a turn's receipt finds the hash of
 * its prompt's first block kept from the turn before (lib/prompt-shape.ts hashes a frozen item
 * once per process) instead of hashing that block again on every turn.
 */
function systemMessage(instructions: string): PromptItem {
  let message = systemMessages.get(instructions);
  if (message) systemMessages.delete(instructions);
  else {
    message = Object.freeze({ type: 'message', role: 'system', content: instructions });
    systemMessageChars += instructions.length;
  }
  systemMessages.set(instructions, message);
  for (const [text] of systemMessages) {
    if (systemMessageChars <= SYSTEM_MESSAGE_CHARS || text === instructions) break;
    systemMessages.delete(text);
    systemMessageChars -= text.length;
  }
  return message;
}

/** The characters of the instructions kept as messages (the newest kept whatever its length). */
const SYSTEM_MESSAGE_CHARS = 1 << 20;
const systemMessages = new Map<string, PromptItem>();
let systemMessageChars = 0;

function summaryItem(contextStart: Pick<ContextStart, 'summary'> & { pending?: true }): PromptItem {
  return { ...summaryMessage(contextStart.summary), ...(contextStart.pending ? { pending: true } : {}) };
}

function inboxMessage(content: string): PromptItem {
  return { type: 'message', role: 'user', content, synthetic: 'inbox' };
}

/**
 * Characters the model is sent: message content, call names and arguments, outputs (out of line
 * by their length), as the prompt's shape counts them (lib/prompt-shape.ts): content of parts as
 * their JSON, so the part of a prompt reused from the turn before (`prefix_reused_chars`) is
 * never more than the prompt.
 */
export function promptCharacters(prompt: PromptItem[]): number {
  let total = 0;
  for (const item of prompt)
    total +=
      item.type === 'function_call_output' && item.output_ref && item.output === ''
        ? outputLength(item)
        : itemChars(item);
  return total;
}
