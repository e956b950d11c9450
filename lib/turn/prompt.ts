import { outputLength, type PromptItem } from '../items.ts';
import { summaryMessage } from '../compaction/index.ts';
import type { ContextStart } from '../session/records.ts';
import type { TurnContext } from './types.ts';

/** How a prepared prompt is put together: the summary, the instructions, the notices. */

/** The history the strategies see: the summary first when the context was compacted. */
export function withSummary(context: ContextStart | null, history: PromptItem[]): PromptItem[] {
  return context ? [summaryMessage(context.summary), ...history] : history;
}

export function compactionContext(
  promptTokens: number,
  context: ContextStart | null,
  compaction: TurnContext['compaction'],
): Partial<TurnContext> {
  return {
    prompt_tokens: promptTokens,
    ...(context ? { context_start_seq: context.start_seq } : {}),
    ...(compaction ? { compaction } : {}),
  };
}

/** The session instructions go first, as a system message; the cache breakpoint shifts with them. */
export function withInstructions(
  instructions: string | null,
  items: PromptItem[],
  stablePrefixLength: number,
): { prompt: PromptItem[]; cacheBreakpoint?: number } {
  const prompt: PromptItem[] = instructions
    ? [{ type: 'message', role: 'system', content: instructions }, ...items]
    : items;
  const stable = stablePrefixLength + (instructions ? 1 : 0);
  return stable > 0 ? { prompt, cacheBreakpoint: stable - 1 } : { prompt };
}

export function inboxMessage(content: string): PromptItem {
  return { type: 'message', role: 'user', content, synthetic: 'inbox' };
}

/** Characters the model is sent: message content, call names and arguments, outputs. */
export function promptCharacters(prompt: PromptItem[]): number {
  let total = 0;
  for (const item of prompt) {
    if (item.type === 'message') total += item.content.length;
    else if (item.type === 'function_call') total += item.name.length + item.arguments.length;
    else total += item.output_ref && item.output === '' ? outputLength(item) : item.output.length;
  }
  return total;
}
