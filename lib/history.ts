import { z } from 'zod';
import { RepeatedCalls } from './repeated-calls.ts';

export { RepeatedCalls } from './repeated-calls.ts';

/**
 * What the strategies and the session log share about a history, with no code of either:
 * the aggregates the strategies need of the part they are not handed (the log persists them
 * in its views) and the tail a strategy list asks for. lib/strategies/aggregates.ts computes
 * the aggregates; lib/strategies/select-tail.ts defines the tail.
 *
 * - `tool_calls` / `tool_outputs`: function_call and function_call_output items in the
 *   whole history.
 * - `repeat_flags`: one bit per function_call in history order (bit i set = the (i+1)-th
 *   call has the same call key as an earlier call), base64 of a little-endian bit array, or,
 *   when shorter, `~` and the gaps between the set bits (lib/strategies/aggregates.ts
 *   `encodeRepeats`). Enough to recompute any epoch schedule for any configuration.
 * - `repeated`: for every call key seen at least twice, the seq of its newest function_call,
 *   keyed by the call key's first REPEATED_KEY_CHARS hex characters; stored as a JSON object,
 *   held as a RepeatedCalls (lib/repeated-calls.ts), which a few new repeats extend without a
 *   copy of the whole map.
 * - `repeated_older` (absent: `repeated` is whole): `repeated` holds only the entries whose seq
 *   is at least `before_seq`, the others are stored apart by the session log (the view of record
 *   `record` wrote them, lib/session/log/older-repeated.ts). Exact for anything that looks only at
 *   seqs from `before_seq` on: a tail view from there, under an overflow boundary at or after it.
 * - `images`: `input_image` parts in the whole history (message contents and outputs).
 * - `image_order`: one bit per function_call and per image part in history order (bit set =
 *   a function_call, clear = an image part; `tool_calls + images` bits), base64 of a
 *   little-endian bit array; '' while the history has no image (every bit would be set). It
 *   tells how many calls came before any image (`shorten_images` needs the tail that holds its
 *   newest whole images).
 */
/** `repeated` as stored: a JSON object of call keys' first characters to seqs. */
export const repeatedEntriesSchema = z.record(z.string(), z.number().int().positive());

/** `image_order` as stored: padded base64 (whole quads). */
export const PADDED_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
/**
 * `repeat_flags` as stored (lib/strategies/aggregates.ts encodeRepeats): padded base64, or `~`
 * and gaps, each base-32 digits of `A-Za-f` ending in one of `g-z0-9-_`.
 */
export const REPEAT_FLAGS = new RegExp(`${PADDED_BASE64.source}|^~(?:[A-Za-f]*[g-z0-9_-])*$`);

export const historyAggregatesSchema = z
  .object({
    tool_calls: z.number().int().nonnegative(),
    tool_outputs: z.number().int().nonnegative(),
    repeat_flags: z.string().regex(REPEAT_FLAGS),
    repeated: repeatedEntriesSchema.transform((entries) => RepeatedCalls.of(entries)),
    images: z.number().int().nonnegative(),
    image_order: z.string().regex(PADDED_BASE64),
    repeated_older: z
      .object({ before_seq: z.number().int().positive(), record: z.number().int().positive() })
      .strict()
      .optional(),
  })
  .strict();
export type HistoryAggregates = z.infer<typeof historyAggregatesSchema>;

/**
 * The hex characters of a call key that key `repeated`: 48 bits, as the repeat index keys calls
 * (lib/session/log/key-shards.ts), so a long history's map costs a third less to store and parse.
 */
export const REPEATED_KEY_CHARS = 12;

/**
 * The seqs of the newest instances of repeated calls (the values of `repeated`), ascending,
 * without duplicates (kept with the map: a turn asks for them several times).
 */
export function repeatedSeqs(aggregates: HistoryAggregates): readonly number[] {
  return aggregates.repeated.seqs();
}

/**
 * How much of a long history a strategy list needs (see `selectTail`): the newest
 * `toolCalls` tool calls with everything after them, plus the calls with these `seqs`
 * (and their outputs) from further back. `'all'` asks for the whole history.
 */
export interface TailRequirement {
  toolCalls: number | 'all';
  seqs: number[];
  /**
   * Of the newest `toolCalls` calls, how many newest ones (with their outputs) may be shown
   * whole; the older ones are only ever compacted or dropped. Absent: all of them. The store
   * uses it to keep only these outputs inline in a view.
   */
  wholeCalls?: number;
}

/**
 * The names of a strategy list, comma-separated or an array: names trimmed, empty entries
 * ignored. The one way a list is split (the environment, sessions, requests).
 *
 * @example splitStrategyNames(' shorten_tools, ,inbox') // ['shorten_tools', 'inbox']
 */
export function splitStrategyNames(list: string | readonly string[]): string[] {
  return (typeof list === 'string' ? list.split(',') : list).map((name) => name.trim()).filter((name) => name !== '');
}
