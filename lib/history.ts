import { z } from 'zod';

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
 *   keyed by the call key's first REPEATED_KEY_CHARS hex characters.
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
export const historyAggregatesSchema = z
  .object({
    tool_calls: z.number().int().nonnegative(),
    tool_outputs: z.number().int().nonnegative(),
    repeat_flags: z.string(),
    repeated: z.record(z.string(), z.number().int().positive()),
    images: z.number().int().nonnegative(),
    image_order: z.string(),
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

const seqsOfRepeated = new WeakMap<object, readonly number[]>();

/**
 * The seqs of the newest instances of repeated calls (the values of `repeated`), ascending,
 * without duplicates. Kept per `repeated` object, which is never changed once built: a turn
 * asks for them several times, and a long history has tens of thousands.
 */
export function repeatedSeqs(aggregates: HistoryAggregates): readonly number[] {
  return seqsOfRepeated.get(aggregates.repeated) ?? checkedRepeatedSeqs(aggregates.repeated)!;
}

/**
 * The seqs of a `repeated` map known without a walk (repeatedSeqs: kept or made once), or
 * undefined; and keeping them for a new map (the aggregates' extension derives them from the
 * map it copied, lib/strategies/aggregates.ts).
 */
export function knownRepeatedSeqs(repeated: object): readonly number[] | undefined {
  return seqsOfRepeated.get(repeated);
}

export function keepRepeatedSeqs(repeated: object, seqs: readonly number[]): void {
  seqsOfRepeated.set(repeated, seqs);
}

/**
 * repeatedSeqs of a value that may not be a `repeated` map (a view read back): null unless each
 * of its own keys maps to a positive safe integer and none is `__proto__` (which a copy by the
 * schema would leave out). One pass over the map: a long history's, parsed from JSON, is an
 * object in dictionary mode, where `for...in` costs a third of `Object.values`.
 */
export function checkedRepeatedSeqs(repeated: object): readonly number[] | null {
  const values: number[] = [];
  for (const key in repeated) {
    const seq = (repeated as Record<string, unknown>)[key];
    if (key === '__proto__' || !Object.hasOwn(repeated, key) || !Number.isSafeInteger(seq) || (seq as number) < 1)
      return null;
    values.push(seq as number);
  }
  // A typed array sorts numbers without a comparator call per pair.
  const sorted = Float64Array.from(values).sort();
  const seqs: number[] = [];
  for (const seq of sorted) if (seqs.length === 0 || seqs[seqs.length - 1] !== seq) seqs.push(seq);
  seqsOfRepeated.set(repeated, seqs);
  return seqs;
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
