import type { PromptItem } from '../items.ts';
import { contentText } from '../content.ts';
import { makesBlock } from '../models/cache-breakpoints.ts';

/** The instructions the summary model gets (SUMMARY_PROMPT overrides them). */
export const DEFAULT_SUMMARY_PROMPT =
  'You maintain the memory of a long conversation between a user and an assistant that uses tools. ' +
  'Summarize the transcript in the last message: the goals, decisions, facts learned from tool results, ' +
  'open questions and the current state of the work. Keep names, numbers and identifiers exactly. ' +
  'Tool calls marked as interrupted got no result and must not be assumed to have run; keep their call_id ' +
  '(a result may still come later, as "Output of tool call <call_id>"). ' +
  'Answer with the summary only.';

/** Opens the summary message in the prompt, so the model knows what it is reading. */
export const SUMMARY_HEADER = 'Summary of the earlier conversation (it replaces the older messages):\n';

/** Characters of one item the transcript keeps (head and tail of longer ones). */
export const TRANSCRIPT_ITEM_CHARS = 240;

/** Keeps the head and the tail of a long text, saying how much was left out. */
export function clipText(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const half = Math.max(0, Math.floor((limit - 24) / 2));
  return `${text.slice(0, half)} [... ${text.length - 2 * half} chars ...] ${text.slice(text.length - half)}`;
}

/**
 * The text the summary model summarizes (sent as the last user message, so the echo model's
 * summary is `"echo: " + transcript`, deterministic). One line per item, clipped to
 * {@link TRANSCRIPT_ITEM_CHARS}; the previous summary first; a call of `interrupted` (the
 * plan's calls without an output) is written as interrupted (a note, never a replay), with its
 * call_id, which names its output if it comes later (docs/API.md, "Turns"). A message the
 * model was never sent (no text but whitespace, no image or file: makesBlock), such as the empty
 * assistant message holding the reasoning an answer ended with, makes no line.
 *
 * @example renderTranscript(null, [{ type: 'message', role: 'user', content: 'hi', seq: 1 }], new Set())
 * // '#1 user: hi'
 */
export function renderTranscript(
  previousSummary: string | null,
  items: readonly PromptItem[],
  interrupted: ReadonlySet<PromptItem>,
): string {
  const lines: string[] = [];
  if (previousSummary) lines.push(`Earlier summary: ${previousSummary}`);
  const names = new Map<string, string>();
  for (const item of items) {
    const at = item.seq !== undefined ? `#${item.seq} ` : '';
    if (item.type === 'message') {
      if (!makesBlock(item)) continue;
      lines.push(`${at}${item.role}: ${clipText(contentText(item.content), TRANSCRIPT_ITEM_CHARS)}`);
    } else if (item.type === 'function_call') {
      names.set(item.call_id, item.name);
      const call = `${item.name}(${clipText(item.arguments, TRANSCRIPT_ITEM_CHARS)})`;
      lines.push(
        interrupted.has(item)
          ? `${at}tool call ${call} was interrupted: no result was recorded, and it was not run again ` +
              `(call_id ${item.call_id})`
          : `${at}tool call ${call}`,
      );
    } else {
      const text = item.output === '' && item.output_ref ? item.output_ref.head : contentText(item.output);
      lines.push(
        `${at}tool result of ${names.get(item.call_id) ?? item.call_id}: ${clipText(text, TRANSCRIPT_ITEM_CHARS)}`,
      );
    }
  }
  return lines.join('\n');
}

/** The summary as the prompt carries it: a synthetic user message opening the context. */
export function summaryMessage(summary: string): PromptItem {
  return { type: 'message', role: 'user', content: SUMMARY_HEADER + summary, synthetic: 'summary' };
}
