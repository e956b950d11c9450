import type { ResponseOutputItem, ResponseReasoningItem } from 'openai/resources/responses/responses';
import type { ReasoningItem } from '../items.ts';
import type { ModelOutputItem, TokenLogprob } from '../models/model.ts';
import type { ItemKind } from './ids.ts';
import { outputItem } from './responses.ts';

/**
 * A model's output item in OpenAI's shape as a response's output holds it: its `reasoning` first,
 * as reasoning items (`<id of the kind "reasoning">_<n>`), then the item, under the id of its kind.
 * `encrypted`: the reasoning items carry their `encrypted_content` (reasoningOutput); `logprobs`:
 * the provider's log probabilities of a message's tokens.
 */
export function outputItems(
  item: ModelOutputItem,
  idOf: (kind: ItemKind) => string,
  encrypted = false,
  logprobs?: readonly TokenLogprob[],
): ResponseOutputItem[] {
  const reasoning = (item.reasoning ?? []).map((each, index) =>
    reasoningOutput(each, `${idOf('reasoning')}_${index + 1}`, encrypted),
  );
  return [...reasoning, outputItem(item, idOf(item.type), logprobs)];
}

/**
 * A reasoning item in OpenAI's shape: its summary, and with `encrypted` (a `store: false` request
 * with `include: ["reasoning.encrypted_content"]`) the provider's payload as `encrypted_content`,
 * which the client sends back with the item so that its next call gets the reasoning again.
 */
export function reasoningOutput(item: ReasoningItem, id: string, encrypted = false): ResponseReasoningItem {
  const summary = item.summary.map((part) => ({ type: 'summary_text' as const, text: part.text }));
  const payload =
    encrypted && item.encrypted_content !== undefined ? { encrypted_content: item.encrypted_content } : {};
  return { type: 'reasoning', id, summary, ...payload, status: 'completed' };
}
