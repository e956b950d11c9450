/** Text for the inspector's rows and charts: pure functions of the API's objects. */

/** Cost and cache-read share of a turn's or a session's usage, for a summary line. */
export function usageText(usage: any): string {
  if (!usage) return '';
  const cost = usage.cost_usd === null ? 'cost unknown' : `$${usage.cost_usd.toFixed(6)}`;
  const share = usage.input_tokens > 0 ? Math.round((100 * usage.cached_input_tokens) / usage.input_tokens) : 0;
  return ` · ${cost} · ${share}% cache read`;
}

/** The share of a turn's prompt reused from the previous one. */
export function reusedText(turn: any): string {
  const size = turn.context?.prompt_chars;
  if (!size || turn.prefix_reused_chars === null) return '';
  return ` · ${Math.round((100 * turn.prefix_reused_chars) / size)}% reused`;
}

/** A turn's summary line. */
export function turnSummary(turn: any): string {
  return (
    `Turn ${turn.turn} · ${turn.status} · ${turn.model ?? ''} · ${turn.context?.prompt_chars ?? '?'} ` +
    `chars${reusedText(turn)}${usageText(turn.usage)}`
  );
}

/** An item as one text: a message, a call, or a call's output. */
export function itemText(item: any): string {
  if (item.type === 'message') return `${item.role}: ${item.content}`;
  if (item.type === 'function_call') return `call ${item.name}(${item.arguments})`;
  return `output ${item.call_id}: ${item.output}`;
}

/** A session's counts line. */
export function countsText(session: any): string {
  return (
    `${session.counts.items} items · ${session.counts.turns} turns · ${session.counts.tool_calls} tool calls · ` +
    `model ${session.model ?? 'default'}${usageText(session.usage)}`
  );
}
