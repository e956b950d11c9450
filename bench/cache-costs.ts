import {
  ANTHROPIC_CACHE_TTL_MS,
  ANTHROPIC_LOOKBACK,
  ANTHROPIC_MIN_TOKENS,
  ANTHROPIC_READ_MULTIPLIER,
  ANTHROPIC_WRITE_MULTIPLIER,
  OPENAI_CACHED_MULTIPLIER,
  OPENAI_MIN_TOKENS,
  OPENAI_STEP_TOKENS,
  TURN_INTERVAL_MS,
} from './cache-billing.ts';
import { type EpochSweep, paretoFront, pointName, type SweepPoint, sweepEpochSettings } from './epoch-sweep.ts';
import { type CacheRun, simulatePromptCache, TOOLS_CHARACTERS } from './prompt-cache.ts';

/**
 * The `cache` section's billed costs: every strategy under each provider's billing model, the
 * Anthropic cache-read share over the first `FIRST_CALLS` model calls, and the epoch sweep.
 */

export const FIRST_CALLS = 160;
export const ANTHROPIC_READ_GOAL = 0.85;

export interface CacheCosts {
  /** The first `FIRST_CALLS` model calls of the session, every strategy. */
  firstCalls: CacheRun[];
  sweep: EpochSweep;
  sweepChart: string;
}

export function measureCacheCosts(options: {
  toolCalls: number;
  sweepToolCalls: number;
  seed: number;
  log: (line: string) => void;
}): Omit<CacheCosts, 'sweepChart'> {
  const firstCalls = simulatePromptCache({ toolCalls: options.toolCalls, seed: options.seed, maxCalls: FIRST_CALLS });
  for (const run of firstCalls)
    options.log(
      `  first ${FIRST_CALLS} calls, ${run.name}: Anthropic reads ${percent(run.billing.anthropic.readShare)} ` +
        `(one breakpoint at the stable end: ${percent(run.billing.anthropicStableEnd.readShare)})`,
    );
  options.log(`epoch sweep: ${options.sweepToolCalls} tool calls (bench/epoch-sweep.ts)`);
  const sweep = sweepEpochSettings({ toolCalls: options.sweepToolCalls, seed: options.seed });
  return { firstCalls, sweep };
}

const percent = (share: number) => `${(share * 100).toFixed(1)}%`;
const millions = (tokens: number) => `${(tokens / 1e6).toFixed(2)} M`;
const thousands = (tokens: number) => `${(tokens / 1e3).toFixed(1)} k`;

/** The goal row: Anthropic cache reads over the first calls with the default strategy. */
export function anthropicReadGoal(costs: CacheCosts): {
  goal: string;
  target: string;
  measured: string;
  met: boolean;
} {
  const run = costs.firstCalls.find((entry) => entry.name === 'shorten_tools_epoch_increment')!;
  const stableEnd = percent(run.billing.anthropicStableEnd.readShare);
  return {
    goal:
      `Anthropic cache-read share, first ${FIRST_CALLS} model calls, ` +
      'default strategy (billed as Anthropic matches)',
    target: `>= ${ANTHROPIC_READ_GOAL * 100}%`,
    measured: `${percent(run.billing.anthropic.readShare)} (one breakpoint at the stable end: ${stableEnd})`,
    met: run.billing.anthropic.readShare >= ANTHROPIC_READ_GOAL,
  };
}

/** The markdown of the billed costs, for the `cache` section of RESULTS.md. */
export function cacheCostsMarkdown(runs: readonly CacheRun[], costs: CacheCosts): string[] {
  const lines = [
    '### Billed as the providers bill it',
    '',
    `The same prompts, with ${TOOLS_CHARACTERS.toLocaleString('en-US')} characters of tool definitions before them, ` +
      "billed by each provider's matching rule (bench/cache-billing.ts), " +
      'in tokens estimated at 4 characters of wire JSON each; ' +
      "a cost is in tokens at that provider's base input price " +
      '(compare rows within a provider, not across). ' +
      'Anthropic: breakpoints where the adapter places them ' +
      '(lib/models/cache-breakpoints.ts: last tool, instructions, the last two blocks, ' +
      'the stable end with a slot left), ' +
      `a read at a breakpoint or ${ANTHROPIC_LOOKBACK - 1} blocks before it, ` +
      `prefixes under ${ANTHROPIC_MIN_TOKENS.toLocaleString('en-US')} tokens not cached, ` +
      `a ${ANTHROPIC_CACHE_TTL_MS / 60_000}-minute lifetime with a model call every ${TURN_INTERVAL_MS / 1000} s ` +
      '(a tool loop never lets it lapse), ' +
      `reads ${ANTHROPIC_READ_MULTIPLIER}x, writes ${ANTHROPIC_WRITE_MULTIPLIER}x. ` +
      '"One breakpoint" is the placement before: only at the end of the stable prefix. ' +
      `OpenAI: the common prefix with the previous prompt, in ${OPENAI_STEP_TOKENS}-token steps ` +
      `from ${OPENAI_MIN_TOKENS.toLocaleString('en-US')} tokens, ` +
      `cached input at ${OPENAI_CACHED_MULTIPLIER}x (the GPT-4o rate; ` +
      "OpenAI's guide gives up to 90% off on newer models, which favours caching strategies more).",
    '',
    '| strategy | mean prompt | max prompt | Anthropic: read share | Anthropic: cost (x no cache) | ' +
      'Anthropic, one breakpoint: read share | cost | OpenAI: cached share | OpenAI: cost (x no cache) |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (const run of runs) {
    const { anthropic, anthropicStableEnd, openai } = run.billing;
    lines.push(
      `| ${run.label} | ${thousands(run.billing.meanPromptTokens)} | ${thousands(run.billing.maxPromptTokens)} | ` +
        `${percent(anthropic.readShare)} | ${millions(anthropic.cost)} (${anthropic.costRatio.toFixed(2)}) | ` +
        `${percent(anthropicStableEnd.readShare)} | ${millions(anthropicStableEnd.cost)} | ` +
        `${percent(openai.readShare)} | ${millions(openai.cost)} (${openai.costRatio.toFixed(2)}) |`,
    );
  }
  lines.push(
    '',
    `First ${FIRST_CALLS} model calls of the same session ` +
      '(Anthropic read share; the longest-common-prefix bound next to it):',
    '',
    '| strategy | Anthropic read share | one breakpoint | common-prefix bound |',
    '|---|---|---|---|',
  );
  for (const run of costs.firstCalls) {
    lines.push(
      `| ${run.name} | ${percent(run.billing.anthropic.readShare)} | ` +
        `${percent(run.billing.anthropicStableEnd.readShare)} | ${percent(run.totals.reusableShare)} |`,
    );
  }
  lines.push(...sweepMarkdown(costs));
  return lines;
}

function sweepMarkdown(costs: CacheCosts): string[] {
  const { sweep } = costs;
  const lines = [
    '',
    '### Epoch settings against cost',
    '',
    'Every `epoch_tool_call_threshold` x `epoch_size` pair below (other keys at their defaults), ' +
      'both epoch strategies, over the first ' +
      `${sweep.toolCalls.toLocaleString('en-US')} tool calls of the session (bench/epoch-sweep.ts), billed as above. ` +
      'Costs in million base-price tokens; ' +
      '"front" marks the settings on the Pareto front of cost against mean prompt size for that provider.',
    '',
    '| strategy | threshold | epoch size | mean prompt | max prompt | ' +
      'Anthropic cost | Anthropic read share | OpenAI cost |',
    '|---|---|---|---|---|---|---|---|',
  ];
  const anthropicFront = new Set(paretoFront(sweep.points, (point) => point.anthropic.cost));
  const openaiFront = new Set(paretoFront(sweep.points, (point) => point.openai.cost));
  const mark = (front: Set<SweepPoint>, point: SweepPoint) => (front.has(point) ? ' (front)' : '');
  for (const point of sweep.points) {
    lines.push(
      `| ${point.strategy}${point.isDefault ? ' (defaults)' : ''} | ${point.threshold} | ${point.size} | ` +
        `${thousands(point.meanPromptTokens)} | ${thousands(point.maxPromptTokens)} | ` +
        `${millions(point.anthropic.cost)}${mark(anthropicFront, point)} | ${percent(point.anthropic.readShare)} | ` +
        `${millions(point.openai.cost)}${mark(openaiFront, point)} |`,
    );
  }
  const cheapest = (cost: (point: SweepPoint) => number) =>
    sweep.points.reduce((best, point) => (cost(point) < cost(best) ? point : best));
  const smallest = sweep.points.reduce((best, point) =>
    point.meanPromptTokens < best.meanPromptTokens ? point : best,
  );
  const cheapestAnthropic = pointName(cheapest((point) => point.anthropic.cost));
  const cheapestOpenai = pointName(cheapest((point) => point.openai.cost));
  lines.push(
    '',
    `Cheapest under Anthropic: ${cheapestAnthropic}; under OpenAI: ${cheapestOpenai}; ` +
      `smallest prompts: ${pointName(smallest)}. ` +
      'lib/strategies/README.md ("Choosing epoch settings") says what to pick for each provider.',
    '',
    `![cost against mean prompt size for each epoch setting](${costs.sweepChart})`,
    '',
  );
  return lines;
}
