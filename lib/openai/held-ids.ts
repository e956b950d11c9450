import type { LogScope } from '../session/keys.ts';
import { OpenAIApiError } from './errors.ts';
import { parseItemId, parseResponseId } from './ids.ts';
import { storedItemId } from './listed-items.ts';
import type { PreparedRequest } from './request.ts';

/**
 * Checks the items a request under `previous_response_id` or `conversation` stores (their places
 * in its `input`, `positions`) against the items its conversation holds: an item sent with the id
 * of one of them (the response's output sent back, say) is refused with OpenAI's 400, naming its
 * place (`input[<i>].id`), as a function_call reopening an open call is
 * (lib/session/log/open-calls.ts). `held` says an id is one of them (heldIn: the id an item up
 * to a seq is listed under, lib/openai/listed-items.ts, so an id of an item a delete took out,
 * its seq past those or taken again under another generation, is none; a branch's, also its
 * response's output as kept). An `item_reference` adds its item as itself (its entry carries no id),
 * and the items a resend left out (the history the conversation holds) are not among those checked.
 * Reads nothing: the ids are the request's, the bounds what the request read already.
 */
export function checkHeldIds(
  prepared: Pick<PreparedRequest, 'body' | 'origins'>,
  positions: readonly number[],
  held: (id: string) => boolean,
): void {
  const { input } = prepared.body;
  if (typeof input === 'string') return;
  const ids = new Map<number, string>();
  input.forEach((entry, index) => {
    const id = 'id' in entry ? entry.id : undefined;
    if (typeof id === 'string' && entry.type !== 'compaction' && entry.type !== 'item_reference')
      ids.set(prepared.origins[index] ?? index, id);
  });
  for (const position of positions) {
    const id = ids.get(position);
    if (id === undefined || !held(id)) continue;
    throw new OpenAIApiError(
      400,
      'invalid_request',
      `Duplicate item found with id ${id}. Remove duplicate items from your input and try again.`,
      `input[${position}].id`,
    );
  }
}

/**
 * Whether an id names one of the first `items` items of the session `scope` reads, as listed; in
 * a fork, also as the conversation it was forked from (or that one's own parent) listed an item
 * the fork inherited: that conversation's id of an item up to the fork point, naming no generation
 * or the one the fork reads (a parent's ids are not read, so one of an item a delete took out
 * before the fork, its seq taken again since, counts too).
 */
export function heldIn(scope: LogScope, items: number): (id: string) => boolean {
  return (id) => {
    const ref = parseItemId(id);
    if (!ref || ref.seq > items) return false;
    if (ref.sessionId === scope.id) return storedItemId(scope, ref.kind, ref.seq) === id;
    return (scope.ancestors ?? []).some(
      (point) =>
        point.id === ref.sessionId &&
        ref.seq <= point.seq &&
        (ref.generation === undefined || ref.generation === point.generation),
    );
  };
}

/**
 * Whether an id names an item the branch a request makes at response `responseId` holds: one of its
 * conversation (read as `scope`) before that response's output (its id's seq), or that output as
 * its kept object `kept` has it.
 */
export function heldAtBranch(
  scope: LogScope,
  responseId: string,
  kept: { output: readonly { id?: string | undefined }[] } | undefined,
): (id: string) => boolean {
  const before = heldIn(scope, (parseResponseId(responseId)?.outputSeq ?? 1) - 1);
  const output = new Set(kept?.output.map((item) => item.id));
  return (id) => before(id) || output.has(id);
}
