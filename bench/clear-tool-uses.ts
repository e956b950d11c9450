import type { PromptItem } from '../lib/items.ts';
import { promptCharacters } from '../lib/turn/index.ts';

/**
 * BASELINE, not a tailgate strategy: a model of Anthropic's server-side context editing
 * `clear_tool_uses_20250919` with its defaults, for comparison in the prompt-cache benchmark.
 *
 * Applied to each request on its own (the API is stateless; the client sends the whole
 * history every time): when the prompt holds more than `triggerCharacters` (100k input
 * tokens at about 4 characters a token), every tool result except those of the `keep`
 * newest tool uses is replaced by a short placeholder. Tool inputs (call arguments) are kept,
 * as `clear_tool_inputs` defaults to false. No `clear_at_least`.
 */
export function clearToolUsesBaseline(
  options: { triggerCharacters?: number; keep?: number; placeholder?: string } = {},
): (items: PromptItem[]) => PromptItem[] {
  const triggerCharacters = options.triggerCharacters ?? 400_000;
  const keep = options.keep ?? 3;
  const placeholder = options.placeholder ?? '[tool result cleared]';
  return (items) => {
    if (promptCharacters(items) <= triggerCharacters) return items;
    const keptCallIds = new Set<string>();
    for (let index = items.length - 1; index >= 0 && keptCallIds.size < keep; index--) {
      const item = items[index]!;
      if (item.type === 'function_call') keptCallIds.add(item.call_id);
    }
    return items.map((item) =>
      item.type === 'function_call_output' && !keptCallIds.has(item.call_id)
        ? { type: 'function_call_output', call_id: item.call_id, output: placeholder }
        : item,
    );
  };
}
