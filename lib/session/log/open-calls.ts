import { InvalidRequestError } from '../../errors.ts';
import type { Item } from '../../items.ts';
import { MAX_OPEN_CALLS } from '../records.ts';
import type { Head } from './head.ts';

/**
 * The function calls still open in a session's history: the ones a commit's input may answer,
 * and the check that an input (or an imported line) neither reopens nor answers a call twice.
 */

/** The calls without an output after the newest record (null: not tracked by that record). */
export function openCallsOf(newest: Head['newest']): string[] | null {
  if (!newest) return [];
  return (newest.done ? newest.done.open_calls : newest.record.open_calls) ?? null;
}

/**
 * Checks input items against the calls still open in the history and returns the calls
 * open after them (see `trackCall`).
 */
export function checkCalls(input: readonly Item[], open: readonly string[]): string[] {
  const pending = new Set(open);
  input.forEach((item, index) => {
    trackCall(pending, item, `input.${index}`);
  });
  return [...pending].slice(-MAX_OPEN_CALLS);
}

/**
 * Checks one item against the open calls `pending` and updates them: a call must not reuse
 * the call_id of an open call, and an output must answer an open call (so a second output
 * for the same call is refused). `named` names the item in the 400 (or makes its name, only for one).
 */
export function trackCall(pending: Set<string>, item: Item, named: string | (() => string)): void {
  if (item.type === 'function_call') {
    if (pending.has(item.call_id))
      throw new InvalidRequestError(`${nameOf(named)}.call_id: a call with call_id ${item.call_id} is already open`, {
        field: `${nameOf(named)}.call_id`,
      });
    pending.add(item.call_id);
  } else if (item.type === 'function_call_output' && !pending.delete(item.call_id)) {
    throw new InvalidRequestError(
      `${nameOf(named)}.call_id: no open function_call with call_id ${item.call_id} (unknown, or answered already)`,
      { field: `${nameOf(named)}.call_id` },
    );
  }
}

function nameOf(named: string | (() => string)): string {
  return typeof named === 'string' ? named : named();
}
