import { z } from 'zod';
import { allParsedItems, itemSchema, type Item } from '../../items.ts';
import { checkInvariant } from './context.ts';

/**
 * A turn's input as its claim (log/claim.ts) takes it: checked against itemSchema, but for items
 * a route's schema gave, none rewritten since (lib/items.ts markParsedItems), which hold already.
 * An input of a library caller, of the OpenAI facade's routes, a queued input read from storage
 * or one whose images or files were checked (lib/session/attachments.ts gives new objects) is
 * checked.
 */

const inputSchema = z.array(itemSchema);

let checks = 0;

/** How many claims have checked their input against itemSchema. */
export function claimInputChecks(): number {
  return checks;
}

/** `input`, checked unless every item of it is one a route parsed (an empty input is checked). */
export function claimInput(input: Item[]): Item[] {
  if (allParsedItems(input)) return input;
  checks++;
  return checkInvariant(inputSchema, input);
}
