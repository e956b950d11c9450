/** Text for the inspector's rows and charts: pure functions of the API's objects. */

/** A count and its noun, singular for one: "1 turn", "2 turns" (`plural` when not the noun and "s"). */
export function counted(count: number, noun: string, plural = `${noun}s`): string {
  return `${count} ${count === 1 ? noun : plural}`;
}

/** Cost and cache-read share of a turn's or a session's usage, for a summary line. */
export function usageText(usage: any): string {
  if (!usage) return '';
  const cost = usage.cost_usd === null ? 'cost unknown' : `$${usage.cost_usd.toFixed(6)}`;
  const share = usage.input_tokens > 0 ? Math.round((100 * usage.cached_input_tokens) / usage.input_tokens) : 0;
  return ` · ${cost} · ${share}% cache read`;
}

/** A cost in USD: cents, or two significant digits under a cent ("$0.41", "$0.0012"). */
export function costText(usd: number): string {
  return `$${usd > 0 && usd < 0.01 ? usd.toPrecision(2) : usd.toFixed(2)}`;
}

/**
 * A cost limit's spend against its value, `$0.41 / $1.00`; when the two read the same so but are
 * not equal, to the micro-dollar (as the counts line writes a cost) or finer, so that a limit not
 * reached never reads as met, nor one passed as met exactly.
 */
export function budgetCostText(spent: number, max: number): string {
  if (spent === max || costText(spent) !== costText(max)) return `${costText(spent)} / ${costText(max)}`;
  let digits = 6;
  while (digits < 9 && spent.toFixed(digits) === max.toFixed(digits)) digits++;
  return `$${spent.toFixed(digits)} / $${max.toFixed(digits)}`;
}

/** The share of a turn's prompt reused from the previous one. */
export function reusedText(turn: any): string {
  const size = turn.context?.prompt_chars;
  if (!size || turn.prefix_reused_chars === null) return '';
  return ` · ${Math.round((100 * turn.prefix_reused_chars) / size)}% reused`;
}

/** A turn's summary line; an aborted turn's says why (the abort notice's content). */
export function turnSummary(turn: any): string {
  if (turn.status === 'aborted') {
    const details = turn.error?.details ?? {};
    const reason = details.reason ?? turn.error?.message ?? 'no reason given';
    return `Turn ${turn.turn} · aborted by notice ${details.notice ?? 'abort'}: “${reason}”`;
  }
  // A turn closed before its receipt was written (cancelled, or refused at its claim) has neither.
  const model = turn.model ? ` · ${turn.model}` : '';
  const size = typeof turn.context?.prompt_chars === 'number' ? ` · ${counted(turn.context.prompt_chars, 'char')}` : '';
  return `Turn ${turn.turn} · ${turn.status}${model}${size}${reusedText(turn)}${usageText(turn.usage)}`;
}

/** A content's text: a string as is; of parts, the text parts (images and files show as media, items.ts). */
export function contentText(content: any): string {
  if (!Array.isArray(content)) return String(content ?? '');
  return content
    .filter((part) => part.type === 'input_text')
    .map((part) => part.text)
    .join('\n');
}

/** An item as one text: a message, a call, or a call's output. */
export function itemText(item: any): string {
  if (item.type === 'message') return `${reasoningLines(item)}${item.role}: ${contentText(item.content)}`;
  if (item.type === 'function_call') return `${reasoningLines(item)}call ${item.name}(${item.arguments})`;
  return `output ${item.call_id}: ${contentText(item.output)}`;
}

/** The model's reasoning an item carries, a line per block ("[redacted]": one with no text), each ending in \n. */
function reasoningLines(item: any): string {
  const blocks: any[] = Array.isArray(item.reasoning) ? item.reasoning : [];
  return blocks
    .map((block) => {
      const text = (block.summary ?? []).map((part: any) => part.text).join('');
      return `reasoning: ${text === '' ? '[redacted]' : text}\n`;
    })
    .join('');
}

/** A size in bytes: "850 B", "142 KB", "1.5 MB". */
export function sizeText(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

/** Whether what the model got of an item (its `compacted_as`) holds an image placeholder (`[image...`). */
export function imagePruned(compactedAs: any): boolean {
  return Object.values(compactedAs ?? {}).some((value) =>
    (Array.isArray(value) ? value.map((part) => part.text ?? '') : [String(value)]).some((text) =>
      text.includes('[image'),
    ),
  );
}

/** A session's counts line. */
export function countsText(session: any): string {
  return (
    `${counted(session.counts.items, 'item')} · ${counted(session.counts.turns, 'turn')} · ` +
    `${counted(session.counts.tool_calls, 'tool call')} · ` +
    `model ${session.model ?? 'default'}${usageText(session.usage)}${tokensText(session.usage)}`
  );
}

/**
 * A session's totals by token kind: what its model calls were billed, the completed turns' usage
 * and the estimates of failed turns whose model may have run, and compactions' summaries.
 */
function tokensText(usage: any): string {
  if (!usage) return '';
  return (
    ` · billed (${counted(usage.turns, 'completed turn')}, failed turns' estimates, summaries): ` +
    `${counted(usage.input_tokens, 'input token')} ` +
    `(${usage.cached_input_tokens} cached, ${usage.cache_write_tokens} written to cache), ` +
    `${usage.output_tokens} output (${usage.reasoning_tokens} reasoning)`
  );
}

const UNITS: [string, number][] = [
  ['y', 365 * 86_400],
  ['mo', 30 * 86_400],
  ['d', 86_400],
  ['h', 3_600],
  ['min', 60],
];

/** `then` from `now` in words: "just now" under a minute, else "3 min ago" (or "in 3 min"). */
export function relativeTime(then: Date, now: Date): string {
  const seconds = (now.getTime() - then.getTime()) / 1000;
  const unit = UNITS.find(([, size]) => Math.abs(seconds) >= size);
  if (!unit) return 'just now';
  const count = `${Math.floor(Math.abs(seconds) / unit[1])} ${unit[0]}`;
  return seconds > 0 ? `${count} ago` : `in ${count}`;
}

/** A span of milliseconds: "850 ms", "1.4 s", "3 min 5 s". */
export function durationText(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}
