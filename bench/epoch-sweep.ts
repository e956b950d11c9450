import { defaultStrategyConfig, type StrategyConfig } from '../lib/strategies/strategy-config.ts';
import type { BillingTotals } from './cache-billing.ts';
import { simulatePromptCache, type PromptCacheOptions } from './prompt-cache.ts';

/**
 * A sweep of the epoch settings (`epoch_tool_call_threshold` x `epoch_size`, the other keys at
 * their defaults) of both epoch strategies over one simulated session, each billed by the
 * Anthropic and OpenAI models of bench/cache-billing.ts, against the prompt size it leaves.
 */

export const SWEEP_STRATEGIES = ['shorten_tools_epoch', 'shorten_tools_epoch_increment'] as const;
export const SWEEP_THRESHOLDS = [25, 50, 100] as const;
export const SWEEP_SIZES = [10, 20, 40] as const;

export interface SweepPoint {
  strategy: (typeof SWEEP_STRATEGIES)[number];
  threshold: number;
  size: number;
  /** Both keys at their defaults. */
  isDefault: boolean;
  meanPromptTokens: number;
  maxPromptTokens: number;
  anthropic: BillingTotals;
  openai: BillingTotals;
}

export interface EpochSweep {
  toolCalls: number;
  seed: number;
  points: SweepPoint[];
}

export function sweepEpochSettings(options: PromptCacheOptions & { toolCalls: number; seed: number }): EpochSweep {
  const defaults = defaultStrategyConfig();
  const points: SweepPoint[] = [];
  for (const strategy of SWEEP_STRATEGIES) {
    for (const threshold of SWEEP_THRESHOLDS) {
      for (const size of SWEEP_SIZES) {
        const config: StrategyConfig = { ...defaults, epoch_tool_call_threshold: threshold, epoch_size: size };
        const [run] = simulatePromptCache({ ...options, config }, [
          { name: strategy, label: strategy, spec: strategy },
        ]);
        const billing = run!.billing;
        points.push({
          strategy,
          threshold,
          size,
          isDefault: threshold === defaults.epoch_tool_call_threshold && size === defaults.epoch_size,
          meanPromptTokens: billing.meanPromptTokens,
          maxPromptTokens: billing.maxPromptTokens,
          anthropic: billing.anthropic,
          openai: billing.openai,
        });
      }
    }
  }
  return { toolCalls: options.toolCalls, seed: options.seed, points };
}

/** The points no other point beats on both cost and mean prompt size, by ascending prompt size. */
export function paretoFront(points: readonly SweepPoint[], cost: (point: SweepPoint) => number): SweepPoint[] {
  const front = points.filter(
    (point) =>
      !points.some(
        (other) =>
          other !== point &&
          cost(other) <= cost(point) &&
          other.meanPromptTokens <= point.meanPromptTokens &&
          (cost(other) < cost(point) || other.meanPromptTokens < point.meanPromptTokens),
      ),
  );
  return front.sort((a, b) => a.meanPromptTokens - b.meanPromptTokens);
}

export const pointName = (point: SweepPoint): string =>
  `${point.strategy === 'shorten_tools_epoch' ? 'epoch' : 'increment'} t${point.threshold}/s${point.size}`;
