import type { ResponseOutputItem, ResponseReasoningItem } from 'openai/resources/responses/responses';
import type { ReasoningItem } from '../items.ts';
import type { ModelOutputItem } from '../models/model.ts';
import type { ItemKind } from './ids.ts';
import { outputItem } from './responses.ts';

/**
 * A model's output item in OpenAI's shape as a response's output holds it: its `reasoning` first,
 * as reasoning items (`<id of the kind "reasoning">_<n>`), then the item, under the id of its kind.
 */
export function outputItems(item: ModelOutputItem, idOf: (kind: ItemKind) => string): ResponseOutputItem[] {
  const reasoning = (item.reasoning ?? []).map((each, index) =>
    reasoningOutput(each, `${idOf('reasoning')}_${index + 1}`),
  );
  return [...reasoning, outputItem(item, idOf(item.type))];
}

/**
 * A reasoning item in OpenAI's shape: its summary, without `encrypted_content` (the conversation
 * keeps the provider's payload; the facade takes no reasoning item back).
 */
export function reasoningOutput(item: ReasoningItem, id: string): ResponseReasoningItem {
  const summary = item.summary.map((part) => ({ type: 'summary_text' as const, text: part.text }));
  return { type: 'reasoning', id, summary, status: 'completed' };
}
