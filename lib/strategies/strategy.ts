import type { z } from 'zod';
import type { TailRequirement } from '../history.ts';
import type { PromptItem } from '../items.ts';
import type { HistoryAggregates } from './aggregates.ts';
import type { HistoryIndex } from './history-index.ts';
import type { StrategyConfig } from './strategy-config.ts';

export type { TailRequirement } from '../history.ts';

/** What a strategy gets besides the items and the resolved config. */
export interface StrategyContext {
  /** Resolved thresholds; the defaults when absent. */
  config?: StrategyConfig;
  /** Read for PROMPT_STRATEGY when the strategy list is undefined. */
  env?: Record<string, string | undefined>;
  /** Present when the items are only a tail view of the history (see `selectTail`). */
  aggregates?: HistoryAggregates;
  /**
   * The items are a compacted context read whole from its start (its summary first): an
   * output answering a call before the start is kept (lib/strategies/history-index.ts).
   */
  compactedContext?: boolean;
  /** Called where `inbox` stands in the list; appends the delivered notices. */
  inbox?: (items: PromptItem[]) => PromptItem[];
  /** Named strategies to resolve from; the built-ins when absent. */
  registry?: StrategyRegistry;
  /**
   * The first seq of the newest turn's input (a turn's, or a stateless call's items after its last
   * call or answer): `shorten_images` keeps its images whole. Absent for the preview without input.
   */
  inputFromSeq?: number | undefined;
  /** Set by the dispatcher: positions and repeat facts of the whole history. */
  history?: HistoryIndex;
}

/**
 * A named prompt strategy. `apply` is synchronous and pure: it returns a new array (items
 * it keeps whole are the same objects, shortened ones are new) and never mutates its input.
 */
export interface Strategy {
  name: string;
  /** The part of the strategy config this strategy reads. */
  configSchema: z.ZodType;
  apply(items: readonly PromptItem[], config: StrategyConfig, context: StrategyContext): PromptItem[];
  /**
   * How much history the strategy needs to give the same output on a tail view as on the
   * whole history. Absent: the whole history. `null`: the strategy keeps tool items as they
   * are, so it needs whatever the other strategies of the list need (a list of only such
   * strategies needs the whole history).
   */
  tailRequirement?(config: StrategyConfig, aggregates: HistoryAggregates): TailRequirement | null;
  /**
   * For a strategy whose `tailRequirement` is null that still counts items of the history (as
   * `shorten_images` counts images): how many of the newest tool calls it needs in the tail,
   * stored whole, when the other strategies of the list cut it.
   */
  tailCalls?(config: StrategyConfig, aggregates: HistoryAggregates): number;
}

/** Maps names to strategies. Immutable: `with` returns a new registry. */
export interface StrategyRegistry {
  /** The strategy of that name; throws UnknownStrategyError listing the known names. */
  get(name: string): Strategy;
  has(name: string): boolean;
  names(): string[];
  /** A registry with these strategies added (a name already known throws). */
  with(...strategies: Strategy[]): StrategyRegistry;
}
