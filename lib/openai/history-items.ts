import type { ClientItem, Item } from '../items.ts';
import { checkAttachments, hasInlineMedia } from '../session/attachments.ts';
import { isCanonicalJson } from '../strategies/canonical-json.ts';
import type { IndexFacade } from './facade.ts';

// How a resent item is compared with a stored one (./history-index.ts, ./resent-after.ts,
// ./failed-steps.ts).

/**
 * The fields an item is compared by (what a client resends of it). A call's arguments are
 * compared as JSON.stringify writes their value: a call keeps the model's text of them (spacing
 * and escapes as streamed), which a client may resend as its own JSON of the parsed value (the
 * AI SDK does). Arguments that are no JSON object, array or null (cut short, or a bare string,
 * number or boolean) compare as `{}`: the AI SDK takes such a call for an invalid tool input and
 * resends it with `{}`, other clients resend the model's text.
 */
export function canonical(item: Item): unknown[] {
  if (item.type === 'message') return ['message', item.role, item.content];
  if (item.type === 'function_call') return ['function_call', item.call_id, item.name, argumentsValue(item.arguments)];
  return ['function_call_output', item.call_id, item.output];
}

/** What arguments that are no JSON object, array or null compare as (see canonical). */
const NOT_AN_OBJECT = '{}';

/** JSON.stringify of the arguments' value, or NOT_AN_OBJECT. */
function argumentsValue(text: string): string {
  // The common case: text already so (sorted keys aside, which JSON.stringify keeps as parsed).
  if (isCanonicalJson(text)) return text[0] === '{' || text[0] === '[' || text === 'null' ? text : NOT_AN_OBJECT;
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' ? JSON.stringify(value) : NOT_AN_OBJECT;
  } catch {
    return NOT_AN_OBJECT;
  }
}

/**
 * The items as stored: an image or file sent inline is stored as a reference to its blob
 * (lib/session/attachments.ts), so a resend is compared with its stored items so. Undefined
 * when a part is not one the service stores (the request is refused later, matching nothing).
 */
export function asStored(facade: IndexFacade, items: readonly ClientItem[]): readonly ClientItem[] | undefined {
  if (!hasInlineMedia(items as Item[])) return items;
  try {
    return checkAttachments(items as Item[], facade.services.config).items as ClientItem[];
  } catch {
    return undefined;
  }
}
