import type { PromptItem, PromptMessageItem } from '../items.ts';

/**
 * Turns notices into the user messages the model sees: `{type: 'message', role: 'user',
 * content, synthetic: 'inbox'}`, with `pending: true` for the prompt preview (the API's "Items"
 * and "Prompt preview"). The messages carry no seq: notices are never stored as history.
 */
export function noticeMessages(
  notices: ReadonlyArray<{ content: string }>,
  options: { pending?: boolean } = {},
): PromptMessageItem[] {
  return notices.map((notice) => {
    const message: PromptMessageItem = { type: 'message', role: 'user', content: notice.content, synthetic: 'inbox' };
    if (options.pending) message.pending = true;
    return message;
  });
}

/**
 * The dispatcher's `inbox` hook for one turn: appends the notices (already consumed by
 * `Inbox.consume`, or peeked for the preview) as the last messages of the prompt at the
 * point where `inbox` stands in the strategy list. Inbox I/O is asynchronous and strategies
 * are synchronous, so the turn consumes first and hands the result over through this hook.
 * It never mutates its input.
 *
 * @example
 * const { delivered } = await inbox.consume(sessionId, { turn });
 * preparePrompt(items, strategies, { inbox: inboxHook(delivered) });
 */
export function inboxHook(
  notices: ReadonlyArray<{ content: string }>,
  options: { pending?: boolean } = {},
): (items: PromptItem[]) => PromptItem[] {
  const messages = noticeMessages(notices, options);
  return (items) => (messages.length === 0 ? items : [...items, ...messages.map((message) => ({ ...message }))]);
}
