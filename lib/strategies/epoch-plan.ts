import { lowerBound } from '../sorted.ts';
import type { StrategyConfig } from './strategy-config.ts';

/** Whether a call with index in [from, to) (0-based, history order) repeats an earlier call. */
export type RepeatsIn = (from: number, to: number) => boolean;

/**
 * RepeatsIn over the indices of the repeating calls, ascending: a search, so a plan over
 * hundreds of thousands of calls looks at each epoch once, not at each call. A plan asks with
 * `from` ascending, so each search gallops on from where the one before ended (steps doubling,
 * then a binary search between the last two), a few steps where a binary search over all of
 * them takes about log2 of the repeats; a `from` below the one before searches them all.
 */
export function repeatsAmong(indices: ArrayLike<number>): RepeatsIn {
  let at = 0;
  let asked = Number.NEGATIVE_INFINITY;
  return (from, to) => {
    at = from >= asked ? gallop(indices, from, at) : lowerBound(indices, from);
    asked = from;
    return at < indices.length && indices[at]! < to;
  };
}

/** lowerBound of `target` in ascending `values`, every value before `start` being below it. */
function gallop(values: ArrayLike<number>, target: number, start: number): number {
  let low = start;
  let bound = start;
  for (let step = 1; bound < values.length && values[bound]! < target; step *= 2) {
    low = bound + 1;
    bound = low + step;
  }
  return lowerBound(values, target, low, Math.min(bound, values.length));
}

/**
 * Where the epoch boundary stands for a given number of tool calls. Counting tool calls
 * newest-first (newest = position 1): positions 1..keepFull stay whole, the next
 * `compacted` are compacted, older ones are dropped.
 */
export interface EpochPlan {
  /** Tool calls up to the current epoch boundary. */
  pinned: number;
  /** 0-based index of the current epoch. */
  epoch: number;
  /** Size of the current epoch (calls it may hold before the boundary advances). */
  epochSize: number;
  /** `new + full`: the newest calls kept whole. */
  keepFull: number;
  /** Calls compacted before the kept-whole ones. */
  compacted: number;
}

/**
 * shorten_tools_epoch's boundary (docs/CONFIGURATION.md, "Strategies"): null (nothing changes) at or below
 * `epoch_tool_call_threshold` calls or when `epoch_size` is not positive. Otherwise
 * `overflow = total - threshold`, `epoch = (overflow - 1) div epoch_size`,
 * `pinned = threshold + epoch * epoch_size`, `new = total - pinned`, keepFull = new + full.
 *
 * Example (threshold 100, full 10, compacted 40, size 10): 101 calls -> 11 whole, 40
 * compacted, 50 dropped; 110 -> 20/40/50; 111 -> 11/40/60.
 */
export function epochPlan(toolCalls: number, config: StrategyConfig): EpochPlan | null {
  const size = config.epoch_size;
  const threshold = config.epoch_tool_call_threshold;
  if (size <= 0 || toolCalls <= threshold) return null;
  const epoch = Math.floor((toolCalls - threshold - 1) / size);
  const pinned = threshold + epoch * size;
  return {
    pinned,
    epoch,
    epochSize: size,
    keepFull: toolCalls - pinned + config.epoch_full_tool_calls,
    compacted: config.epoch_compacted_tool_calls,
  };
}

/**
 * shorten_tools_epoch_increment's boundary. Epochs follow each other from the threshold.
 * Epoch k has a nominal size
 *   min(sizeCap, epoch_size + floor(k / epochs_per_increase) * size_increase + carried)
 * where `carried` is repeat_increase times the number of earlier epochs whose nominal part
 * held a repeated call. When the nominal part of epoch k (its first `nominal` calls, as far
 * as they exist) holds a call flagged as a repeat, epoch k itself is `repeat_increase`
 * longer (once, however many repeats; capped), and the increase carries into later
 * epochs. sizeCap = max(max_size, epoch_size), so a maximum below the initial size never
 * shrinks it. The compacted window of an epoch is
 *   min(max(max_compacted, compacted), compacted + floor(ratio * (nominal - epoch_size)))
 * computed from the nominal size, so it is fixed for the whole epoch (a repeat arriving
 * inside the current epoch delays the boundary but does not move the compacted region).
 *
 * Example (defaults: threshold 50, full 20, compacted 80, size 20, growth every 3 epochs by
 * 10, no repeats): epochs 51-70, 71-90, 91-110, then 30-call epochs 111-140, 141-170,
 * 171-200. At 51 calls: 21 whole, 30 compacted, 0 dropped; at 200 calls: new 30, so 50
 * whole, 100 compacted (80 + 2.0 * 10), 50 dropped.
 */
export function incrementEpochPlan(toolCalls: number, config: StrategyConfig, repeatsIn: RepeatsIn): EpochPlan | null {
  const initial = config.epoch_size;
  const threshold = config.epoch_tool_call_threshold;
  if (initial <= 0 || toolCalls <= threshold) return null;
  const sizeCap = Math.max(config.epoch_increment_max_size, initial);
  const perIncrease = config.epoch_increment_epochs_per_increase;
  const repeatIncrease = config.epoch_increment_repeat_increase;
  // Whether the nominal size stops growing once repeats stop adding to it.
  const noPeriodicGrowth = perIncrease <= 0 || config.epoch_increment_size_increase === 0;
  let pinned = threshold;
  let epoch = 0;
  let carried = 0;
  for (;;) {
    const periodic = perIncrease > 0 ? Math.floor(epoch / perIncrease) * config.epoch_increment_size_increase : 0;
    const nominal = Math.min(sizeCap, initial + periodic + carried);
    // From here on every epoch has this size, whatever its repeats: the nominal size never
    // shrinks (its parts only grow), so at the cap it stays there, and without periodic or
    // repeat growth it stays as it is. The epoch of `toolCalls` is then a division away, so
    // a plan over a long history walks a few epochs, not one per `sizeCap` calls.
    if (nominal === sizeCap || (repeatIncrease === 0 && noPeriodicGrowth)) {
      const skipped = Math.max(0, Math.ceil((toolCalls - pinned) / nominal) - 1);
      pinned += skipped * nominal;
      epoch += skipped;
      return incrementPlan(toolCalls, config, pinned, epoch, nominal, nominal);
    }
    // Call number c (1-based) has index c - 1.
    const repeat = repeatsIn(pinned, Math.min(toolCalls, pinned + nominal));
    const size = repeat ? Math.min(sizeCap, nominal + repeatIncrease) : nominal;
    if (toolCalls <= pinned + size) return incrementPlan(toolCalls, config, pinned, epoch, size, nominal);
    pinned += size;
    if (repeat) carried += repeatIncrease;
    epoch += 1;
  }
}

/** The plan of epoch `epoch`, starting after `pinned` calls, of `size` calls (`nominal` before its repeat growth). */
function incrementPlan(
  toolCalls: number,
  config: StrategyConfig,
  pinned: number,
  epoch: number,
  size: number,
  nominal: number,
): EpochPlan {
  const compactedCap = Math.max(config.epoch_increment_max_compacted_tool_calls, config.epoch_compacted_tool_calls);
  const growth = Math.floor(config.epoch_increment_compacted_growth_ratio * (nominal - config.epoch_size));
  return {
    pinned,
    epoch,
    epochSize: size,
    keepFull: toolCalls - pinned + config.epoch_full_tool_calls,
    compacted: Math.min(compactedCap, config.epoch_compacted_tool_calls + growth),
  };
}
