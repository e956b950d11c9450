import { z } from 'zod';
import { sha256Hex } from '../hash.ts';

/**
 * What the strategies need to know about the part of the history they were not handed.
 * The session store maintains these at append time, so a turn can read only the tail.
 *
 * - `tool_calls` / `tool_outputs`: function_call and function_call_output items in the
 *   whole history.
 * - `repeat_flags`: one bit per function_call in history order (bit i set = the (i+1)-th
 *   call has the same call key as an earlier call), base64 of a little-endian bit array.
 *   Enough to recompute any epoch schedule for any configuration.
 * - `repeated`: for every call key seen at least twice, the seq of its newest function_call.
 */
export const historyAggregatesSchema = z
  .object({
    tool_calls: z.number().int().nonnegative(),
    tool_outputs: z.number().int().nonnegative(),
    repeat_flags: z.string(),
    repeated: z.record(z.string(), z.number().int().positive()),
  })
  .strict();
export type HistoryAggregates = z.infer<typeof historyAggregatesSchema>;

/**
 * The identity of a call for repeat detection: name plus canonical arguments (object keys
 * sorted recursively; call_id ignored). Unparseable arguments are taken as raw text.
 * Returns 24 hex characters (96 bits) of a SHA-256.
 */
export function callKey(name: string, argumentsText: string): string {
  let canonical: string;
  try {
    canonical = JSON.stringify(sortKeys(JSON.parse(argumentsText)));
  } catch {
    canonical = `raw:${argumentsText}`;
  }
  return sha256Hex(`${name}\n${canonical}`).slice(0, 24);
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    const sorted: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) sorted[key] = sortKeys((value as Record<string, unknown>)[key]);
    return sorted;
  }
  return value;
}
